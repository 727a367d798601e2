"""SQL of the views ``run_summary`` and ``leaderboard`` (created by migration 0001).

This is the SQL of revision 0001 and is frozen with it: a later revision that changes a view
drops it and creates it from SQL of its own (and restores this SQL in its downgrade), leaving
this module as it is. 0009 recreates ``run_summary`` over a column list of its own
(``run_summary_sql(run_dims)``: every run dimension of contract/dimensions.py at that revision).

``run_summary``: one row per run -- its dimensions plus the key summaries pivoted into columns
(``val/ppl`` -> ``val_ppl``...). ``leaderboard``: per sweep, variant and seed-replicate group
(``group_key``: same config but the seed, so an LR axis does not mix learning rates): n,
mean, sample std and min of val/ppl over the succeeded seeds, mean val/loss, and how many
seeds diverged. Both read ``summaries``, never ``metrics``.

The ``leaderboard`` view is deliberately RAW: plain per-group aggregates for ad-hoc SQL
(``orchestrator query``). It has no baseline, no delta, no rank, no CI and no verdict -- what a
result means is decided once, in results_db/analysis/ (``db.leaderboard``), never in SQL.
"""

from __future__ import annotations

from alembic import op

PIVOT: tuple[str, ...] = (
    "val/loss", "val/ppl", "train/loss", "probe/first_token_attention", "probe/max_activation",
    "probe/gate_score_mean", "stability/loss_spikes", "stability/diverged",
    "stability/max_grad_norm", "cost/wall_s", "cost/tokens",
)
RUN_DIMS = ("gate_position", "gate_granularity", "gate_sharing", "gate_combine",
            "gate_activation", "gate_input_dependent", "n_gates", "nonlinearity", "lr",
            "n_layer", "d_model", "n_head", "n_kv_head", "moe_experts", "norm_style",
            "switch_head", "params_total", "params_gates")


def column_name(metric: str) -> str:
    return metric.replace("/", "_")


def run_summary_sql(run_dims: tuple[str, ...] = RUN_DIMS) -> str:
    pivots = ",\n  ".join(f"MAX(CASE WHEN s.name = '{m}' THEN s.value END) AS {column_name(m)}"
                          for m in PIVOT)
    dims = ", ".join(f"r.{d}" for d in run_dims)
    return f"""CREATE VIEW run_summary AS
SELECT r.id AS run_id, r.name AS name, w.name AS sweep, r.sweep_id AS sweep_id,
  r.variant AS variant, r.seed AS seed, r.status AS status, {dims},
  r.group_key AS group_key, r.lr_group_key AS lr_group_key, r.updated AS updated,
  {pivots}
FROM runs r JOIN sweeps w ON w.id = r.sweep_id
LEFT JOIN summaries s ON s.run_id = r.id
GROUP BY r.id, r.name, w.name, r.sweep_id, r.variant, r.seed, r.status, {dims},
  r.group_key, r.lr_group_key, r.updated"""


def leaderboard_sql(dialect: str) -> str:
    ok = "CASE WHEN status = 'succeeded' THEN val_ppl END"
    if dialect == "postgresql":
        std = f"stddev_samp({ok})"
    else:  # SQLite: sample std from sums (results_db.engine registers sqrt if it is missing)
        n = f"COUNT({ok})"
        var = f"(SUM(({ok}) * ({ok})) - SUM({ok}) * SUM({ok}) / {n}) / ({n} - 1)"
        std = f"CASE WHEN {n} > 1 THEN sqrt(MAX({var}, 0.0)) END"
    return f"""CREATE VIEW leaderboard AS
SELECT sweep, variant, lr, group_key,
  COUNT({ok}) AS n,
  AVG({ok}) AS mean_val_ppl,
  {std} AS std_val_ppl,
  MIN({ok}) AS min_val_ppl,
  AVG(CASE WHEN status = 'succeeded' THEN val_loss END) AS mean_val_loss,
  SUM(CASE WHEN status = 'diverged' THEN 1 ELSE 0 END) AS n_diverged
FROM run_summary
WHERE status IN ('succeeded', 'diverged')
GROUP BY sweep, variant, lr, group_key"""


def create_views(dialect: str) -> None:
    op.execute(run_summary_sql())
    op.execute(leaderboard_sql(dialect))


def drop_views() -> None:
    op.execute("DROP VIEW IF EXISTS leaderboard")
    op.execute("DROP VIEW IF EXISTS run_summary")
