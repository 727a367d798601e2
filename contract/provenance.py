"""What produced a result: the code, the packages and the machine of one attempt.

The trainer records one ``Provenance`` per attempt, at its start (trainer/provenance.py adds the
accelerator and the DeepSpeed config to what this module collects), and hands it to the
Reporter as the artifact ``ARTIFACT``; the DB reporter stores it in the ``provenance`` table
(results_db/write/provenance.py), one row per attempt. The field names here are the column names
there: one owner.

"Which code" is ``CodeVersion``: the git commit of the source checkout the packages were
imported from, whether its tracked files differ from that commit, and the sha256 of that
difference (``git diff HEAD``); a source that is not a git checkout (an installed wheel) is
known by its installed version only. ``CodeVersion.key`` is the one string two results compare
on (results_db's mixing check, a sweep's ``cached_by: config_and_code``, ``rerun
--code-other-than-current``). Files git does not track are not part of it.

Collected once per process (``code_version`` and ``package_versions`` are cached): two git
commands (~10 ms each) at an attempt's start, nothing per step. Stdlib only.
"""

from __future__ import annotations

import functools
import hashlib
import os
import platform
import subprocess
from dataclasses import asdict, dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

ARTIFACT = "provenance"  # the Reporter artifact kind that carries one attempt's Provenance
NO_GIT = "no git"  # CodeVersion.source of a source tree that is not a git checkout
GIT = "git"
# Distributions whose versions are recorded (python's comes from the interpreter): the project
# itself and what decides its numbers or its storage.
PACKAGES: tuple[str, ...] = ("gatesweep", "torch", "deepspeed", "ray", "polars", "sqlalchemy")
# Package versions that make two results "different packages" for the mixing check (the
# project's own version is part of the code version; the storage libraries do not change a
# trained number, but are recorded and shown).
NUMERIC_PACKAGES: tuple[str, ...] = ("python", "torch", "deepspeed")
SOURCE_ROOT = Path(__file__).resolve().parents[1]  # the folder holding contract/, trainer/, ...
_GIT_TIMEOUT_S = 10.0


@dataclass(frozen=True)
class CodeVersion:
    source: str  # GIT | NO_GIT
    git_commit: str | None = None  # 40 hex digits (GIT only)
    dirty: bool | None = None  # tracked files differ from the commit (GIT only)
    diff_sha256: str | None = None  # sha256 of `git diff HEAD` when dirty
    version: str | None = None  # the installed gatesweep version

    @property
    def key(self) -> str:
        """The one string "same code" compares: the commit (plus the diff's hash when dirty),
        or the installed version where there is no git."""
        if self.source == GIT and self.git_commit:
            return self.git_commit + (f"+{self.diff_sha256[:16]}" if self.dirty and
                                  self.diff_sha256 else "")
        return f"gatesweep {self.version or '?'} ({NO_GIT})"


def short_key(key: str | None) -> str:
    """A code version key for people: 12 hex digits of the commit, "+dirty <8 of the diff
    hash>" when dirty; keys without git as they are."""
    if not key:
        return "unknown"
    commit, _, diff = key.partition("+")
    if len(commit) != 40:
        return key
    return commit[:12] + (f"+dirty {diff[:8]}" if diff else "")


def _git(root: Path, *args: str) -> bytes:
    return subprocess.run(["git", "-C", str(root), *args], capture_output=True, check=True,
                          timeout=_GIT_TIMEOUT_S).stdout


def _installed_version() -> str | None:
    try:
        return metadata.version("gatesweep")
    except metadata.PackageNotFoundError:
        return None


def code_version(root: Path | None = None) -> CodeVersion:
    """The code version of the source tree at ``root`` (default: where this package was
    imported from), computed once per process and root. A git checkout only counts when
    ``root`` is its top level: an installed copy inside some other repository (a venv in a
    clone) is not that repository's code."""
    return _code_version((root or SOURCE_ROOT).resolve())


@functools.lru_cache(maxsize=8)
def _code_version(root: Path) -> CodeVersion:
    version = _installed_version()
    try:
        top = Path(_git(root, "rev-parse", "--show-toplevel").decode().strip()).resolve()
        if top != root:
            return CodeVersion(NO_GIT, version=version)
        commit = _git(root, "rev-parse", "HEAD").decode().strip()
        diff = _git(root, "diff", "HEAD", "--no-ext-diff", "--no-color", "--binary")
    except (OSError, subprocess.SubprocessError, UnicodeDecodeError):
        return CodeVersion(NO_GIT, version=version)  # no git binary, not a checkout, no HEAD
    return CodeVersion(GIT, git_commit=commit, dirty=bool(diff),
                       diff_sha256=hashlib.sha256(diff).hexdigest() if diff else None,
                       version=version)


@functools.lru_cache(maxsize=1)
def package_versions() -> dict[str, str | None]:
    """{"python": ..., "gatesweep": ..., "torch": ..., ...}: installed versions (None when a
    distribution is not installed)."""
    out: dict[str, str | None] = {"python": platform.python_version()}
    for name in PACKAGES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = None
    return out


def cpu_model() -> str | None:
    """The CPU's model name (/proc/cpuinfo on Linux; else what platform says)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as fh:
            for line in fh:
                key, _, value = line.partition(":")
                if key.strip() in ("model name", "Processor", "cpu model"):
                    return value.strip() or None
    except OSError:
        pass
    return platform.processor() or platform.machine() or None


@dataclass(frozen=True)
class Provenance:
    """One attempt's provenance; the fields are the ``provenance`` table's columns."""

    source: str
    git_commit: str | None  # not "commit": a reserved word in SQL
    dirty: bool | None
    diff_sha256: str | None
    code_version: str
    python: str | None
    gatesweep: str | None
    torch: str | None
    deepspeed: str | None
    ray: str | None
    polars: str | None
    sqlalchemy: str | None
    accelerator: str  # "cuda" | "cpu" | ... (the device the run trained on)
    device_model: str | None  # e.g. "NVIDIA H200"; None on CPU
    device_count: int  # accelerators visible to the process (0 on CPU)
    cpu_model: str | None
    cpu_threads: int | None  # logical CPUs of the host
    world_size: int  # training processes (ranks)
    deepspeed_config: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


FIELDS: tuple[str, ...] = tuple(Provenance.__dataclass_fields__)


def host_provenance(*, accelerator: str, device_model: str | None, device_count: int,
                    world_size: int, deepspeed_config: dict[str, Any],
                    root: Path | None = None) -> Provenance:
    """The code, package and CPU parts collected here, the accelerator's given by the caller
    (the trainer, which knows the device it trains on)."""
    code, pkgs = code_version(root), package_versions()
    return Provenance(
        source=code.source, git_commit=code.git_commit, dirty=code.dirty,
        diff_sha256=code.diff_sha256,
        code_version=code.key, python=pkgs["python"], gatesweep=pkgs["gatesweep"],
        torch=pkgs["torch"], deepspeed=pkgs["deepspeed"], ray=pkgs["ray"],
        polars=pkgs["polars"], sqlalchemy=pkgs["sqlalchemy"], accelerator=accelerator,
        device_model=device_model, device_count=device_count, cpu_model=cpu_model(),
        cpu_threads=os.cpu_count(), world_size=world_size, deepspeed_config=deepspeed_config)
