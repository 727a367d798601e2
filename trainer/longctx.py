"""Long-context extrapolation: PPL and needle recall past the training length.

For each factor f in ``spec.eval.longctx.factors`` the model reads held-out sequences of
``f * train.seq_len`` tokens from the run's own data (``DataStream.val_batch`` at that length;
for the synthetic source its copy pattern then spans ``f/2`` training lengths), once per RoPE
extension method:

- ``none``: plain RoPE at unseen positions (pure extrapolation);
- ``linear`` / ``ntk`` / ``yarn``: ``trainer.rope.RopeScaling(method, factor=f,
  original_max_len=train.seq_len)``: the scale factor is the ratio of the evaluated length to
  the training length ("dynamic" scaling per length). At 1x every method is plain RoPE, so it
  is evaluated once and reported under each method.

Metrics, summary names ``longctx/<method>/<f>x/<metric>`` (contract.metrics.longctx):
- ``ppl``: exp of the mean next-token cross-entropy over the whole sequence;
- ``tail_ppl``: the same over the last ``train.seq_len`` positions only, the part that lies
  wholly beyond the trained positions (at 1x equal to ``ppl``);
- ``retrieval_acc`` (when ``longctx.retrieval``): a key-value needle (``KEY_LEN`` random key
  tokens then ``VALUE_LEN`` random value tokens) is written into the first tenth of the
  sequence; the sequence ends with the key again and then its value. A trial counts as recalled
  when every value token is the model's argmax under teacher forcing, i.e. greedy decoding after
  the key reproduces the value exactly. The needle sits ~0.9 * f * seq_len tokens back, so the
  distance grows with the factor (a small stand-in for RULER's needle tasks).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, cast

import torch
import torch.nn.functional as F
from torch import nn

from contract.config import LongContextConfig, RunSpec
from contract.metrics import longctx
from trainer.data import DataStream, build_source
from trainer.rope import RopeMethod, RopeScaling

if TYPE_CHECKING:
    from trainer.model import GatedLM

KEY_LEN = 4
VALUE_LEN = 4
NEEDLE_SPAN = 0.1  # the needle starts in the first tenth of the sequence


def model_logits(model: nn.Module, idx: torch.Tensor) -> torch.Tensor:
    """(B, T) token ids -> (B, T, V) float32 logits, for a GatedLM (ModelOutput) or a plain net.

    Lives here (not in lm_eval_adapter) so long-context evaluation needs no lm-eval.
    """
    out = model(idx)
    logits = out.logits if hasattr(out, "logits") else out
    return cast(torch.Tensor, logits).float()


def scaling_for(method: RopeMethod, factor: int, train_len: int) -> RopeScaling | None:
    """The RoPE scaling evaluated for ``method`` at ``factor`` x the training length."""
    if method == "none" or factor == 1:
        return None
    return RopeScaling(method=method, factor=float(factor), original_max_len=train_len)


# ---------------------------------------------------------------------- data
def long_batches(spec: RunSpec, factor: int, n_batches: int, batch_size: int
                 ) -> list[torch.Tensor]:
    """``n_batches`` held-out (batch_size, factor * seq_len + 1) token batches."""
    length = factor * spec.train.seq_len
    try:
        source = build_source(spec.data, spec.model.vocab_size, length)
    except ValueError as exc:
        raise ValueError(f"eval.longctx.factors: {factor}x needs held-out sequences of "
                         f"{length + 1} tokens, which the run's data cannot supply: {exc}") from exc
    stream = DataStream(source, spec.seed, batch_size, length)
    out = []
    for i in range(n_batches):
        inputs, targets = stream.val_batch(i)  # (B, L), (B, L)
        out.append(torch.cat([inputs, targets[:, -1:]], dim=1))  # (B, L + 1)
    return out


@dataclass(frozen=True)
class RetrievalBatch:
    tokens: torch.Tensor  # (B, L + 1) the sequence with the needle and the query
    values: torch.Tensor  # (B, VALUE_LEN) the value tokens to recall (the last VALUE_LEN)
    needle_pos: torch.Tensor  # (B,) where the key starts in the haystack
    distance: float  # mean tokens between the needle's value and its recall


def make_retrieval_batch(haystack: torch.Tensor, vocab_size: int, seed: int) -> RetrievalBatch:
    """Write a key-value needle into ``haystack`` (B, N) and end it with key + value."""
    B, N = haystack.shape
    need = 2 * (KEY_LEN + VALUE_LEN)
    if N < need + 1:
        raise ValueError(f"eval.longctx: sequences of {N} tokens are too short for a needle "
                         f"({need + 1} needed)")
    g = torch.Generator().manual_seed(seed * 1_000_003 + N)  # same needles for every method
    key = torch.randint(vocab_size, (B, KEY_LEN), generator=g)
    value = torch.randint(vocab_size, (B, VALUE_LEN), generator=g)
    span = max(1, int((N - need) * NEEDLE_SPAN))
    pos = torch.randint(span, (B,), generator=g)
    seq = haystack.clone()
    kv = torch.cat([key, value], dim=1)  # (B, KEY_LEN + VALUE_LEN)
    for b in range(B):
        seq[b, pos[b]:pos[b] + kv.size(1)] = kv[b]
    seq[:, N - kv.size(1):] = kv  # the query: key, then the value to recall
    value_end = (pos + kv.size(1)).float()
    distance = float(((N - VALUE_LEN) - value_end).mean())
    return RetrievalBatch(seq, value, pos, distance)


def retrieval_hits(logits: torch.Tensor, values: torch.Tensor) -> torch.Tensor:
    """(B, T, V) logits of inputs tokens[:, :-1] and (B, K) values at the end -> (B,) bool.

    The last K targets are the value tokens, predicted by the last K positions.
    """
    k = values.size(1)
    pred = logits[:, -k:].argmax(dim=-1)  # (B, K)
    return (pred == values).all(dim=1)


# ---------------------------------------------------------------------- evaluation
@torch.inference_mode()
def sequence_nll(model: nn.Module, tokens: torch.Tensor, device: torch.device | str
                 ) -> torch.Tensor:
    """(B, L + 1) tokens -> (B, L) next-token negative log-likelihoods (float32, CPU)."""
    tokens = tokens.to(device)
    logits = model_logits(model, tokens[:, :-1])  # (B, L, V)
    nll = F.cross_entropy(logits.transpose(1, 2), tokens[:, 1:], reduction="none")
    return nll.cpu()


@torch.inference_mode()
def evaluate_length(model: nn.Module, batches: list[torch.Tensor], train_len: int,
                    vocab_size: int, retrieval: bool, device: torch.device | str
                    ) -> dict[str, float]:
    """ppl / tail_ppl / retrieval_acc of ``model`` (its RoPE scaling already set)."""
    nll = torch.cat([sequence_nll(model, b, device) for b in batches])  # (N, L)
    out = {"ppl": math.exp(nll.mean().item()),
           "tail_ppl": math.exp(nll[:, -train_len:].mean().item())}
    if retrieval:
        hits = []
        for i, b in enumerate(batches):
            rb = make_retrieval_batch(b, vocab_size, seed=i)
            logits = model_logits(model, rb.tokens[:, :-1].to(device)).cpu()
            hits.append(retrieval_hits(logits, rb.values))
        out["retrieval_acc"] = torch.cat(hits).float().mean().item()
    return out


def evaluate_longctx(model: nn.Module, spec: RunSpec, cfg: LongContextConfig | None = None, *,
                     device: torch.device | str = "cpu", batch_size: int = 2
                     ) -> dict[str, float]:
    """Every (method, factor) of ``cfg`` -> ``longctx/<method>/<f>x/<metric>`` values.

    The model's RoPE scaling is restored afterwards, whatever happens.
    """
    cfg = cfg or spec.eval.longctx or LongContextConfig()
    if not hasattr(model, "set_rope_scaling"):
        raise TypeError("evaluate_longctx: the model has no set_rope_scaling(); pass a GatedLM")
    train_len, previous = spec.train.seq_len, getattr(model, "rope_scaling", None)
    was_training = model.training
    model.eval()
    results: dict[str, float] = {}
    try:
        for factor in sorted(set(cfg.factors)):
            batches = long_batches(spec, factor, cfg.batches, batch_size)
            done: dict[RopeScaling | None, dict[str, float]] = {}
            for method in cfg.methods:
                scaling = scaling_for(method, factor, train_len)
                if scaling not in done:
                    cast("GatedLM", model).set_rope_scaling(scaling)
                    done[scaling] = evaluate_length(model, batches, train_len,
                                                    spec.model.vocab_size, cfg.retrieval, device)
                for metric, value in done[scaling].items():
                    results[longctx(method, factor, metric)] = value
    finally:
        cast("GatedLM", model).set_rope_scaling(previous)
        model.train(was_training)
    return results
