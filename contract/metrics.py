"""The metric vocabulary shared by trainer, results DB and dashboard (contract).

Per-layer variants append ``/layer_{i}``; NSA's branch weights are
``probe/nsa_branch_weight/<branch>[/layer_{i}]``; per-set validation PPL is ``val/<set>/ppl``;
benchmarks are ``bench/<task>`` (the task's main metric: the first of its metric_list under its
first filter) and ``bench/<task>/<metric>[/<filter>]`` for every metric it reports; long context
is ``longctx/<method>/<factor>x/{ppl,tail_ppl,retrieval_acc}``. Every name is spelled here:
other modules use these constants, families and builders (tests/test_vocabulary.py).
"""

import re

# Families: a name's first segment with its "/", what lists group and filter names by.
TRAIN, VAL, PROBE, STABILITY, BENCH, LONGCTX, PARAMS, COST, DATA = (
    "train/", "val/", "probe/", "stability/", "bench/", "longctx/", "params/", "cost/", "data/")

TRAIN_LOSS = "train/loss"
TRAIN_LR = "train/lr"
TRAIN_GRAD_NORM = "train/grad_norm"
TRAIN_TOKENS_PER_S = "train/tokens_per_s"
VAL_LOSS = "val/loss"
VAL_PPL = "val/ppl"
FIRST_TOKEN_ATTENTION = "probe/first_token_attention"
MAX_ACTIVATION = "probe/max_activation"
GATE_SCORE_MEAN = "probe/gate_score_mean"
# + /<branch>: NSA's mean weight of one branch (nsa_branch_weight)
NSA_BRANCH_WEIGHT = "probe/nsa_branch_weight"
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


def nsa_branch_weight(branch: str) -> str:
    """``probe/nsa_branch_weight/<branch>``: the mean weight Native Sparse Attention gives one
    branch (compressed | selected | window: contract.params.NSA_BRANCH_NAMES); per layer, the
    per_layer name of it."""
    return f"{NSA_BRANCH_WEIGHT}/{branch}"


def val_set_ppl(set_name: str) -> str:
    return f"{VAL}{set_name}/ppl"


def data_info(key: str) -> str:
    """``data/<key>``: a summary of the run's data (data/train_tokens, data/val_bytes, ...)."""
    return f"{DATA}{key}"


def bench(task: str, metric: str | None = None, filt: str | None = None) -> str:
    """``bench/<task>`` (the task's main metric), ``bench/<task>/<metric>[/<filter>]``."""
    return "/".join(p for p in (f"{BENCH}{task}", metric, filt) if p)


def is_bench_main(name: str) -> bool:
    """``bench/<task>`` (the task's main metric), not ``bench/<task>/<metric>[/<filter>]``."""
    return name.startswith(BENCH) and name.count("/") == 1


def longctx(method: str, factor: int, metric: str = "ppl") -> str:
    return f"{LONGCTX}{method}/{factor}x/{metric}"


# longctx(method, factor, kind) read back, for the kinds a table shows
LONGCTX_NAME = re.compile(rf"^{LONGCTX}(?P<method>[^/]+)/(?P<factor>[0-9]+)x/"
                          r"(?P<kind>ppl|retrieval_acc)$")
