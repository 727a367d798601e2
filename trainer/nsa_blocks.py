"""The block geometry of Native Sparse Attention (trainer/nsa.py): which keys a query may read.

Pure index arithmetic on the sequence, no parameters. Conventions (T tokens, positions 0..T-1):
- compressed block i covers tokens [i d, i d + l) (``l`` compress_block, ``d`` its stride);
  only whole blocks exist: n_cmp = (T - l) // d + 1, none when T < l. Block i is causal for
  query t iff its last token i d + l - 1 <= t: no query reads a summary of a future token.
- selection block j covers [j l', (j + 1) l') (``l'`` select_block; the last may be short).
  Query t's own block is c = t // l'; the blocks it may *choose* are the complete earlier ones,
  j < c. It always reads its own block, up to itself (the token-level causal mask).
"""

from __future__ import annotations

import torch


def n_compressed(T: int, block: int, stride: int) -> int:
    """Whole compressed blocks in a T-token sequence."""
    return 0 if T < block else (T - block) // stride + 1


def compressed_windows(x: torch.Tensor, block: int, stride: int) -> torch.Tensor:
    """x (B, T, Hkv, D) -> (B, Hkv, n_cmp, block * D): each block's tokens, flattened token-major
    (offset j's channels at j*D .. j*D + D - 1)."""
    B, T, Hkv, D = x.shape
    n = n_compressed(T, block, stride)
    if n == 0:
        return x.new_zeros(B, Hkv, 0, block * D)
    w = x.unfold(1, block, stride)  # (B, n_cmp, Hkv, D, block)
    return w.permute(0, 2, 1, 4, 3).reshape(B, Hkv, n, block * D)


def compressed_causal(T: int, block: int, stride: int, device: torch.device) -> torch.Tensor:
    """(T, n_cmp) bool: query t may read compressed block i (it ends at or before t)."""
    ends = torch.arange(n_compressed(T, block, stride), device=device) * stride + block - 1
    return ends[None, :] <= torch.arange(T, device=device)[:, None]


def selection_overlap(T: int, block: int, stride: int, select_block: int,
                      device: torch.device, dtype: torch.dtype) -> torch.Tensor:
    """(n_cmp, n_sel): the share of compressed block i's tokens inside selection block j.

    A selection block's score is the compressed probabilities weighted by these shares (NSA's
    "spatial relationship", Eq. 9): the identity when l = l' = d, and NSA's 1-2-1 kernel over
    three compressed blocks (halved, which no ranking sees) when l = l' = 2d.
    """
    n_sel = -(-T // select_block)
    start = torch.arange(n_compressed(T, block, stride), device=device)[:, None] * stride
    lo = torch.arange(n_sel, device=device)[None, :] * select_block
    inside = (torch.minimum(start + block, lo + select_block)
              - torch.maximum(start, lo)).clamp(min=0)
    return inside.to(dtype) / block


def choose_blocks(score: torch.Tensor, select_block: int, top_n: int) -> torch.Tensor:
    """score (B, Hkv, T, n_sel) >= 0 -> (B, Hkv, T, n_sel) bool: the blocks each query reads.

    Its own block, plus the top_n - 1 complete earlier blocks with the highest score (all of
    them when there are fewer); equal scores go to the earlier block (a stable sort).
    """
    T, n_sel = score.shape[-2:]
    own = torch.arange(T, device=score.device)[:, None] // select_block  # (T, 1)
    j = torch.arange(n_sel, device=score.device)[None, :]  # (1, n_sel)
    past = j < own  # (T, n_sel)
    ranked = score.masked_fill(~past, -1.0).sort(dim=-1, descending=True, stable=True).indices
    chosen = torch.zeros_like(score, dtype=torch.bool)
    chosen.scatter_(-1, ranked[..., :max(top_n - 1, 0)], True)
    return (chosen & past) | (j == own)


def causal_mask(T: int, device: torch.device) -> torch.Tensor:
    """(T, T) bool: key s <= query t."""
    return torch.ones(T, T, dtype=torch.bool, device=device).tril()


def token_mask(chosen: torch.Tensor, select_block: int) -> torch.Tensor:
    """chosen (B, Hkv, T, n_sel) -> (B, Hkv, T, T) bool: the chosen blocks' tokens, causal."""
    T = chosen.shape[-2]
    tokens = chosen.repeat_interleave(select_block, dim=-1)[..., :T]  # (B, Hkv, T, T)
    return tokens & causal_mask(T, chosen.device)


def window_mask(T: int, window: int, device: torch.device) -> torch.Tensor:
    """(T, T) bool: the last ``window`` tokens up to the query, t - window < s <= t."""
    t = torch.arange(T, device=device)
    gap = t[:, None] - t[None, :]
    return (gap >= 0) & (gap < window)
