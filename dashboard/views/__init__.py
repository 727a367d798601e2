"""One module per dashboard page; each exposes ``render(url, sweep)``.

  findings.py    the first screen: the study's answers (db.findings)
  overview.py    sweeps overview: counts by state, progress, live runs
  leaderboard.py which variants beat the baseline beyond noise
  ablation.py    ablation tables in the paper's layout
  curves.py      training curves
  probes.py      first-token attention, max activation, gate score per layer
  stability.py   LR stability (the paper's Table 2 question)
  scaling.py     does a variant's gain survive scale
  decide.py      a ``decide:`` sweep's rows and how they narrowed
  explore.py     slice a sweep's runs by any config key
  run_detail.py  one run: status, attempts, curves, config
  common.py      widgets shared by several pages
"""
