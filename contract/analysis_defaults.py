"""The analysis defaults (contract): what a conclusion is drawn on when the user does not say.

Every signature that takes these (results_db's AnalysisMixin and rules, the CLI's options, the
dashboard's reads) names them here, so the leaderboard, the CLI and the dashboard cannot drift
apart on which metric ranks, how small an effect matters or when an LR counts as degraded.
"""

from __future__ import annotations

from contract.metrics import VAL_LOSS, VAL_PPL

METRIC = VAL_PPL  # what the leaderboard, effects and scaling rank by
MIN_EFFECT = 0.01  # the smallest relative change that matters (1 %): "within noise", seeds needed
STABILITY_METRIC = VAL_LOSS  # what the LR-stability rule reads (the final validation loss)
STABILITY_TOL = 0.05  # degraded: mean above the variant's best by more than 5 %
FAMILY_ERROR = 0.05  # the error rate a verdict is read at: per row (95 % CIs), or family-wise
CORRECTION = "none"  # the leaderboard's multiplicity rule (results_db/analysis/multiplicity.py)
