"""The cache of the Vega bundle every HTML report inlines (dashboard/report/bundlecache.py):
nothing planted in it is read or written through. It was a predictable file in the user's
cache home, read through any symbolic link and inlined unchecked, and written through a
predictable temp name: whoever could write there chose the report's JavaScript."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from dashboard.report import bundlecache

PLANTED = "/* planted */ alert(1)"


@pytest.fixture()
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A cache home of this test's own ($XDG_CACHE_HOME)."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    return tmp_path / "cache"


def _entry(text: str) -> str:
    """An entry as bundlecache writes one: the hash line, then the text."""
    import hashlib

    return f"{bundlecache.HEADER}{hashlib.sha256(text.encode()).hexdigest()}\n{text}"


def test_an_entry_round_trips_in_a_private_folder(home: Path) -> None:
    bundlecache.write("b.js", "var x = 1;")
    assert bundlecache.read("b.js") == "var x = 1;"
    where = bundlecache.folder()
    assert where.stat().st_mode & 0o777 == 0o700
    assert [p.name for p in where.iterdir()] == ["b.js"]  # no temp file left behind


def test_a_planted_link_is_neither_read_nor_written_through(home: Path, tmp_path: Path) -> None:
    victim = tmp_path / "victim.js"
    victim.write_text(_entry(PLANTED))
    bundlecache.private_folder()
    (bundlecache.folder() / "b.js").symlink_to(victim)
    assert bundlecache.read("b.js") is None  # a well-formed entry, but through a link
    bundlecache.write("b.js", "var x = 1;")
    assert victim.read_text() == _entry(PLANTED)  # the link replaced, its target untouched
    assert bundlecache.read("b.js") == "var x = 1;"


def test_an_edited_entry_is_not_trusted(home: Path) -> None:
    bundlecache.write("b.js", "var x = 1;")
    path = bundlecache.folder() / "b.js"
    path.write_text(path.read_text() + PLANTED)
    assert bundlecache.read("b.js") is None
    path.write_text(PLANTED)  # no hash line at all (an entry of the old layout)
    assert bundlecache.read("b.js") is None


@pytest.mark.parametrize("how", ["link", "open to others"])
def test_a_folder_someone_else_could_fill_is_not_used(home: Path, tmp_path: Path,
                                                      how: str) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "b.js").write_text(_entry(PLANTED))
    folder = bundlecache.folder()
    folder.parent.mkdir(parents=True)
    if how == "link":
        folder.symlink_to(elsewhere)
    else:
        folder.mkdir()
        (folder / "b.js").write_text(_entry(PLANTED))
        os.chmod(folder, 0o777)
    assert bundlecache.private_folder() is None
    assert bundlecache.read("b.js") is None
    bundlecache.write("c.js", "var x = 1;")
    assert not (elsewhere / "c.js").exists() and not (folder / "c.js").exists()


def test_the_report_bundle_ignores_what_was_planted_in_the_cache(home: Path) -> None:
    """Through javascript_bundle: an entry planted as a link in the cache folder (this layout
    and the one before it, the cache home's gatesweep/ folder) is not inlined."""
    pytest.importorskip("vl_convert", reason="vl-convert-python (the report extra)")
    import vl_convert as vlc

    from dashboard.report import vega

    version = getattr(vlc, "__version__", "") or vlc.get_vega_version()
    name = f"vega-bundle-{version}-vl{vega.vl_version()}.js"
    source = home.parent / "planted.js"
    source.write_text(PLANTED)
    bundlecache.private_folder()
    for where in (bundlecache.folder(), bundlecache.folder().parent):
        (where / name).symlink_to(source)
    js = vega.javascript_bundle()
    assert "planted" not in js and "vegaEmbed" in js
    assert source.read_text() == PLANTED
    assert vega.javascript_bundle() == js  # from the cache now, checked
