"""Training and held-out data: the package's front door (torch-free on import).

Sources (``data.source``):
- ``synthetic`` (default): a learnable Markov chain with copies; no files at all.
- ``text``: UTF-8 file or glob (``**`` recursive), tokenised once into a cached memmap.
- ``tokens``: a nanoGPT-style flat ``uint16``/``uint32`` ``.bin`` file.
- ``hf``: a ``datasets`` dataset that is already available locally (offline).
- ``python_code``: this machine's Python source files (trainer/corpus.py), held out by file,
  with bytes, a tokenizer.json, or a BPE trained on its training files (trainer/bpe.py).

Where things live: batches and the synthetic task in trainer/batches.py (torch), token arrays
of file sources in trainer/token_files.py, checks without training in trainer/datacheck.py.
``check`` and the ``data_*`` helpers load without torch (``orchestrator validate`` uses them);
the torch names (``build_data``, ``build_source``, ``DataStream``, ``SyntheticSource``, ...) are
loaded from trainer/batches.py on first use.
"""

from __future__ import annotations

from typing import Any

from contract.metrics import data_info
from trainer.datacheck import check

__all__ = ["check", "data_summary", "data_artifact", "build_data", "build_source",
           "ppl_set_config", "DataStream", "SyntheticSource", "ArraySource", "Batch"]

_TORCH_NAMES = {"build_data", "build_source", "ppl_set_config", "DataStream", "SyntheticSource",
                "ArraySource", "Batch", "_DATA_SEED"}

_NUMERIC_INFO = ("files", "train_files", "val_files", "train_bytes", "val_bytes", "bytes",
                 "train_tokens", "val_tokens", "skipped_non_utf8")


def data_summary(info: dict[str, object]) -> dict[str, float]:
    """The numeric part of a stream's ``info`` as run summaries (``data/<name>``)."""
    return {data_info(k): float(info[k]) for k in _NUMERIC_INFO  # type: ignore[arg-type]
            if isinstance(info.get(k), (int, float)) and not isinstance(info.get(k), bool)}


def data_artifact(info: dict[str, object]) -> dict[str, object]:
    """The whole ``info`` (corpus sha256, Python version, tokenizer identity, BPE path) as a
    JSON artifact of kind ``data``: results then say which corpus they were trained on."""
    return {k: v for k, v in info.items() if isinstance(v, (str, int, float, bool))}


def __getattr__(name: str) -> Any:
    if name in _TORCH_NAMES:
        from trainer import batches  # torch: only where batches are made

        return getattr(batches, name)
    raise AttributeError(f"module 'trainer.data' has no attribute {name!r}")
