"""trainer/nsa.py against Native Sparse Attention written out from the paper's equations.

The reference below loops over batch, query heads, queries and blocks in float64 and shares no
code with trainer/nsa.py or trainer/nsa_blocks.py (RoPE included): Eq. 7 (a compressed key and
value per block of l tokens every d, a linear map of the flattened block), Eq. 8-10 (the
compressed probabilities scoring selection blocks by the share of their tokens, summed over a
GQA group's heads), Eq. 11 (the query's own block and the top n - 1 complete earlier ones, ties
to the earlier block), the sliding window, and Eq. 5 (the gated, learned or equal sum). The
module, given the reference's weights, must agree to 1e-10.
"""

from __future__ import annotations

import math
from typing import Any

import pytest
import torch

from contract.config import ModelConfig
from trainer.nsa import NativeSparseAttention
from trainer.rope import rope_cache

B, T, H, HKV, D, C = 2, 24, 4, 2, 8, 16


def _rope(x: torch.Tensor, t: int, base: float = 10000.0) -> torch.Tensor:
    """Rotate one head vector (D,) to position t: pair i is (x[i], x[i + D/2])."""
    half = x.numel() // 2
    out = x.clone()
    for i in range(half):
        angle = t * base ** (-2 * i / x.numel())
        c, s = math.cos(angle), math.sin(angle)
        out[i] = x[i] * c - x[i + half] * s
        out[i + half] = x[i + half] * c + x[i] * s
    return out


def _softmax_read(scores: list[float], values: list[torch.Tensor]) -> torch.Tensor:
    if not scores:
        return torch.zeros(D, dtype=torch.float64)
    m = max(scores)
    e = [math.exp(s - m) for s in scores]
    return sum((w / sum(e)) * v for w, v in zip(e, values))  # type: ignore[return-value]


def reference(x: torch.Tensor, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
              nsa: dict[str, Any], wk: torch.Tensor, wv: torch.Tensor,
              branch: torch.Tensor | None) -> torch.Tensor:
    """NSA by the equations, (B, T, H, D). ``branch``: the gate's (H*3, C) projection for
    'gated', the (H, 3) logits for 'learned', None for 'equal'."""
    cb, d, ls, n, w = (nsa["compress_block"], nsa["compress_stride"], nsa["select_block"],
                      nsa["select_top_n"], nsa["window"])
    rep, scale = H // HKV, 1 / math.sqrt(D)
    n_cmp = (T - cb) // d + 1 if T >= cb else 0
    n_sel = math.ceil(T / ls)
    out = torch.zeros(B, T, H, D, dtype=torch.float64)
    for b in range(B):
        # Eq. 7: per kv head, one key/value per block from its tokens flattened in order
        ck = [[wk @ torch.cat([k[b, i * d + j, g] for j in range(cb)]) for i in range(n_cmp)]
              for g in range(HKV)]
        cv = [[wv @ torch.cat([v[b, i * d + j, g] for j in range(cb)]) for i in range(n_cmp)]
              for g in range(HKV)]
        kr = [[_rope(k[b, s, g], s) for g in range(HKV)] for s in range(T)]
        for t in range(T):
            visible = [i for i in range(n_cmp) if i * d + cb - 1 <= t]
            o_cmp, probs = [], []
            for h in range(H):
                g = h // rep
                sc = [float(q[b, t, h] @ ck[g][i]) * scale for i in visible]
                o_cmp.append(_softmax_read(sc, [cv[g][i] for i in visible]))
                m = max(sc) if sc else 0.0
                e = [math.exp(s - m) for s in sc]
                probs.append({i: ei / sum(e) for i, ei in zip(visible, e)})
            for h in range(H):
                g = h // rep
                # Eq. 8-10: a selection block's score, summed over the group's heads
                score = [0.0] * n_sel
                for hh in range(g * rep, (g + 1) * rep):
                    for i, p in probs[hh].items():
                        for j in range(n_sel):
                            inside = max(0, min(i * d + cb, (j + 1) * ls) - max(i * d, j * ls))
                            score[j] += p * inside / cb
                own = t // ls
                earlier = sorted(range(own), key=lambda j: (-score[j], j))[:n - 1]
                chosen = {own, *earlier}
                qr = _rope(q[b, t, h], t)
                keys = [s for s in range(t + 1) if s // ls in chosen]
                o_slc = _softmax_read([float(qr @ kr[s][g]) * scale for s in keys],
                                      [v[b, s, g] for s in keys])
                near = range(max(0, t - w + 1), t + 1)
                o_win = _softmax_read([float(qr @ kr[s][g]) * scale for s in near],
                                      [v[b, s, g] for s in near])
                if nsa["combine"] == "gated":
                    assert branch is not None
                    gw = [torch.sigmoid(branch[h * 3 + c] @ x[b, t]) for c in range(3)]
                elif nsa["combine"] == "learned":
                    assert branch is not None
                    gw = [torch.sigmoid(branch[h, c]) for c in range(3)]
                else:
                    gw = [torch.tensor(1 / 3, dtype=torch.float64)] * 3
                out[b, t, h] = gw[0] * o_cmp[h] + gw[1] * o_slc + gw[2] * o_win
    return out


CONFIGS = {  # l = l' = 2d (NSA's own shape), and a selection block of 3 strides
    "l4_d2_sel4": {"compress_block": 4, "compress_stride": 2, "select_block": 4,
                   "select_top_n": 2, "window": 3},
    "l4_d2_sel6_top3": {"compress_block": 4, "compress_stride": 2, "select_block": 6,
                        "select_top_n": 3, "window": 5},
}


def _module(nsa: dict[str, Any]) -> NativeSparseAttention:
    cfg = ModelConfig.model_validate({"preset": "tiny", "d_model": C, "n_head": H,
                                      "n_kv_head": HKV, "head_dim": D, "nsa": nsa})
    return NativeSparseAttention(cfg).double()


@pytest.mark.parametrize("combine", ["gated", "learned", "equal"])
@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_the_module_agrees_with_the_equations(name: str, combine: str) -> None:
    nsa = {**CONFIGS[name], "combine": combine}
    g = torch.Generator().manual_seed(3)
    x, q = torch.randn(B, T, C, generator=g), torch.randn(B, T, H, D, generator=g)
    k, v = torch.randn(B, T, HKV, D, generator=g), torch.randn(B, T, HKV, D, generator=g)
    x, q, k, v = (t.double() for t in (x, q, k, v))
    module = _module(nsa)
    with torch.no_grad():  # weights large enough that the choice of blocks is not uniform
        for p in module.parameters():
            p.copy_(torch.randn(p.shape, generator=g, dtype=torch.float64) * 0.5)
    branch = (module.combine.proj.weight if combine == "gated"
              else module.combine.logit if combine == "learned" else None)
    want = reference(x, q, k, v, nsa, module.compress_k.weight.detach(),
                     module.compress_v.weight.detach(),
                     None if branch is None else branch.detach())
    cos, sin = rope_cache(D, T, 10000.0, dtype=torch.float64)
    with torch.no_grad():
        got, _ = module(x, q, k, v, cos, sin)
        explicit, _ = module(x, q, k, v, cos, sin, weights=True)
    assert got.shape == (B, T, H, D)
    torch.testing.assert_close(got, want, atol=1e-10, rtol=1e-10)
    torch.testing.assert_close(explicit, want, atol=1e-10, rtol=1e-10)
