"""Hostile input: where a command may delete or write (orchestrator/run/driver/paths.py).
Every DB here is written through results_db's API, then changed the way any writer of a shared
results DB can (plain SQL on the file); nothing trains (rerun stops before Ray)."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

import results_db
from contract.errors import UserError
from orchestrator.run.driver.paths import checkpoint_dir, remove_dir, storage_arg
from orchestrator.run.driver.rerun import place
from tests.orchestrator.test_hostile_cli import add_run, run_cli


@pytest.fixture()
def url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'results.db'}"


def _set_config(url: str, run_id: int, **changes: str) -> None:
    path = url.removeprefix("sqlite:///")
    with sqlite3.connect(path) as conn:
        cfg = json.loads(conn.execute("SELECT config FROM runs WHERE id = ?",
                                      (run_id,)).fetchone()[0])
        conn.execute("UPDATE runs SET config = ? WHERE id = ?",
                     (json.dumps({**cfg, **changes}), run_id))


def _checkpoints(storage: Path, sweep: str, name: str) -> Path:
    step = storage / sweep / name / "checkpoints" / "step_00000010"
    step.mkdir(parents=True)
    (step / "model.pt").write_bytes(b"weights")
    return step


@pytest.mark.parametrize("changes", [{"name": "b-s0"}, {"sweep": "t", "name": "a-s0"}])
def test_fresh_never_deletes_another_runs_checkpoints(capsys: pytest.CaptureFixture[str],
                                                      tmp_path: Path, url: str,
                                                      changes: dict[str, str]) -> None:
    """The worst hostile-DB case found: run a's stored config renamed to run b's; `rerun a --fresh`
    removed <storage>/s/b-s0/checkpoints and queued a to train into b's directory."""
    storage = tmp_path / "st"
    db = results_db.open(url)
    a = add_run(db, "s", "a-s0", ckpt=str((storage / "s" / "a-s0" / "checkpoints").resolve()))
    add_run(db, "s", "b-s0")
    add_run(db, "t", "a-s0")
    others = [_checkpoints(storage, "s", "b-s0"), _checkpoints(storage, "t", "a-s0")]
    own = _checkpoints(storage, "s", "a-s0")
    _set_config(url, a, **changes)
    code, out, err = run_cli(capsys, "rerun", a, "--fresh", "--db", url, "--storage", storage)
    assert code == 2 and err.count("\n") == 1 and "its stored config names run" in err, err
    assert "removing" not in out
    assert all((o / "model.pt").read_bytes() == b"weights" for o in [*others, own])
    assert results_db.open(url).run(a).status == "failed"  # not re-queued either


def test_the_checkpoint_dir_comes_from_the_row_not_the_config(tmp_path: Path, url: str) -> None:
    db = results_db.open(url)
    a = add_run(db, "s", "a-s0", status="pending")
    add_run(db, "s", "b-s0", status="pending")
    _set_config(url, a, name="b-s0")
    p = place(results_db.open(url), results_db.open(url).run(a), tmp_path / "st")
    assert p.checkpoint_dir == (tmp_path / "st" / "s" / "a-s0" / "checkpoints").resolve()


def test_a_row_name_that_climbs_out_of_storage_is_refused(tmp_path: Path, url: str) -> None:
    """The row's own name is DB text too: '..' or a '/' in it must not lead elsewhere."""
    db = results_db.open(url)
    a = add_run(db, "s", "a-s0", status="pending")
    path = url.removeprefix("sqlite:///")
    for bad in ("../../victim", "..", "x/../..", "x/y"):
        with sqlite3.connect(path) as conn:
            conn.execute("UPDATE runs SET name = ? WHERE id = ?", (bad, a))
        with pytest.raises(UserError, match="outside --storage"):
            place(results_db.open(url), results_db.open(url).run(a), tmp_path / "st")


def test_a_symlinked_sweep_folder_is_refused_for_writes(tmp_path: Path) -> None:
    storage, victim = tmp_path / "st", tmp_path / "victim"
    storage.mkdir()
    victim.mkdir()
    (storage / "s").symlink_to(victim)
    with pytest.raises(UserError, match="outside --storage"):
        checkpoint_dir(storage, "s", "a-s0")
    # a symlinked storage root itself is fine: the root is resolved first
    (tmp_path / "link").symlink_to(victim)
    assert checkpoint_dir(tmp_path / "link", "s", "a-s0") == victim / "s" / "a-s0" / "checkpoints"


def test_remove_dir_deletes_only_a_real_directory_inside_storage(tmp_path: Path) -> None:
    storage, outside = tmp_path / "st", tmp_path / "outside"
    keep = _checkpoints(tmp_path, "outside", "x").parent
    said: list[str] = []
    with pytest.raises(UserError, match="nothing was deleted"):
        remove_dir(keep, storage, said.append)
    link = storage / "s" / "a-s0" / "checkpoints"
    link.parent.mkdir(parents=True)
    link.symlink_to(keep)
    with pytest.raises(UserError, match="nothing was deleted"):
        remove_dir(link, storage, said.append)
    assert (keep / "step_00000010" / "model.pt").exists() and not said
    assert outside.exists()
    link.unlink()
    own = _checkpoints(storage, "s", "b-s0").parent
    remove_dir(own, storage, said.append)
    assert not own.exists() and said == [f"removing {own} (1 checkpoint(s))"]


@pytest.mark.parametrize("raw", ["", " "])
def test_an_empty_storage_is_refused(raw: str, capsys: pytest.CaptureFixture[str],
                                     tmp_path: Path, url: str,
                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """`--storage ''` was Path('') = '.': checkpoints written (and --fresh deleting) in the
    working directory."""
    monkeypatch.chdir(tmp_path)
    with pytest.raises(UserError):
        storage_arg(raw)
    db = results_db.open(url)
    a = add_run(db, "s", "a-s0")
    code, out, err = run_cli(capsys, "rerun", a, "--fresh", "--storage", raw, "--db", url)
    assert code == 2 and "--storage" in err and "empty path" in err and out == "", err
    sweep = tmp_path / "s.yaml"
    sweep.write_text("name: s\nbase:\n  model: {preset: tiny}\nvariants:\n  baseline: {}\n")
    code, out, err = run_cli(capsys, "submit", sweep, "--storage", raw, "--db", url)
    assert code == 2 and "--storage" in err and "empty path" in err, err
    assert results_db.open(url).run(a).status == "failed"



def test_evaluate_refuses_a_config_naming_another_run(capsys: pytest.CaptureFixture[str],
                                                      tmp_path: Path, url: str) -> None:
    """evaluate loads weights from the run's checkpoint dir: from the row's identity, never
    from a config that names run b (it would evaluate b's weights as a's)."""
    storage = tmp_path / "st"
    db = results_db.open(url)
    # the writer changed both: a's config and a's checkpoint_dir artifact name b's
    a = add_run(db, "s", "a-s0", status="succeeded",
                ckpt=str((storage / "s" / "b-s0" / "checkpoints").resolve()))
    add_run(db, "s", "b-s0", status="succeeded",
            ckpt=str((storage / "s" / "b-s0" / "checkpoints").resolve()))
    _set_config(url, a, name="b-s0")
    code, _, err = run_cli(capsys, "evaluate", a, "--db", url)
    assert code == 2 and "its stored config names run 'b-s0'" in err, err


def _closed_port() -> int:
    from tests.support.ports import free_port

    return free_port()  # nothing listens once it is closed


@pytest.fixture()
def listener() -> Iterator[tuple[int, int]]:
    """(port of a server that accepts and never answers, port of one that answers junk):
    a blackholed or wrong host as seen from here (no network is needed)."""
    import socket
    import threading

    silent, junk = socket.socket(), socket.socket()
    for s in (silent, junk):
        s.bind(("127.0.0.1", 0))
        s.listen()
    stop = threading.Event()

    def answer_junk() -> None:
        junk.settimeout(0.2)
        while not stop.is_set():
            try:
                conn, _ = junk.accept()
            except OSError:
                continue
            with conn:
                conn.sendall(b"HTTP/1.1 400 Bad Request\r\n\r\n")

    t = threading.Thread(target=answer_junk, daemon=True)
    t.start()
    try:
        yield int(silent.getsockname()[1]), int(junk.getsockname()[1])
    finally:
        stop.set()
        t.join()
        silent.close()
        junk.close()


@pytest.mark.parametrize(("address", "why"), [
    ("ray://127.0.0.1:{closed}", "refused"), ("127.0.0.1:{closed}", "refused"),
    ("ray://127.0.0.1:{silent}", "no answer"), ("127.0.0.1:{junk}", "not a Ray")])
def test_rerun_checks_the_cluster_address_before_changing_anything(
        address: str, why: str, listener: tuple[int, int], capsys: pytest.CaptureFixture[str],
        tmp_path: Path, url: str) -> None:
    """An unreachable --address: rerun set the run back to pending, then hung > 90 s in Ray's
    connect. Now one line within seconds; the run and its checkpoints untouched."""
    import time

    storage = tmp_path / "st"
    db = results_db.open(url)
    a = add_run(db, "s", "a-s0", ckpt=str((storage / "s" / "a-s0" / "checkpoints").resolve()))
    own = _checkpoints(storage, "s", "a-s0")
    address = address.format(closed=_closed_port(), silent=listener[0], junk=listener[1])
    t0 = time.monotonic()
    code, out, err = run_cli(capsys, "rerun", a, "--fresh", "--address", address, "--db", url,
                             "--storage", storage)
    assert time.monotonic() - t0 < 10
    assert code == 2 and err.count("\n") == 1 and "cannot be reached" in err, err
    assert why in err.lower() or why in err, err
    assert (own / "model.pt").exists() and "removing" not in out
    assert results_db.open(url).run(a).status == "failed"
