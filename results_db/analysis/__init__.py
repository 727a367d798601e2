"""What a result means, decided once: baseline rule, statistics, deltas with CIs, verdicts,
main effects and LR stability. Pure polars/math (no SQL, no torch); ResultsDB exposes it
through AnalysisMixin (results_db/analysis/api.py)."""
