"""Native Sparse Attention (Yuan et al. 2025, arXiv 2502.11089) in place of dense attention.

Built by trainer/attention.py when ``model.nsa`` is set: it reads the layer's own grouped-query
q/k/v (after QK-norm and the G2-G4 gates, before RoPE) and returns what dense attention would,
the per-head output (B, T, H, D) that G1 and o_proj then take. Three branches (block geometry
and causality: trainer/nsa_blocks.py):

- compressed (Eq. 7): the keys and values of each compressed block (``compress_block`` tokens,
  one every ``compress_stride``) are mapped to one key and one value by a linear map of the
  flattened block (l*D -> D, shared by the kv heads; each offset in the block has weights of
  its own, which is what NSA's intra-block position encoding buys). A query reads the blocks
  that end at or before it; one before the first whole block reads nothing (its output is 0).
  As in native-sparse-attention-pytorch, q and the block summaries meet without RoPE: a
  summary has no single position.
- selected (Eqs. 8-11): the compressed attention probabilities score the selection blocks, are
  summed over the query heads of a GQA group (Eq. 10, so a group's heads read the same blocks),
  and each query reads its own block plus the ``select_top_n`` - 1 best complete earlier ones.
  The choice is an index (no gradient flows through it), as in NSA.
- window: the last ``window`` tokens, the query's own included.
The two token branches use RoPE like trainer/attention.py. Combination: o = sum_c w_c o_c with
w from trainer/nsa_combine.py (gated | learned | equal).

The token branches run as masked dense attention (SDPA with a boolean mask): exact, simple on the
CPU and no faster than dense; contract/flops.py counts what a sparse kernel would read.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from contract.config import ModelConfig
from trainer import nsa_blocks as blocks
from trainer.nsa_combine import BranchWeights
from trainer.rope import apply_rope


def masked_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor,
                     weights: bool = False) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Softmax attention over the keys ``mask`` allows. q (B, H, T, D), k/v (B, Hkv, S, D),
    mask broadcastable to (B, H, T, S). Returns (y (B, H, T, D), att (B, H, T, S) or None).

    A query with no key reads nothing (a zero row). ``weights``: the explicit path, which also
    returns the probabilities; else SDPA, which needs every row to have a key.
    """
    rep = q.size(1) // k.size(1)
    if not weights:
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask,
                                              enable_gqa=rep > 1), None
    k, v = k.repeat_interleave(rep, dim=1), v.repeat_interleave(rep, dim=1)
    att = (q @ k.transpose(-2, -1)) / math.sqrt(q.size(-1))  # (B, H, T, S)
    some = mask.any(dim=-1, keepdim=True)  # rows with at least one key
    att = att.masked_fill(~mask, float("-inf")).masked_fill(~some, 0.0).softmax(dim=-1) * some
    return att @ v, att


class NativeSparseAttention(nn.Module):
    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        nsa = cfg.nsa
        assert nsa is not None, "built only when model.nsa is set"
        self.block, self.stride = nsa.compress_block, nsa.compress_stride
        self.select_block, self.top_n, self.window = nsa.select_block, nsa.select_top_n, nsa.window
        self.n_head, self.n_kv_head = cfg.n_head, cfg.n_kv_head
        D = cfg.head_dim
        self.compress_k = nn.Linear(self.block * D, D, bias=False)
        self.compress_v = nn.Linear(self.block * D, D, bias=False)
        self.combine = BranchWeights(nsa.combine, cfg.d_model, cfg.n_head)

    def forward(self, x: torch.Tensor, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                cos: torch.Tensor, sin: torch.Tensor,
                weights: bool = False) -> tuple[torch.Tensor, torch.Tensor | None]:
        """x (B, T, d_model); q (B, T, H, D), k/v (B, T, Hkv, D) before RoPE; cos/sin (T, D).

        Returns (y (B, T, H, D), the selected branch's probabilities (B, H, T, T) when
        ``weights``, for the attention-sink probe, else None).
        """
        out, att = self.branches(q, k, v, cos, sin, weights)  # (B, T, H, 3, D)
        w = self.combine(x)  # (B, T, H, 3) or (1, 1, H, 3)
        return (out * w.unsqueeze(-1).to(out.dtype)).sum(dim=3), att

    def branches(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, cos: torch.Tensor,
                 sin: torch.Tensor,
                 weights: bool = False) -> tuple[torch.Tensor, torch.Tensor | None]:
        """The three branch outputs, (B, T, H, 3, D) in the order compressed, selected, window
        (arguments as ``forward``'s), and the selected branch's probabilities if ``weights``."""
        T = q.size(1)
        o_cmp, p_cmp = self.compressed(q, k, v)
        qr = apply_rope(q, cos, sin).transpose(1, 2)  # (B, H, T, D)
        kr = apply_rope(k, cos, sin).transpose(1, 2)  # (B, Hkv, T, D)
        vt = v.transpose(1, 2)
        chosen = self.choose(p_cmp.detach(), T)  # (B, Hkv, T, n_sel)
        rep = self.n_head // self.n_kv_head
        sel = blocks.token_mask(chosen, self.select_block).repeat_interleave(rep, dim=1)
        o_slc, att = masked_attention(qr, kr, vt, sel, weights)
        win = blocks.window_mask(T, self.window, q.device)  # (T, T)
        o_win, _ = masked_attention(qr, kr, vt, win, weights)
        out = torch.stack([o_cmp, o_slc, o_win], dim=3)  # (B, H, T, 3, D)
        return out.transpose(1, 2), att

    def compressed(self, q: torch.Tensor, k: torch.Tensor,
                   v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The compressed branch: (o (B, H, T, D), probabilities (B, H, T, n_cmp))."""
        T = q.size(1)
        ck = self.compress_k(blocks.compressed_windows(k, self.block, self.stride))
        cv = self.compress_v(blocks.compressed_windows(v, self.block, self.stride))
        # ck/cv (B, Hkv, n_cmp, D)
        mask = blocks.compressed_causal(T, self.block, self.stride, q.device)  # (T, n_cmp)
        o, p = masked_attention(q.transpose(1, 2), ck, cv, mask, weights=True)
        assert p is not None
        return o, p

    def choose(self, p_cmp: torch.Tensor, T: int) -> torch.Tensor:
        """Compressed probabilities (B, H, T, n_cmp) -> the blocks each query reads,
        (B, Hkv, T, n_sel), one choice per GQA group."""
        share = blocks.selection_overlap(T, self.block, self.stride, self.select_block,
                                         p_cmp.device, p_cmp.dtype)  # (n_cmp, n_sel)
        score = p_cmp @ share  # (B, H, T, n_sel)
        B, H, _, n_sel = score.shape
        group = score.view(B, self.n_kv_head, H // self.n_kv_head, T, n_sel).sum(dim=2)
        return blocks.choose_blocks(group, self.select_block, self.top_n)
