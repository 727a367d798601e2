"""The ``python_code`` corpus: Python source files already on the machine, as a real dataset.

Every machine that runs gatesweep has an interpreter, hence a few tens of MB of Python source
(the standard library, installed packages): a real, offline, natural-language-like corpus.

- Roots: ``stdlib`` (without its site-packages) and ``site-packages`` (every directory this
  interpreter installs packages into), or directories.
- Files: relative paths (posix) matched by ``include`` and not by ``exclude`` globs
  (``**`` spans directories, ``*`` / ``?`` / ``[..]`` stay inside one path segment).
- Order and budget: files are ordered by sha256 of ``root-name/relative-path`` (a fixed
  shuffle: a byte budget then samples every package, not the alphabetically first ones), and
  taken in that order while ``max_bytes`` allows. Files that are not UTF-8 are skipped.
- Split by *file*: the ``val_fraction`` of files (at least one) with the lowest
  sha256("val:" + path) are held out, so validation never sees a training file.
- Identity: the corpus sha256 covers every chosen file's path, split and content hash. It is
  recorded with the run (``info``) because the corpus differs by machine (Python version,
  installed packages).

This module is torch-free: ``orchestrator validate`` lists corpora through it.
"""

from __future__ import annotations

import functools
import hashlib
import os
import re
import site
import sys
import sysconfig
from dataclasses import dataclass, field
from pathlib import Path

ROOT_KEYWORDS = ("stdlib", "site-packages")


@dataclass(frozen=True)
class CorpusFile:
    path: Path  # absolute
    name: str  # "<root-label>/<relative posix path>": machine-independent for keyword roots
    size: int


@dataclass(frozen=True)
class Corpus:
    train: tuple[CorpusFile, ...]
    val: tuple[CorpusFile, ...]
    skipped: tuple[str, ...] = ()  # names of files that were not UTF-8
    digests: dict[str, str] = field(default_factory=dict, compare=False)  # name -> sha256

    @property
    def sha256(self) -> str:
        """The whole corpus: both splits, each file's name and content hash."""
        return self._hash(("train", "val"))

    @property
    def train_sha256(self) -> str:
        """The training split alone (what a BPE trained on it depends on)."""
        return self._hash(("train",))

    def _hash(self, splits: tuple[str, ...]) -> str:
        h = hashlib.sha256()
        for split in splits:
            for f in getattr(self, split):
                h.update(f"{split}\0{f.name}\0{self.digests[f.name]}\n".encode())
        return h.hexdigest()

    def info(self) -> dict[str, object]:
        """What the run records about its corpus (trainer.data.data_summary / data_artifact)."""
        return {"corpus_sha256": self.sha256, "python": sys.version.split()[0],
                "files": len(self.train) + len(self.val), "train_files": len(self.train),
                "val_files": len(self.val), "train_bytes": sum(f.size for f in self.train),
                "val_bytes": sum(f.size for f in self.val), "skipped_non_utf8": len(self.skipped)}


# top-level directories of the stdlib that hold installed packages, not the standard library
STDLIB_SKIP = frozenset({"site-packages", "dist-packages"})


def _site_dirs() -> list[Path]:
    """Every directory this interpreter installs packages into (a venv's site-packages, or a
    system Python's several dist-packages), existing ones only, in a fixed order."""
    paths = sysconfig.get_paths()
    found = [paths["purelib"], paths["platlib"]]
    if sys.prefix == sys.base_prefix:  # no venv: the system's site directories count too
        found += site.getsitepackages()
    out: list[Path] = []
    for p in map(Path, found):
        if p.is_dir() and p.resolve() not in [q.resolve() for q in out]:
            out.append(p)
    return out


def resolve_root(root: str) -> list[tuple[str, Path]]:
    """(label, directory) pairs of a root keyword or directory; ValueError names the key."""
    if root == "stdlib":
        return [(root, Path(sysconfig.get_paths()["stdlib"]))]
    if root == "site-packages":
        dirs = _site_dirs()
        return [(root if i == 0 else f"{root}{i}", d) for i, d in enumerate(dirs)]
    path = Path(root).expanduser()
    if not path.is_dir():
        raise ValueError(f"data.roots: {root!r} is neither one of {list(ROOT_KEYWORDS)} nor an "
                         f"existing directory")
    return [(str(path.resolve()), path)]


@functools.lru_cache(maxsize=256)
def glob_regex(pattern: str) -> re.Pattern[str]:
    """A relative-path glob as a regex: ``**/`` = any directories (or none), ``**`` = anything,
    ``*`` = within a segment, ``?`` = one character, ``[...]`` = a class."""
    out, i = [], 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif pattern.startswith("**", i):
            out.append(".*")
            i += 2
        elif pattern[i] == "*":
            out.append("[^/]*")
            i += 1
        elif pattern[i] == "?":
            out.append("[^/]")
            i += 1
        elif pattern[i] == "[" and "]" in pattern[i + 2:]:
            end = pattern.index("]", i + 2)
            body = pattern[i + 1:end]
            out.append("[" + ("^" + body[1:] if body.startswith("!") else body) + "]")
            i = end + 1
        else:
            out.append(re.escape(pattern[i]))
            i += 1
    return re.compile("".join(out) + r"\Z")


def matches(rel: str, patterns: tuple[str, ...]) -> bool:
    return any(glob_regex(p).match(rel) for p in patterns)


@functools.lru_cache(maxsize=16)
def walk(root: Path, skip_top: frozenset[str] = frozenset()) -> tuple[str, ...]:
    """Relative posix paths of the files under ``root`` (symlinked dirs not followed),
    skipping hidden directories, __pycache__ and the top-level directories ``skip_top``.
    Cached per process: ``validate`` checks many data configs over the same roots."""
    out: list[str] = []
    for dirpath, dirnames, filenames in os.walk(root):
        top = dirpath == str(root)
        dirnames[:] = sorted(d for d in dirnames if not d.startswith(".") and d != "__pycache__"
                             and not (top and d in skip_top))
        rel_dir = Path(dirpath).relative_to(root).as_posix()
        prefix = "" if rel_dir == "." else rel_dir + "/"
        out.extend(prefix + f for f in filenames)
    return tuple(out)


def list_root(root: str) -> list[tuple[str, Path, tuple[str, ...]]]:
    """(label, directory, relative file paths) of each directory of one root."""
    skip = STDLIB_SKIP if root == "stdlib" else frozenset()
    return [(label, base, walk(base, skip)) for label, base in resolve_root(root)]


def _order_key(name: str, salt: str = "") -> str:
    return hashlib.sha256((salt + name).encode()).hexdigest()


def candidates(roots: tuple[str, ...], include: tuple[str, ...],
               exclude: tuple[str, ...]) -> list[CorpusFile]:
    """Every matching regular file of every root, in the fixed hash order."""
    found: dict[str, CorpusFile] = {}
    for label, base, rels in (d for root in roots for d in list_root(root)):
        for rel in rels:
            if matches(rel, include) and not matches(rel, exclude):
                path = base / rel
                # a regular file (or a link to one) with content: empty __init__.py files would
                # only make empty held-out files
                if path.is_file() and path.stat().st_size > 0:
                    found.setdefault(f"{label}/{rel}", CorpusFile(path, f"{label}/{rel}",
                                                                  path.stat().st_size))
    return sorted(found.values(), key=lambda f: _order_key(f.name))


def select(roots: tuple[str, ...], include: tuple[str, ...], exclude: tuple[str, ...],
           max_bytes: int | None, val_fraction: float) -> tuple[Corpus, dict[str, str]]:
    """The corpus and the text of each chosen file (name -> text); files are read once."""
    chosen, texts, skipped, digests, total = [], {}, [], {}, 0
    for f in candidates(roots, include, exclude):
        if max_bytes is not None and total + f.size > max_bytes:
            continue  # a smaller file later in the order may still fit
        raw = f.path.read_bytes()
        try:
            texts[f.name] = raw.decode("utf-8")
        except UnicodeDecodeError:
            skipped.append(f.name)
            continue
        chosen.append(f)
        digests[f.name] = hashlib.sha256(raw).hexdigest()
        total += f.size
    if len(chosen) < 2:
        raise ValueError(f"data.include: {len(chosen)} UTF-8 file(s) match {list(include)} under "
                         f"{list(roots)} (minus data.exclude, within data.max_bytes); the "
                         f"held-out split by file needs at least 2")
    n_val = min(len(chosen) - 1, max(1, round(len(chosen) * val_fraction)))
    by_val = sorted(chosen, key=lambda f: _order_key(f.name, "val:"))
    val_names = {f.name for f in by_val[:n_val]}
    corpus = Corpus(train=tuple(f for f in chosen if f.name not in val_names),
                    val=tuple(f for f in chosen if f.name in val_names),
                    skipped=tuple(skipped), digests=digests)
    return corpus, texts
