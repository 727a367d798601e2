"""The sweep report: one self-contained HTML file, or Markdown with SVG figures
beside it, holding what a sweep showed -- the answers first (db.findings), then the details:
every (variant, LR) row with CIs and per-seed dots, the ablation tables beside the paper's
figures, LR stability, scaling, training curves, probes, each variant's config diff vs the
baseline, and the provenance of every run.

    python -m dashboard.report SWEEP --db URL --out report.html [--format html|markdown]

(``orchestrator report`` runs it so, as ``orchestrator dashboard`` runs Streamlit: the
orchestrator sits below the dashboard and never imports it.) Every number comes from
results_db (the statistics' one owner); every chart is the dashboard's own Altair spec
(dashboard/charts.py, views/stability.py, views/scaling.py), embedded as Vega-Lite JSON and
drawn by the Vega libraries inlined from the vl-convert-python package: no server, no network.

- model.py: what a report holds (sections of sentences, tables and charts);
- answers.py: the first page (the study's answers, the scaling readings with LR and step);
- content.py / runs.py: the other sections, from the results DB;
- html.py / markdown.py: the two formats; vega.py: the JS bundle and static figures;
- bundlecache.py: the bundle's cache, private and checked (it is inlined into reports);
- __main__.py: the command line above.
"""
