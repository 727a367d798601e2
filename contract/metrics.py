"""The metric vocabulary shared by trainer, results DB and dashboard (contract).

Per-layer variants append ``/layer_{i}``; per-set validation PPL is ``val/<set>/ppl``;
benchmarks are ``bench/<task>`` (the task's main metric: the first of its metric_list under its
first filter) and ``bench/<task>/<metric>[/<filter>]`` for every metric it reports; long context
is ``longctx/<method>/<factor>x/{ppl,tail_ppl,retrieval_acc}``.
"""

TRAIN_LOSS = "train/loss"
TRAIN_LR = "train/lr"
TRAIN_GRAD_NORM = "train/grad_norm"
TRAIN_TOKENS_PER_S = "train/tokens_per_s"
VAL_LOSS = "val/loss"
VAL_PPL = "val/ppl"
FIRST_TOKEN_ATTENTION = "probe/first_token_attention"
MAX_ACTIVATION = "probe/max_activation"
GATE_SCORE_MEAN = "probe/gate_score_mean"
LOSS_SPIKES = "stability/loss_spikes"
DIVERGED = "stability/diverged"
MAX_GRAD_NORM = "stability/max_grad_norm"
PARAMS_TOTAL = "params/total"
PARAMS_GATES = "params/gates"
WALL_S = "cost/wall_s"
TOKENS = "cost/tokens"
RESUMED_FROM_STEP = "train/resumed_from_step"  # summary: 0 fresh, k when resumed from step k
CLIP_RATE = "stability/clip_rate"  # fraction of clipped values (clip_residual baseline)
MAX_STABLE_LR = "max_stable_lr"  # derived per variant across an LR axis (results_db)


def per_layer(name: str, layer: int) -> str:
    return f"{name}/layer_{layer}"


def val_set_ppl(set_name: str) -> str:
    return f"val/{set_name}/ppl"


def bench(task: str) -> str:
    return f"bench/{task}"


def longctx(method: str, factor: int, metric: str = "ppl") -> str:
    return f"longctx/{method}/{factor}x/{metric}"
