"""``check(data_config, train_config) -> list[str]``: what can be checked without training.

Called by ``orchestrator validate`` for every distinct data config of a sweep, so it must be
fast and torch-free: it stats and samples files, it never tokenises a whole corpus. Each
problem is one line that starts with the key it is about (``data.path: ...``).

Checks: file paths exist, are regular files (not FIFOs or devices: reading those blocks or
never ends) and readable; text samples (the first SAMPLE_BYTES) decode as UTF-8; a .bin, and
text read with the byte tokenizer, has enough tokens for ``seq_len`` and ``eval_batches``
(contract/splits.py, the rule the trainer applies again to the real counts); a .bin has a
whole number of tokens; a tokenizer file loads (and fits
``vocab_size`` when given); python_code roots exist, every include pattern matches a file and
at least 2 files are chosen; the ``hf`` source has the ``datasets`` package.
"""

from __future__ import annotations

import codecs
import glob
import importlib.util
import os
import stat
from pathlib import Path

from contract.config import BpeSpec, DataConfig, TrainConfig
from contract.splits import split_problem
from trainer.corpus import list_root, matches

SAMPLE_BYTES = 64 << 10


def _regular_readable(path: Path, key: str) -> str | None:
    try:
        mode = path.stat().st_mode
    except OSError as exc:
        return f"{key}: {str(path)!r} cannot be read ({exc.strerror})"
    if not stat.S_ISREG(mode):
        return f"{key}: {str(path)!r} is not a regular file"
    if not os.access(path, os.R_OK):
        return f"{key}: {str(path)!r} is not readable (permissions)"
    return None


def _sample_utf8(path: Path, key: str) -> str | None:
    """The first SAMPLE_BYTES must decode (a multi-byte character cut at the end is fine)."""
    try:
        with path.open("rb") as fh:
            head = fh.read(SAMPLE_BYTES)
        codecs.getincrementaldecoder("utf-8")().decode(head, final=False)
    except UnicodeDecodeError as exc:
        return f"{key}: {str(path)!r} is not UTF-8 text ({exc.reason} at byte {exc.start})"
    except OSError as exc:
        return f"{key}: {str(path)!r} cannot be read ({exc.strerror})"
    return None


def _check_tokenizer(cfg: DataConfig, key: str, vocab_size: int | None) -> list[str]:
    if cfg.tokenizer == "bytes":
        if vocab_size is not None and vocab_size < 256:
            return [f"model.vocab_size: {vocab_size} is smaller than the byte tokenizer's 256 "
                    f"tokens ({key}.tokenizer: bytes)"]
        return []
    if isinstance(cfg.tokenizer, BpeSpec):
        try:
            import tokenizers  # noqa: F401
        except ImportError:
            return [f"{key}.tokenizer.train_bpe: needs the `tokenizers` package"]
        return []
    path = Path(cfg.tokenizer).expanduser()
    problem = _regular_readable(path, f"{key}.tokenizer")
    if problem:
        return [problem]
    try:
        from trainer.tokenizer import JsonTokenizer  # numpy: only when a file is named

        tok = JsonTokenizer(str(path))
    except (ValueError, ImportError, OSError) as exc:
        return [f"{key}.tokenizer: {exc}".replace(f"{key}.tokenizer: data.tokenizer: ",
                                                 f"{key}.tokenizer: ")]
    if vocab_size is not None and tok.vocab_size > vocab_size:
        return [f"model.vocab_size: {vocab_size} is smaller than the tokenizer's "
                f"{tok.vocab_size} tokens ({key}.tokenizer: {cfg.tokenizer})"]
    return []


def _check_files(cfg: DataConfig, train: TrainConfig, key: str) -> list[str]:
    pattern = str(Path(cfg.path or "").expanduser())
    # directories that a ** glob matches are skipped, as build_data skips them; FIFOs and
    # devices are kept, to be named below
    files = sorted(p for p in map(Path, glob.glob(pattern, recursive=True)) if not p.is_dir())
    if not files:
        return [f"{key}.path: no file matches {cfg.path!r} ({key}.source: {cfg.source})"]
    problems = [p for f in files if (p := _regular_readable(f, f"{key}.path"))]
    if problems:
        return problems
    if cfg.source == "text":
        problems = [p for f in files if (p := _sample_utf8(f, f"{key}.path"))]
        if problems or cfg.tokenizer != "bytes":  # a subword tokenizer's count needs encoding
            return problems
        # bytes = tokens (a CRLF file reads as fewer: the trainer re-checks the real count)
        return _split(sum(f.stat().st_size for f in files), cfg, train, key)
    if len(files) > 1:
        return [f"{key}.path: {cfg.path!r} matches {len(files)} files; the 'tokens' source "
                f"reads one .bin file"]
    size, itemsize = files[0].stat().st_size, (2 if cfg.token_dtype == "uint16" else 4)
    if size % itemsize:
        return [f"{key}.path: {str(files[0])!r} is {size} bytes, not a whole number of "
                f"{cfg.token_dtype} tokens ({key}.token_dtype)"]
    return _split(size // itemsize, cfg, train, key)


def _split(n: int, cfg: DataConfig, train: TrainConfig, key: str) -> list[str]:
    """The tail split of ``n`` tokens (trainer/token_files.py) against the run's needs."""
    n_val = int(n * cfg.val_fraction)
    problem = split_problem(f"{key}.path {cfg.path!r}", n - n_val, n_val, train.seq_len,
                            batch_size=train.batch_size, eval_batches=train.eval_batches,
                            val_key=f"{key}.val_fraction")
    return [problem] if problem else []


def _check_code(cfg: DataConfig, key: str) -> list[str]:
    problems, listings = [], []
    for root in cfg.roots:
        try:
            listings += [rels for _, _, rels in list_root(root)]
        except ValueError as exc:
            problems.append(str(exc).replace("data.roots", f"{key}.roots", 1))
    if problems:
        return problems
    rels = [rel for listing in listings for rel in listing]
    for pattern in cfg.include:
        if not any(matches(r, (pattern,)) and not matches(r, cfg.exclude) for r in rels):
            problems.append(f"{key}.include: {pattern!r} matches no file under "
                            f"{list(cfg.roots)} (after {key}.exclude)")
    chosen = (r for r in rels if matches(r, cfg.include) and not matches(r, cfg.exclude))
    if not problems and next(chosen, None) is not None and next(chosen, None) is None:
        problems.append(f"{key}.include: only 1 file matches {list(cfg.include)}; the held-out "
                        f"split by file needs at least 2")
    return problems


def check(data: DataConfig, train: TrainConfig, *, vocab_size: int | None = None,
          key: str = "data") -> list[str]:
    """Problems of ``data`` (one line each, starting with the key); [] when it looks usable.

    ``vocab_size``: the model's, to check a tokenizer file against; ``key``: the prefix to
    name (``data``, or ``eval.ppl_sets.NAME`` for a perplexity set).
    """
    if data.source == "synthetic":
        return []
    problems = _check_tokenizer(data, key, vocab_size)
    if data.source in ("text", "tokens"):
        problems += _check_files(data, train, key)
    elif data.source == "python_code":
        problems += _check_code(data, key)
    elif data.source == "hf" and importlib.util.find_spec("datasets") is None:
        problems.append(f"{key}.source: 'hf' needs the `datasets` package (pip install datasets)")
    return problems
