"""What a result means, decided once: baseline rule, statistics, deltas with CIs, verdicts,
main effects and LR stability. Pure polars/math (no SQL, no torch); ResultsDB exposes it
through AnalysisMixin (api.py), the one module here that reads (results_db/read/frames.py).
A module that builds frames imports polars at its top; the CLI's fast paths (``--help``,
``validate``) read only the frame-free ones: columns, labels, decide_rule, summary and the
interval arithmetic they use (confseq, multiplicity).

  api.py          AnalysisMixin: the ResultsDB methods that turn stored runs into conclusions
  findings.py     THE answers of a study, what every surface says first
  untuned.py      is the baseline tuned at a row's LR (the condition of a per-LR delta)
  baseline.py     THE baseline rule of a sweep
  columns.py      THE column schema of the leaderboard and of the answers
  labels.py       the words the tables and sentences use (no polars: the CLI's fast paths)
  compare.py      seed groups compared with the baseline: n, mean, std, delta, CI, verdict
  stats.py        seed statistics and the uncertainty of a delta
  tdist.py        Student's t quantiles and CDF
  verdict.py      the verdict of one row from its delta CI
  multiplicity.py how many rows are judged at once and at what level
  summary.py      tables said in words: the rule, the main effects, best vs best
  table.py        the ablation table: several metrics side by side
  effects.py      main effects of each dimension (least squares)
  factorial.py    a 2x2 of two binary factors: its cells, main effects and interaction
  bestlr.py       each variant at its best LR against the baseline at its best LR
  stability.py    learning-rate stability (the paper's Table 2)
  scaling.py      does a variant's gain survive scale
  decide_rule.py  what a ``decide:`` block asks (no polars: validating a sweep file)
  sequential.py   the rows of a ``decide:`` sweep, read anytime-validly
  confseq.py      anytime-valid confidence sequences for a paired difference
  signcs.py       a distribution-free one: the sign test's, for the median difference
  pairing.py      what pairing the seeds bought: correlation, seed multiplier
  mixing.py       did the runs a table compares come from the same code
"""
