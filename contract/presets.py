"""Named model shapes. A sweep says ``model: {preset: small}`` plus overrides.

The paper shapes come from the paper's Table 7 (shipped as
dashboard/paper_data/table7_architectures.csv). Their vocabulary is Qwen's (151,936 tokens); the
paper does not print
the RoPE base, so we use Qwen3's 1e6.
"""

from __future__ import annotations

from typing import Any

QWEN_VOCAB = 151_936

PRESETS: dict[str, dict[str, Any]] = {
    # Trains in seconds on one CPU core: the unit-test and smoke-sweep model.
    "tiny": dict(vocab_size=256, n_layer=2, d_model=64, n_head=4, n_kv_head=2, head_dim=16,
                 d_ff=176),
    "tiny-moe": dict(vocab_size=256, n_layer=2, d_model=64, n_head=4, n_kv_head=2, head_dim=16,
                     moe=dict(n_experts=4, top_k=2, d_expert=64)),
    # ~10M parameters: the CPU benchmark model and the CPU-scale gate study.
    "small": dict(vocab_size=256, n_layer=6, d_model=384, n_head=6, n_kv_head=2, head_dim=64,
                  d_ff=1152),
    "small-moe": dict(vocab_size=256, n_layer=6, d_model=384, n_head=6, n_kv_head=2,
                      head_dim=64, moe=dict(n_experts=8, top_k=2, d_expert=384)),
    # The paper's shapes (Table 7); instantiate on the meta device for parameter counts.
    "paper-moe-15a2b": dict(vocab_size=QWEN_VOCAB, n_layer=24, d_model=2048, n_head=32,
                            n_kv_head=4, head_dim=128, qk_norm=True, tie_embeddings=False,
                            rope_base=1e6,
                            moe=dict(n_experts=128, top_k=8, d_expert=768)),
    "paper-dense-1p7b": dict(vocab_size=QWEN_VOCAB, n_layer=28, d_model=2048, n_head=16,
                             n_kv_head=8, head_dim=128, d_ff=6144, qk_norm=True,
                             tie_embeddings=True, rope_base=1e6),
    "paper-dense-1p7b-48l": dict(vocab_size=QWEN_VOCAB, n_layer=48, d_model=1536, n_head=16,
                                 n_kv_head=8, head_dim=128, d_ff=4608, qk_norm=True,
                                 tie_embeddings=True, rope_base=1e6),
}


def preset_fields(name: str) -> dict[str, Any]:
    """The fields of preset ``name``; a clear error lists the known names."""
    try:
        return dict(PRESETS[name])
    except KeyError:
        known = ", ".join(sorted(PRESETS))
        raise ValueError(f"model.preset: unknown preset {name!r}; expected one of: {known}") \
            from None
