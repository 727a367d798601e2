"""Long-context extrapolation (docs/architecture.md, "Evaluation"): RoPE scaling on the
frequencies, needle recall on hand-built cases, and finite PPL at every length for a trained
tiny model."""

from __future__ import annotations

import math

import pytest
import torch

from contract.config import LongContextConfig, RunSpec
from tests.eval_fixtures import train_briefly
from trainer.longctx import (
    KEY_LEN,
    VALUE_LEN,
    evaluate_longctx,
    long_batches,
    make_retrieval_batch,
    retrieval_hits,
    scaling_for,
)
from trainer.rope import RopeScaling, attention_scale, inv_frequencies, rope_cache

HEAD_DIM, BASE, TRAIN_LEN = 64, 10000.0, 128


# ---------------------------------------------------------------------- RoPE scaling
def test_linear_scaling_divides_positions_by_the_factor() -> None:
    plain_cos, plain_sin = rope_cache(HEAD_DIM, 64, BASE)
    cos, sin = rope_cache(HEAD_DIM, 256, BASE, RopeScaling("linear", 4.0, TRAIN_LEN))
    # position 4p under linear x4 is plain position p, for every frequency
    assert torch.allclose(cos[::4], plain_cos, atol=1e-6)
    assert torch.allclose(sin[::4], plain_sin, atol=1e-6)
    # and the frequencies themselves are unchanged (only positions move)
    assert torch.equal(inv_frequencies(HEAD_DIM, BASE, RopeScaling("linear", 4.0, TRAIN_LEN)),
                       inv_frequencies(HEAD_DIM, BASE))


def test_ntk_stretches_low_frequencies_and_keeps_the_highest() -> None:
    factor = 8.0
    plain = inv_frequencies(HEAD_DIM, BASE)
    ntk = inv_frequencies(HEAD_DIM, BASE, RopeScaling("ntk", factor, TRAIN_LEN))
    ratio = ntk / plain  # (D/2,): how much each pair is slowed down
    assert ratio[0] == pytest.approx(1.0)  # highest frequency unchanged
    assert ratio[-1] == pytest.approx(1 / factor, rel=1e-9)  # lowest interpolated by factor
    assert torch.all(ratio[1:] < ratio[:-1])  # monotone: the lower the frequency, the more
    # the base itself changed to base * factor^(d/(d-2))
    want_base = BASE * factor ** (HEAD_DIM / (HEAD_DIM - 2))
    assert torch.allclose(ntk, inv_frequencies(HEAD_DIM, want_base))


def test_yarn_interpolates_by_frequency_band_with_a_temperature() -> None:
    factor, train_len = 4.0, 1024  # long enough for the fastest pairs to turn > 32 times
    sc = RopeScaling("yarn", factor, train_len)
    plain = inv_frequencies(HEAD_DIM, BASE)
    yarn = inv_frequencies(HEAD_DIM, BASE, sc)
    rotations = train_len * plain / (2 * math.pi)  # turns of each pair over the train length
    fast, slow = rotations > 32, rotations < 1
    assert fast.any() and slow.any() and (~fast & ~slow).any()  # all three bands exist
    assert torch.allclose(yarn[fast], plain[fast])  # many turns: extrapolate (unchanged)
    assert torch.allclose(yarn[slow], plain[slow] / factor)  # < 1 turn: interpolate
    mid = ~fast & ~slow
    assert torch.all(yarn[mid] < plain[mid]) and torch.all(yarn[mid] > plain[mid] / factor)
    # attention temperature sqrt(1/t) = 0.1 ln s + 1 is folded into cos and sin
    m = 0.1 * math.log(factor) + 1.0
    assert attention_scale(sc) == pytest.approx(m)
    cos, sin = rope_cache(HEAD_DIM, 8, BASE, sc)
    assert torch.allclose(cos[0], torch.full((HEAD_DIM,), m))
    assert torch.allclose(cos.pow(2) + sin.pow(2), torch.full_like(cos, m * m), atol=1e-5)


def test_factor_one_and_method_none_are_plain_rope() -> None:
    plain = rope_cache(HEAD_DIM, 32, BASE)
    for method in ("none", "linear", "ntk", "yarn"):
        cos, sin = rope_cache(HEAD_DIM, 32, BASE, RopeScaling(method, 1.0, TRAIN_LEN))
        assert torch.allclose(cos, plain[0]) and torch.allclose(sin, plain[1])
    assert scaling_for("yarn", 1, TRAIN_LEN) is None
    assert scaling_for("none", 8, TRAIN_LEN) is None
    assert scaling_for("ntk", 4, TRAIN_LEN) == RopeScaling("ntk", 4.0, TRAIN_LEN)


# ---------------------------------------------------------------------- needle retrieval
def test_retrieval_hits_on_a_hand_built_case() -> None:
    V, T = 10, 12
    values = torch.tensor([[3, 4, 5, 6], [1, 1, 1, 1], [7, 8, 9, 0]])  # (B=3, K=4)
    logits = torch.zeros(3, T, V)
    for b in range(3):  # put the argmax on the right value at the last K positions
        for i in range(4):
            logits[b, T - 4 + i, values[b, i]] = 5.0
    logits[1, T - 2, 2] = 9.0  # sample 1: one value token wrong -> not recalled
    logits[2, T - 5, 0] = 9.0  # sample 2: noise before the value positions does not matter
    assert retrieval_hits(logits, values).tolist() == [True, False, True]


def test_retrieval_batch_places_needle_and_query() -> None:
    hay = torch.randint(200, (4, 513))  # (B, N) a 4x sequence for train length 128
    rb = make_retrieval_batch(hay, vocab_size=256, seed=0)
    kv = KEY_LEN + VALUE_LEN
    for b in range(4):
        p = int(rb.needle_pos[b])
        assert p < 0.1 * 513  # the needle is early: distance grows with the length
        assert torch.equal(rb.tokens[b, p:p + kv], rb.tokens[b, -kv:])  # key+value repeated
        assert torch.equal(rb.tokens[b, -VALUE_LEN:], rb.values[b])
        untouched = torch.ones(513, dtype=torch.bool)
        untouched[p:p + kv] = False
        untouched[-kv:] = False
        assert torch.equal(rb.tokens[b, untouched], hay[b, untouched])
    assert rb.distance > 0.8 * 513
    again = make_retrieval_batch(hay, vocab_size=256, seed=0)  # same needles for every method
    assert torch.equal(again.tokens, rb.tokens)


class _CopyOracle(torch.nn.Module):
    """Predicts the token that followed the previous occurrence of the last KEY_LEN tokens:
    a perfect induction head, so it recalls every needle at any distance."""

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        B, T = idx.shape
        logits = torch.zeros(B, T, 256)
        for b in range(B):
            seq = idx[b].tolist()
            for t in range(KEY_LEN - 1, T):
                key = seq[t - KEY_LEN + 1:t + 1]
                for s in range(t - KEY_LEN, KEY_LEN - 2, -1):
                    if seq[s - KEY_LEN + 1:s + 1] == key and s + 1 < T:
                        logits[b, t, seq[s + 1]] = 1.0
                        break
        return logits


def test_a_perfect_induction_model_recalls_every_needle() -> None:
    hay = torch.randint(256, (2, 129))
    rb = make_retrieval_batch(hay, vocab_size=256, seed=3)
    logits = _CopyOracle()(rb.tokens[:, :-1])
    assert retrieval_hits(logits, rb.values).all()
    assert not retrieval_hits(torch.zeros_like(logits), rb.values).any()


# ---------------------------------------------------------------------- trained model
@pytest.fixture(scope="module")
def trained() -> tuple[torch.nn.Module, RunSpec]:
    spec = RunSpec(name="longctx-test", model={"preset": "tiny"},
                   train={"seq_len": 32, "batch_size": 8, "steps": 20, "warmup": 2},
                   eval={"longctx": {"factors": [1, 2, 4, 8],
                                     "methods": ["none", "linear", "ntk", "yarn"],
                                     "batches": 1}})
    return train_briefly(spec), spec


def test_long_batches_have_factor_times_the_training_length(trained) -> None:
    _, spec = trained
    (b,) = long_batches(spec, 4, n_batches=1, batch_size=2)
    assert b.shape == (2, 4 * 32 + 1) and b.dtype == torch.long


def test_extrapolation_gives_finite_ppl_at_every_length_and_method(trained) -> None:
    model, spec = trained
    model.train()
    res = evaluate_longctx(model, spec)
    for method in ("none", "linear", "ntk", "yarn"):
        for f in (1, 2, 4, 8):
            for metric in ("ppl", "tail_ppl", "retrieval_acc"):
                assert math.isfinite(res[f"longctx/{method}/{f}x/{metric}"])
            assert 1.0 < res[f"longctx/{method}/{f}x/ppl"] < 1e4
            assert 0.0 <= res[f"longctx/{method}/{f}x/retrieval_acc"] <= 1.0
    assert len(res) == 4 * 4 * 3
    # 1x is plain RoPE for every method; beyond it the methods see different positions
    assert {res[f"longctx/{m}/1x/ppl"] for m in ("none", "linear", "ntk", "yarn")} \
        == {res["longctx/none/1x/ppl"]}
    assert res["longctx/linear/8x/ppl"] != res["longctx/none/8x/ppl"]
    assert res["longctx/none/1x/ppl"] == pytest.approx(res["longctx/none/1x/tail_ppl"])
    # the model is left as it was found: plain RoPE, train mode
    assert model.rope_scaling is None and model.training


def test_rope_scaling_restored_after_an_error(trained) -> None:
    model, spec = trained
    before = RopeScaling("ntk", 2.0, 32)
    model.set_rope_scaling(before)
    text = spec.model_copy(update={"data": spec.data.model_copy(
        update={"source": "tokens", "path": "/nonexistent/tokens.bin"})})
    with pytest.raises((ValueError, FileNotFoundError)):
        evaluate_longctx(model, text, LongContextConfig(factors=(2,), methods=("yarn",)))
    assert model.rope_scaling == before
    model.set_rope_scaling(None)
