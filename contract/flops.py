"""Training FLOPs by arithmetic (no torch): ``flops_per_token(cfg, seq_len)``.

The scaling analysis (results_db/analysis/scaling.py) compares variants at equal compute, and a
gate costs compute: its projection is a matmul like q/k/v. So the count starts from the exact
parameter counts of contract/params.py (gates included) and applies the usual convention
(Kaplan et al. 2020, Chinchilla): a matmul weight costs 2 FLOPs per token forward and 4
backward, i.e. **6 N per token** for training, plus the attention scores (QK^T and AV):
6 * 2 * n_layer * seq_len * n_head * head_dim per token (the full-context count of Kaplan's
C = 6ND + 6 n_layer n_ctx d_attn; a causal mask halves the useful work, but the convention,
and this count, do not).

Native Sparse Attention (``model.nsa``) replaces the T keys of a query by the keys its three
branches read (the same full-context convention, so a dense and an NSA count compare): the
compressed keys of the context ((T - compress_block) // compress_stride + 1), the selected
blocks (select_top_n x select_block tokens) and the window, each capped at T. NSA's branch gate
projection is a matmul per token (in N); its compression maps are not: each runs once per
compressed block and kv head, so they cost 6 x their weights x n_kv_head x blocks / T per token
(``compression``, floored to an integer).

N counts the weights a token actually multiplies: attention projections, gates, SwitchHead
projections and the FFN -- for MoE only the top_k experts a token is routed to plus the router
-- and the LM head (vocab x d_model; with tied embeddings that matrix is the embedding, which
counts once as the head: the lookup itself is no matmul). Norms and element-wise gating are
O(d) per token and left out, as in the convention.
"""

from __future__ import annotations

from dataclasses import dataclass

from contract.config import ModelConfig
from contract.params import count_params, nsa_per_layer

FWD_BWD = 6  # FLOPs per weight per token: 2 forward + 4 backward


@dataclass(frozen=True)
class FlopCounts:
    matmul_params: int  # N: weights a token multiplies (active experts only, LM head once)
    attention: int  # training FLOPs per token of the score products (QK^T, AV)
    gates: int  # training FLOPs per token of the gates' projections (part of ``total``)
    compression: int = 0  # training FLOPs per token of NSA's compression maps (0: dense)

    @property
    def total(self) -> int:
        """Training FLOPs per token: 6 N + attention + compression."""
        return FWD_BWD * self.matmul_params + self.attention + self.compression


def keys_per_query(cfg: ModelConfig, seq_len: int) -> int:
    """Keys one query's score products read at context ``seq_len``: all of them (dense), or
    NSA's compressed keys, selected tokens and window (module docstring)."""
    nsa = cfg.nsa
    if nsa is None:
        return seq_len
    return (nsa_compressed_blocks(cfg, seq_len)
            + min(nsa.select_top_n * nsa.select_block, seq_len) + min(nsa.window, seq_len))


def nsa_compressed_blocks(cfg: ModelConfig, seq_len: int) -> int:
    """Compressed blocks of a ``seq_len`` context (trainer/nsa.py: whole blocks only)."""
    nsa = cfg.nsa
    if nsa is None or seq_len < nsa.compress_block:
        return 0
    return (seq_len - nsa.compress_block) // nsa.compress_stride + 1


def flops_per_token(cfg: ModelConfig, seq_len: int) -> FlopCounts:
    """Training FLOPs per token of ``cfg`` at context length ``seq_len`` (module docstring)."""
    if seq_len < 1:
        raise ValueError(f"flops_per_token: seq_len must be >= 1, got {seq_len}")
    c = count_params(cfg)
    ffn = c.ffn
    if cfg.moe is not None:  # routed: top_k of n_experts experts, plus the whole router
        router = cfg.n_layer * cfg.d_model * cfg.moe.n_experts
        ffn = (c.ffn - router) * cfg.moe.top_k // cfg.moe.n_experts + router
    switch = c.switch_head
    if cfg.switch_head is not None:  # each token uses top_k of the head experts (the small
        # router, d x n_kv_head x E, is scaled with them: a rounding error next to the experts)
        switch = switch * cfg.switch_head.top_k // cfg.switch_head.n_experts
    head = cfg.vocab_size * cfg.d_model
    compress, nsa_gate = nsa_per_layer(cfg)
    branch_gate = cfg.n_layer * nsa_gate if cfg.nsa is not None and cfg.nsa.combine == "gated" \
        else 0  # a learned weight per head and branch is no matmul
    n = c.attention + c.gates + ffn + switch + head + branch_gate
    keys = keys_per_query(cfg, seq_len)
    attention = FWD_BWD * 2 * cfg.n_layer * keys * cfg.n_head * cfg.head_dim
    compression = (FWD_BWD * cfg.n_layer * compress * cfg.n_kv_head
                   * nsa_compressed_blocks(cfg, seq_len) // seq_len)
    return FlopCounts(matmul_params=n, attention=attention, gates=FWD_BWD * c.gates,
                      compression=compression)
