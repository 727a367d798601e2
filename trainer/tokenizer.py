"""Tokenisers and the tokenised-corpus cache for the ``text`` and ``hf`` data sources.

A corpus is tokenised once into a flat uint16/uint32 array on disk, keyed by the sha256 of
its content and of the tokenizer, under ``$GATESWEEP_CACHE`` (default ~/.cache/gatesweep)
/tokens/. Later runs (and every worker of a run) memory-map it. The file is written to a
temporary name and renamed, so a crash never leaves a half-written cache entry that looks
complete.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from collections.abc import Iterable
from pathlib import Path

import numpy as np
import tokenizers

from contract import env

BYTE_VOCAB = 256


class ByteTokenizer:
    """UTF-8 bytes as tokens 0..255: no file, no vocabulary, nothing to download."""
    vocab_size = BYTE_VOCAB
    identity = "bytes"

    def encode(self, text: str) -> list[int]:
        return list(text.encode("utf-8"))

    def encode_array(self, texts: list[str], dtype: np.dtype) -> np.ndarray:
        """The concatenated tokens of ``texts`` (1-D ``dtype``), without Python int lists."""
        raw = b"".join(t.encode("utf-8") for t in texts)
        return np.frombuffer(raw, dtype=np.uint8).astype(dtype)


class JsonTokenizer:
    """A local ``tokenizer.json`` through the ``tokenizers`` package (never the network)."""
    def __init__(self, path: str) -> None:
        p = Path(path).expanduser()
        if not p.is_file():
            raise FileNotFoundError(f"data.tokenizer: {path!r} is neither 'bytes' nor an "
                                    f"existing tokenizer.json file")

        try:
            self._tok = tokenizers.Tokenizer.from_file(str(p))
        except Exception as exc:  # the package's errors are opaque; name the file
            raise ValueError(f"data.tokenizer: {path!r} is not a valid tokenizer.json: {exc}")
        self.vocab_size = self._tok.get_vocab_size(with_added_tokens=True)
        self.identity = "json:" + hashlib.sha256(p.read_bytes()).hexdigest()

    def encode(self, text: str) -> list[int]:
        return self._tok.encode(text, add_special_tokens=False).ids

    def encode_array(self, texts: list[str], dtype: np.dtype) -> np.ndarray:
        """The concatenated tokens of ``texts``; ``encode_batch`` runs on all cores."""
        encs = self._tok.encode_batch(texts, add_special_tokens=False)
        if not encs:
            return np.zeros(0, dtype=dtype)
        return np.concatenate([np.asarray(e.ids, dtype=dtype) for e in encs])


Tokenizer = ByteTokenizer | JsonTokenizer


def load_tokenizer(name: str) -> Tokenizer:
    return ByteTokenizer() if name == "bytes" else JsonTokenizer(name)


def check_vocab(tok: Tokenizer, vocab_size: int, where: str) -> None:
    """The model must have an embedding row for every token the tokenizer can emit."""
    if tok.vocab_size > vocab_size:
        raise ValueError(f"model.vocab_size: {vocab_size} is smaller than the tokenizer's "
                         f"{tok.vocab_size} tokens ({where}); raise model.vocab_size to at "
                         f"least {tok.vocab_size}")


def cache_root() -> Path:
    return Path(env.text("GATESWEEP_CACHE")).expanduser()


def token_dtype(vocab_size: int) -> np.dtype:
    return np.dtype(np.uint16 if vocab_size <= 2**16 else np.uint32)


def _chunks(text: str, size: int = 1 << 20) -> Iterable[str]:
    """~1 MB pieces cut after a newline, so a subword tokenizer never sees a cut word."""
    start = 0
    while start < len(text):
        end = min(len(text), start + size)
        if end < len(text):
            nl = text.rfind("\n", start, end)
            end = nl + 1 if nl > start else end
        yield text[start:end]
        start = end


ENCODE_GROUP_CHARS = 8 << 20  # texts encoded per batch call (parallel inside tokenizers)


def _groups(pieces: Iterable[str], max_chars: int) -> Iterable[list[str]]:
    """Consecutive pieces, ~max_chars characters per group, order kept."""
    group: list[str] = []
    size = 0
    for piece in pieces:
        group.append(piece)
        size += len(piece)
        if size >= max_chars:
            yield group
            group, size = [], 0
    if group:
        yield group


def encode_to_cache(key_parts: list[str], texts: Iterable[str], tok: Tokenizer) -> Path:
    """Tokenise ``texts`` (concatenated) into the cache unless ``key_parts`` is cached already.

    ``key_parts`` must identify the content (e.g. file hashes); the tokenizer is added here.
    """
    key = hashlib.sha256("\0".join([*key_parts, tok.identity]).encode()).hexdigest()
    dtype = token_dtype(tok.vocab_size)
    out = cache_root() / "tokens" / f"{key}.{dtype.name}.bin"
    if out.is_file():
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=out.parent, prefix=".tmp-", suffix=".bin")
    try:
        with os.fdopen(fd, "wb") as fh:
            for group in _groups((p for t in texts for p in _chunks(t)), ENCODE_GROUP_CHARS):
                fh.write(tok.encode_array(group, dtype).tobytes())
        os.replace(tmp, out)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return out


def file_digest(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def read_utf8(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise ValueError(f"data.path: {str(path)!r} is not UTF-8 text ({exc.reason} at byte "
                         f"{exc.start})") from None
