"""The code version and package versions a run records (contract/provenance.py), on real git
repositories made in a temp dir: a clean tree, a dirty one (and the hash of its diff), a new
commit, a folder that is not a checkout's top level, and no git at all."""

from __future__ import annotations

import hashlib
import subprocess
from importlib import metadata
from pathlib import Path

import pytest

from contract import provenance
from contract.provenance import GIT, NO_GIT, code_version, package_versions, short_key


def _git(root: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(root), *args], capture_output=True, check=True,
                          text=True).stdout


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "src"
    root.mkdir()
    _git(root, "init", "-q")
    _git(root, "config", "user.email", "t@example.invalid")
    _git(root, "config", "user.name", "t")
    (root / "gate.py").write_text("INIT = 'normal'\n")
    _git(root, "add", "gate.py")
    _git(root, "commit", "-q", "-m", "one")
    return root


def test_a_clean_checkout_is_its_commit(repo: Path) -> None:
    cv = code_version(repo)
    assert cv.source == GIT and cv.git_commit == _git(repo, "rev-parse", "HEAD").strip()
    assert cv.dirty is False and cv.diff_sha256 is None
    assert cv.key == cv.git_commit and short_key(cv.key) == cv.git_commit[:12]
    assert cv.version == metadata.version("gatesweep")


def test_a_dirty_tree_is_detected_with_the_hash_of_its_diff(repo: Path) -> None:
    clean = code_version(repo)
    (repo / "gate.py").write_text("INIT = 'zeros'\n")  # a trainer fix not yet committed
    provenance._code_version.cache_clear()  # a new process would see it: per-process cache
    dirty = code_version(repo)
    diff = subprocess.run(["git", "-C", str(repo), "diff", "HEAD", "--no-ext-diff", "--no-color",
                           "--binary"], capture_output=True, check=True).stdout
    assert dirty.dirty is True and dirty.git_commit == clean.git_commit
    assert dirty.diff_sha256 == hashlib.sha256(diff).hexdigest()
    assert dirty.key != clean.key and dirty.key.startswith(clean.git_commit + "+")
    assert short_key(dirty.key) == f"{clean.git_commit[:12]}+dirty {dirty.diff_sha256[:8]}"
    (repo / "gate.py").write_text("INIT = 'ones'\n")  # another edit: another code version
    provenance._code_version.cache_clear()
    assert code_version(repo).key not in (clean.key, dirty.key)
    _git(repo, "commit", "-q", "-am", "fix")
    provenance._code_version.cache_clear()
    committed = code_version(repo)
    assert committed.dirty is False and committed.git_commit != clean.git_commit


def test_a_folder_inside_a_checkout_or_outside_git_has_no_commit(repo: Path,
                                                                  tmp_path: Path) -> None:
    inner = repo / "site-packages"  # an installed copy inside some other clone
    inner.mkdir()
    plain = tmp_path / "plain"
    plain.mkdir()
    for root in (inner, plain):
        cv = code_version(root)
        assert cv.source == NO_GIT and cv.git_commit is None and cv.dirty is None
        assert cv.key == f"gatesweep {metadata.version('gatesweep')} (no git)"


def test_package_versions_are_the_installed_ones() -> None:
    import platform

    got = package_versions()
    assert got["python"] == platform.python_version()
    for name in provenance.PACKAGES:
        assert got[name] == metadata.version(name)
