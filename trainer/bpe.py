"""Byte-level BPE trained on a corpus's training files, cached by content (``tokenizers``).

``data.tokenizer: {train_bpe: N}`` trains an N-token byte-level BPE (GPT-2 style: every byte
is a base token, so any text round-trips) on the *training* files only (the held-out files
must stay unseen; at most ``sample_bytes`` of them, in the corpus's fixed order), and caches
the resulting tokenizer.json under ``$GATESWEEP_CACHE/tokenizers/<sha256>.json``, keyed by the
training split's content hash, the BpeSpec and ``RECIPE`` (bump it when the recipe changes). Later
runs
and every worker load the cached file; the run's data info records its path and hash.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

from contract.config import BpeSpec
from trainer.tokenizer import cache_root

RECIPE = "bytelevel-bpe-v1"


def bpe_path(train_sha256: str, spec: BpeSpec) -> Path:
    key = hashlib.sha256(f"{RECIPE}\0{train_sha256}\0{spec.model_dump_json()}".encode())
    return cache_root() / "tokenizers" / f"{key.hexdigest()}.json"


def sample(texts: Iterable[str], max_bytes: int) -> Iterator[str]:
    """The leading texts while their UTF-8 size stays within ``max_bytes`` (at least one)."""
    total = 0
    for i, text in enumerate(texts):
        total += len(text.encode("utf-8"))
        if i and total > max_bytes:
            return
        yield text


def train_bpe(texts: Iterable[str], spec: BpeSpec, out: Path) -> Path:
    """Train on ``texts`` and write ``out`` atomically (a crash leaves no half file)."""
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=spec.train_bpe, min_frequency=spec.min_frequency,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False, special_tokens=[])
    tok.train_from_iterator(sample(texts, spec.sample_bytes), trainer=trainer)
    out.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=out.parent, prefix=".tmp-", suffix=".json")
    os.close(fd)
    try:
        tok.save(tmp)
        os.replace(tmp, out)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return out


def cached_bpe(train_sha256: str, spec: BpeSpec, texts: Iterable[str]) -> tuple[Path, bool]:
    """(tokenizer.json path, True if it was trained now); trains only on a cache miss."""
    out = bpe_path(train_sha256, spec)
    if out.is_file():
        return out, False
    return train_bpe(texts, spec, out), True
