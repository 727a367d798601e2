"""Token arrays of the file-backed data sources (numpy only, no torch).

``load_tokens(cfg, vocab_size) -> Tokens``: the training and held-out token arrays of
``data.source`` text | tokens | hf | python_code, tokenised once into the content-keyed cache
(trainer/tokenizer.py) and memory-mapped, plus ``info``: what the run should record about
its data (sizes, content hashes, tokenizer), because a corpus can differ between machines.

Held-out split: text/tokens/hf hold out the LAST ``val_fraction`` of the tokens; python_code
holds out whole files (trainer/corpus.py), so validation never sees a training file.
"""

from __future__ import annotations

import glob
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from contract.config import BpeSpec, DataConfig
from trainer.bpe import cached_bpe
from trainer.corpus import select
from trainer.tokenizer import (
    JsonTokenizer,
    Tokenizer,
    check_vocab,
    encode_to_cache,
    file_digest,
    load_tokenizer,
    read_utf8,
)


@dataclass
class Tokens:
    train: np.ndarray  # 1-D token ids
    val: np.ndarray  # 1-D token ids, never overlapping train's source text
    info: dict[str, object] = field(default_factory=dict)


def resolve_files(cfg: DataConfig) -> list[Path]:
    pattern = str(Path(cfg.path).expanduser()) if cfg.path else ""
    files = sorted(Path(p) for p in glob.glob(pattern, recursive=True) if Path(p).is_file())
    if not files:
        raise FileNotFoundError(f"data.path: no file matches {cfg.path!r} "
                                f"(data.source: {cfg.source})")
    return files


def _memmap(path: Path) -> np.ndarray:
    dtype = path.suffixes[-2].lstrip(".")
    if path.stat().st_size == 0:  # mmap refuses empty files; an empty split is an empty array
        return np.zeros(0, dtype=dtype)
    return np.memmap(path, dtype=dtype, mode="r")


def _tail_split(tokens: np.ndarray, val_fraction: float, info: dict[str, object]) -> Tokens:
    n_val = int(len(tokens) * val_fraction)
    return Tokens(tokens[:len(tokens) - n_val], tokens[len(tokens) - n_val:], info)


def _text_tokens(cfg: DataConfig, vocab_size: int) -> Tokens:
    tok = tokenizer_for(cfg)
    check_vocab(tok, vocab_size, f"data.tokenizer: {cfg.tokenizer}")
    files = resolve_files(cfg)
    keys = [f"{p.name}:{file_digest(p)}" for p in files]
    cached = encode_to_cache(keys, (read_utf8(p) for p in files), tok)
    info = {"files": len(files), "bytes": sum(p.stat().st_size for p in files),
            "tokenizer": tok.identity}
    return _tail_split(_memmap(cached), cfg.val_fraction, info)


def _bin_tokens(cfg: DataConfig, vocab_size: int) -> Tokens:
    files = resolve_files(cfg)
    if len(files) > 1:
        raise ValueError(f"data.path: {cfg.path!r} matches {len(files)} files; the 'tokens' "
                         f"source reads one .bin file")
    path = files[0]
    itemsize = np.dtype(cfg.token_dtype).itemsize
    if path.stat().st_size % itemsize:
        raise ValueError(f"data.path: {str(path)!r} is {path.stat().st_size} bytes, not a "
                         f"whole number of {cfg.token_dtype} tokens (data.token_dtype)")
    tokens = np.memmap(path, dtype=cfg.token_dtype, mode="r")
    top = int(tokens.max()) if len(tokens) else -1
    if top >= vocab_size:
        raise ValueError(f"model.vocab_size: {vocab_size} does not cover token id {top} found "
                         f"in data.path {str(path)!r}; raise it to at least {top + 1}")
    return _tail_split(tokens, cfg.val_fraction, {"files": 1, "bytes": path.stat().st_size})


def _hf_tokens(cfg: DataConfig, vocab_size: int) -> Tokens:
    try:
        import datasets
    except ImportError:
        raise ImportError("data.source 'hf' needs the `datasets` package "
                          "(pip install datasets)") from None
    try:
        ds = datasets.load_dataset(cfg.name, split="train")
    except Exception as exc:
        raise ValueError(f"data.name: could not load dataset {cfg.name!r} locally (offline "
                         f"mode; download it beforehand): {type(exc).__name__}: {exc}") from None
    if "text" not in ds.column_names:
        raise ValueError(f"data.name: dataset {cfg.name!r} has no 'text' column "
                         f"(columns: {ds.column_names})")
    tok = tokenizer_for(cfg)
    check_vocab(tok, vocab_size, f"data.tokenizer: {cfg.tokenizer}")
    texts = ("\n".join(ds[i:i + 1000]["text"]) + "\n" for i in range(0, len(ds), 1000))
    cached = encode_to_cache([f"hf:{cfg.name}:{ds._fingerprint}"], texts, tok)
    return _tail_split(_memmap(cached), cfg.val_fraction, {"tokenizer": tok.identity})


def _code_tokens(cfg: DataConfig, vocab_size: int) -> Tokens:
    corpus, texts = select(cfg.roots, cfg.include, cfg.exclude, cfg.max_bytes, cfg.val_fraction)
    info: dict[str, object] = corpus.info()
    if isinstance(cfg.tokenizer, BpeSpec):
        path, trained = cached_bpe(corpus.train_sha256, cfg.tokenizer,
                                   (texts[f.name] for f in corpus.train))
        info.update(bpe_path=str(path), bpe_trained_now=trained)
        tok: Tokenizer = JsonTokenizer(str(path))
        _check_bpe_size(tok.vocab_size, cfg.tokenizer, corpus.info())
    else:
        tok = load_tokenizer(cfg.tokenizer)
    check_vocab(tok, vocab_size, f"data.tokenizer: {cfg.tokenizer}")
    arrays = []
    for split in (corpus.train, corpus.val):
        keys = ["python_code", *(f"{f.name}:{corpus.digests[f.name]}" for f in split)]
        arrays.append(_memmap(encode_to_cache(keys, (texts[f.name] for f in split), tok)))
    info.update(tokenizer=tok.identity, train_tokens=len(arrays[0]), val_tokens=len(arrays[1]))
    return Tokens(arrays[0], arrays[1], info)


def _check_bpe_size(got: int, spec: BpeSpec, corpus: dict[str, object]) -> None:
    """The BPE trainer stops early when no pair occurs ``min_frequency`` times: the model
    would then have ``train_bpe`` embedding rows of which only ``got`` are ever used, while
    the run records (and the sweep compares) a vocabulary of ``train_bpe``."""
    if got < spec.train_bpe:
        raise ValueError(f"data.tokenizer.train_bpe: {spec.train_bpe} tokens asked, but the "
                         f"training files ({corpus['train_files']} files, "
                         f"{corpus['train_bytes']} bytes, at most data.tokenizer.sample_bytes "
                         f"{spec.sample_bytes} of them) give only {got} with min_frequency "
                         f"{spec.min_frequency}; lower train_bpe to at most {got} or use more "
                         f"data (data.roots, data.include, data.max_bytes)")


LOADERS = {"text": _text_tokens, "tokens": _bin_tokens, "hf": _hf_tokens,
           "python_code": _code_tokens}


def load_tokens(cfg: DataConfig, vocab_size: int) -> Tokens:
    """The token arrays of a file-backed ``cfg`` (not 'synthetic'), with ``info``."""
    tokens = LOADERS[cfg.source](cfg, vocab_size)
    tokens.info = {"source": cfg.source, **tokens.info}
    return tokens


def tokenizer_for(cfg: DataConfig) -> Tokenizer:
    """The tokenizer a run with data ``cfg`` uses; a BPE is trained here on a cache miss."""
    if isinstance(cfg.tokenizer, BpeSpec):
        return JsonTokenizer(str(load_tokens(cfg, cfg.tokenizer.train_bpe).info["bpe_path"]))
    return load_tokenizer(cfg.tokenizer)
