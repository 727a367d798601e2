"""gatesweep's dashboard (Streamlit): formats what results_db computes; its one write, the rerun
button, goes through the orchestrator's rerun path.

  app.py        the Streamlit app (`orchestrator dashboard` runs it)
  views/        one module per page
  report/       the sweep report as one HTML or Markdown file
  data.py       cached reads of the results DB: the only module that talks to it
  status.py     sweep status as one wide row per sweep
  tables.py     formatting of table cells: numbers, delta with its CI, row labels
  boardtable.py THE leaderboard as text (Leaderboard page and report)
  scalingtable.py scaling readings with their LR and step (Scaling page and report)
  ablation.py   the paper's ablation layouts for any sweep
  factorialtable.py a 2x2's cells and contrasts as text (Ablation tables page and report)
  longctx.py    the long-context table (paper Table 5 style)
  paper.py      the paper's reference figures and which variant each row matches
  labels.py     paper-style labels of a variant from its gate columns
  charts.py     Altair charts and the loss-spike marker
  palette.py    one colour per variant on every chart and table
  curvedata.py  training curves shaped for display (EMA, seed bands)
  compare.py    run comparison: parallel coordinates and the config diff
  configdiff.py two RunSpec documents flattened, the differing keys listed
  explore.py    the Explore page's frames (slicing by any varying config key)
  provenance.py provenance as display strings
  export.py     table export: CSV, Markdown and LaTeX
  mdtext.py     DB text made safe inside Streamlit Markdown
  urlstate.py   a page's view kept in the URL: the one parser of a link's values
  jsontext.py   JSON from a link or the DB parsed within size and depth bounds
"""
