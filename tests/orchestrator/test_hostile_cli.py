"""What a careless user or a writer of a shared results DB could make the CLI delete,
replace, crash on or run away with. Every DB here is written through results_db's API, as
another tool (or another user) could; nothing trains (rerun stops before Ray)."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import polars as pl
import pytest

import results_db
from contract.config import RunSpec
from orchestrator.cli.main import main
from orchestrator.run.driver.rerun import place, remove_checkpoints

ROOT = Path(__file__).resolve().parents[2]


def run_cli(capsys: pytest.CaptureFixture[str], *args: object) -> tuple[int, str, str]:
    code = main([str(a) for a in args])
    cap = capsys.readouterr()
    return code, cap.out, cap.err


def config(name: str, sweep: str) -> dict[str, object]:
    return RunSpec(name=name, sweep=sweep, model={"preset": "tiny"}).model_dump(mode="json")


def add_run(db: results_db.ResultsDB, sweep: str, name: str, *, status: str = "failed",
            cfg: dict[str, object] | None = None, ckpt: str | None = None,
            error: str = "boom") -> int:
    """One run of ``sweep`` as a DB writer would store it; ``ckpt`` its recorded
    checkpoint_dir artifact (any path the writer likes)."""
    sid = db.ensure_sweep(sweep, "name: x\n")
    row = db.register_runs(sid, [results_db.NewRun(
        name=name, fingerprint=f"fp-{sweep}-{name}", variant=name.split("-")[0], seed=0,
        config=cfg or config(name, sweep))]).to_run[0]
    if status != "pending":
        att = db.start_attempt(row.id, host="h")
        if ckpt is not None:
            db.add_artifact(row.id, att.id, "checkpoint_dir", path=ckpt)
        db.finish_attempt(att.id, status, error=error, traceback=f"Traceback\n{error}")
    return row.id


@pytest.fixture()
def url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'results.db'}"


def victim(tmp_path: Path) -> Path:
    d = tmp_path / "victim" / "precious"
    d.mkdir(parents=True)
    (d / "thesis.tex").write_text("years of work\n")
    return d


# ---- (1) rerun --fresh deleted whatever directory the DB named -------------------------------
def test_fresh_never_deletes_a_directory_the_db_names(capsys, tmp_path: Path, url: str,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    keep = victim(tmp_path)
    db = results_db.open(url)
    rid = add_run(db, "s", "a-s0", ckpt=str(keep))
    code, _, err = run_cli(capsys, "rerun", rid, "--fresh", "--db", url)
    assert code == 2 and err.count("\n") == 1, err
    assert "is not <storage>/s/a-s0/checkpoints" in err
    assert (keep / "thesis.tex").read_text() == "years of work\n"
    assert results_db.open(url).run(rid).status == "failed"  # nothing re-queued either


def test_a_stored_sweep_path_cannot_lead_out_of_storage(capsys, tmp_path: Path, url: str,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """config.sweep = '../../..': the old rerun rmtree'd <storage>/../../../<dir>, then failed
    validating the config with a 19-line pydantic error."""
    monkeypatch.chdir(tmp_path)
    keep = tmp_path / "victim" / "precious" / "checkpoints"  # = <storage>/../victim/<name>/...
    keep.mkdir(parents=True)
    (keep / "thesis.tex").write_text("years of work\n")
    cfg = {**config("precious", "s"), "sweep": "../victim"}
    db = results_db.open(url)
    rid = add_run(db, "s", "precious", cfg=cfg)
    (tmp_path / "runs").mkdir()
    code, _, err = run_cli(capsys, "rerun", rid, "--fresh", "--storage", tmp_path / "runs",
                           "--db", url)
    assert code == 2 and err.count("\n") == 1, err
    assert "stored config is not a valid run spec" in err and "sweep" in err
    assert (keep / "thesis.tex").exists()


def test_fresh_removes_only_inside_storage_and_says_so(tmp_path: Path, url: str) -> None:
    db = results_db.open(url)
    storage = tmp_path / "store"
    ckpt = storage / "s" / "a-s0" / "checkpoints"
    (ckpt / "step_00000010").mkdir(parents=True)
    rid = add_run(db, "s", "a-s0", ckpt=str(ckpt.resolve()))
    row = db.run(rid)
    p = place(db, row, None)  # no --storage: the recorded dir (it fits the layout)
    assert p.checkpoint_dir == ckpt.resolve() and p.storage == storage.resolve()
    said: list[str] = []
    with pytest.raises(Exception, match="nothing was deleted"):  # default --storage is ./runs
        remove_checkpoints(p, None, said.append)
    assert ckpt.exists() and not said
    remove_checkpoints(p, storage, said.append)
    assert not ckpt.exists() and said == [f"rerun --fresh: removing {ckpt.resolve()} "
                                          "(1 checkpoint(s))"]


def test_symlinked_run_folder_is_not_followed_out_of_storage(tmp_path: Path, url: str) -> None:
    keep = victim(tmp_path)
    storage = tmp_path / "store"
    (storage / "s").mkdir(parents=True)
    (storage / "s" / "a-s0").symlink_to(keep.parent)
    db = results_db.open(url)
    row = db.run(add_run(db, "s", "a-s0", status="pending"))
    with pytest.raises(Exception, match="outside --storage"):
        place(db, row, storage)


def test_a_never_started_run_checkpoints_beside_its_sweep(tmp_path: Path, url: str,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """`rerun --sweep` from another directory put never-started runs under that
    directory's ./runs instead of the sweep's storage."""
    storage = (tmp_path / "store").resolve()
    db = results_db.open(url)
    add_run(db, "s", "a-s0", ckpt=str(storage / "s" / "a-s0" / "checkpoints"))
    row = db.run(add_run(db, "s", "b-s0", status="pending"))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    p = place(db, row, None)
    assert p.checkpoint_dir == storage / "s" / "b-s0" / "checkpoints"
    assert p.storage == storage


# ---- (2) --out replaced special files ----------------------------------------------------------
def test_out_refuses_special_files_and_dash_is_stdout(capsys, tmp_path: Path, url: str) -> None:
    results_db.open(url)
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    link = tmp_path / "null-link"
    link.symlink_to("/dev/null")
    # (not /dev/null itself: run against the old code as root, this test would replace it)
    for target, kind in ((fifo, "FIFO"), (link, "character device")):
        code, _, err = run_cli(capsys, "query", "select 1 as x", "--out", target, "--db", url)
        assert code == 2 and f"is a {kind}, not a regular file" in err, err
    assert fifo.is_fifo() and link.is_symlink() and link.resolve() == Path("/dev/null")
    monkey_cwd = tmp_path / "cwd"
    monkey_cwd.mkdir()
    old = os.getcwd()
    os.chdir(monkey_cwd)
    try:
        code, out, _ = run_cli(capsys, "query", "select 1 as x", "--format", "csv", "--out", "-",
                               "--db", url)
    finally:
        os.chdir(old)
    assert code == 0 and out == "x\n1\n" and not (monkey_cwd / "-").exists()


# ---- (3) names printed as rich markup; (12) escape sequences reach the terminal ---------------
ODD = "odd[/x][bold]\x1b]0;pwned\x07\x1b[31m"


def test_markup_and_escapes_in_names_print_as_text(capsys, tmp_path: Path, url: str) -> None:
    db = results_db.open(url)
    rid = add_run(db, ODD, "v[/x]-s0", error="err \x1b[2J [/red]", cfg=config("v-s0", "s"))
    for argv in (["status"], ["runs"], ["show", str(rid)], ["status", ODD + "?"]):
        code, out, err = run_cli(capsys, *argv, "--db", url)
        text = out + err
        assert code in (0, 2) and "\x1b" not in text and "\x07" not in text, (argv, text)
        assert "MarkupError" not in text and "Traceback (most recent" not in text
    code, out, _ = run_cli(capsys, "show", rid, "--db", url)
    assert "v[/x]-s0" in out and r"err \x1b[2J [/red]" in out


def test_a_file_named_like_markup_is_named_in_full(capsys, tmp_path: Path) -> None:
    bad = tmp_path / "[draft] [/x].yaml"  # a folder "[draft] [" holding "x].yaml"
    bad.parent.mkdir()
    bad.write_text("name: [unclosed\n")
    code, _, err = run_cli(capsys, "validate", bad)
    assert code == 2 and "[draft] [/x].yaml" in err, err


# ---- (4) stability --format csv with its list column --------------------------------------------
def test_conclusion_csv_holds_nested_columns_and_neutralises_formulas() -> None:
    from orchestrator.cli.frame_format import csv_text

    frame = pl.DataFrame({"variant": ["=HYPERLINK(\"x\")", "+1", "-a", "@b", "ok"],
                          "lrs": [[1e-3, 2e-3], [1e-3], [], None, [float("nan")]],
                          "delta": [-1.5, 0.0, 1.0, 2.0, 3.0]})
    lines = csv_text(frame).splitlines()
    assert lines[0] == "variant,lrs,delta"
    assert lines[1] == "\"'=HYPERLINK(\"\"x\"\")\",\"[0.001, 0.002]\",-1.5"
    assert lines[2:] == ["'+1,[0.001],0.0", "'-a,[],1.0", "'@b,,2.0", "ok,[null],3.0"]
    assert csv_text(pl.DataFrame({"=cmd()": [1], "x": ["y"]})) == "'=cmd(),x\n1,y\n"


# ---- (5) (6) query: time limit, Ctrl-C, row and byte caps ---------------------------------------
RUNAWAY = "with recursive r(i) as (select 1 union all select i + 1 from r) select count(*) from r"


def test_query_stops_at_its_timeout(capsys, url: str) -> None:
    results_db.open(url)
    t0 = time.monotonic()
    code, _, err = run_cli(capsys, "query", RUNAWAY, "--timeout", "0.5", "--db", url)
    assert code == 2 and "stopped after 0.5 s (--timeout)" in err, err
    assert time.monotonic() - t0 < 5


def test_ctrl_c_stops_a_runaway_sqlite_query(url: str) -> None:
    results_db.open(url)
    db = results_db.open(url, readonly=True)
    # Ctrl-C as a CLI process has it: Python's default handler. A test worker may hold another
    # one that a library installed (the query then ran on until the test timeout).
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        threading.Timer(0.5, os.kill, (os.getpid(), signal.SIGINT)).start()
        t0 = time.monotonic()
        with pytest.raises(KeyboardInterrupt):
            db.query(RUNAWAY, results_db.QueryLimits(timeout_s=None))
        # the query would never end: any bound proves the stop (30 s: room for a loaded host)
        assert time.monotonic() - t0 < 30
    finally:
        signal.signal(signal.SIGINT, previous)


def test_query_caps_rows_and_bytes(capsys, url: str) -> None:
    results_db.open(url)
    many = "with recursive r(i) as (select 1 union all select i + 1 from r limit 50000) " \
           "select i from r"
    code, _, err = run_cli(capsys, "query", many, "--max-rows", "1000", "--db", url)
    assert code == 2 and "more than 1,000 rows (--max-rows)" in err, err
    code, _, err = run_cli(capsys, "query", "select zeroblob(1000000000) as b", "--db", url)
    assert code == 2 and err.count("\n") == 1 and "(--max-mb)" in err, err
    code, _, err = run_cli(capsys, "query", "select hex(zeroblob(2000)) as b",
                           "--max-mb", "0.001", "--db", url)
    assert code == 2 and "a value larger than 0.001 MiB (--max-mb)" in err, err
    rows = "with recursive r(i) as (select 1 union all select i + 1 from r limit 2000) " \
           "select hex(zeroblob(500)) as b from r"  # 2000 x 1000 bytes, each value small
    code, _, err = run_cli(capsys, "query", rows, "--max-mb", "1", "--db", url)
    assert code == 2 and "more than 1 MiB (--max-mb)" in err, err


# ---- (9) a WAL DB on read-only storage ---------------------------------------------------------
def test_a_wal_db_on_readonly_storage_can_be_read(capsys, tmp_path: Path) -> None:
    src, ro = tmp_path / "src", tmp_path / "ro"
    src.mkdir()
    ro.mkdir()
    db = results_db.open(f"sqlite:///{src / 'r.db'}")
    add_run(db, "s", "a-s0")
    db.engine.dispose()
    db.reader.dispose()
    assert not (src / "r.db-shm").exists()
    if subprocess.run(["mount", "--bind", str(src), str(ro)], capture_output=True).returncode:
        pytest.skip("no bind mounts here (a read-only mount is what this test needs)")
    try:
        if subprocess.run(["mount", "-o", "remount,bind,ro", str(ro)],
                          capture_output=True).returncode:
            pytest.skip("cannot remount read-only")
        code, out, err = run_cli(capsys, "runs", "--db", ro / "r.db")
        assert code == 0 and "a-s0" in out, err
    finally:  # lazy: the CLI's pooled connection may still hold the file open
        subprocess.run(["umount", "-l", str(ro)], check=False)


# ---- (10) cancel/rerun ID --sweep S --------------------------------------------------------------
def test_ids_outside_the_named_sweep_are_refused(capsys, url: str) -> None:
    db = results_db.open(url)
    other = add_run(db, "t", "a-s0", status="pending")
    add_run(db, "s", "b-s0", status="pending")
    for cmd in ("cancel", "rerun"):
        code, _, err = run_cli(capsys, cmd, other, "--sweep", "s", "--db", url)
        assert code == 2 and f"run '{other}' (id {other}) is not in sweep 's'" in err, err
    assert results_db.open(url).run(other).status == "pending"


# ---- (11) (13) names -----------------------------------------------------------------------------
def test_run_names_must_be_one_creatable_folder() -> None:
    for bad in ("x" * 256, "é" * 128, "a/b", "..", "a\nb"):
        with pytest.raises(ValueError, match="folder"):
            RunSpec(name=bad, model={"preset": "tiny"})
    RunSpec(name="x" * 255, model={"preset": "tiny"})


def test_long_variant_names_fail_at_validate(capsys, tmp_path: Path) -> None:
    f = tmp_path / "long.yaml"
    f.write_text("name: long\nbase:\n  model: {preset: tiny}\nvariants:\n"
                 f"  {'v' * 260}: {{}}\n")
    code, _, err = run_cli(capsys, "validate", f, "--no-data")
    assert code == 2 and "bytes long; a folder name holds at most 255" in err, err


def test_a_variant_name_with_a_trailing_newline_is_refused(capsys, tmp_path: Path) -> None:
    f = tmp_path / "nl.yaml"
    f.write_text('name: nl\nbase:\n  model: {preset: tiny}\nvariants:\n  "base\\n": {}\n')
    code, _, err = run_cli(capsys, "validate", f, "--no-data")
    assert code == 2 and "variant name" in err, err


def test_show_refuses_an_ambiguous_name(capsys, url: str) -> None:
    db = results_db.open(url)
    a = add_run(db, "s", "same-s0")
    b = add_run(db, "t", "same-s0")
    code, _, err = run_cli(capsys, "show", "same-s0", "--db", url)
    assert code == 2 and f"runs {a} (s), {b} (t); give the run id" in err, err


def test_db_upgrade_leaves_another_tools_sqlite_file_alone(capsys, tmp_path: Path) -> None:
    f = tmp_path / "notes.sqlite"
    with sqlite3.connect(f) as c:
        c.execute("create table notes (t text)")
        c.execute("insert into notes values ('mine')")
    before = f.read_bytes()
    for argv in (["db", "upgrade", "--db", f],):
        code, _, err = run_cli(capsys, *argv)
        assert code == 2 and "holds another tool's tables (notes)" in err, err
    assert f.read_bytes() == before and not Path(f"{f}-wal").exists()


# ---- (12) LaTeX / Markdown exports --------------------------------------------------------------
def test_latex_and_markdown_keep_names_inert() -> None:
    from orchestrator.cli.frame_format import latex, markdown

    frame = pl.DataFrame({"variant": ["a\n\\input{/etc/passwd}\x1b\x07", "<b>x</b>|y"],
                          "n": [1, 2]})
    tex = latex(frame, ["variant", "n"], title="s\n\\write18{rm -rf}", summary="ok")
    lines = tex.splitlines()
    assert lines[0] == "% s \\write18{rm -rf}" and lines[1] == "% ok"
    assert "a \\textbackslash{}input\\{/etc/passwd\\} & 1 \\\\" in lines
    assert "\x1b" not in tex and "\x07" not in tex
    md = markdown(frame, ["variant", "n"], title="t\n# h")
    body = md.splitlines()
    assert body[0] == "### t # h" and len(body) == 6
    assert body[-1] == "| \\<b>x\\</b>\\|y | 2 |"


# ---- the CLI as a process: SIGINT ends a runaway query (exit 130) -------------------------------
def test_ctrl_c_ends_the_query_command(url: str) -> None:
    results_db.open(url)
    proc = subprocess.Popen([sys.executable, "-m", "orchestrator", "query", RUNAWAY, "--timeout",
                             "0", "--db", url], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, cwd=ROOT, preexec_fn=_terminal_sigint)
    _wait_until_open(proc, results_db.sqlite_database(url) or "")  # imports done
    time.sleep(1)  # the statement runs: a signal before it starts would prove nothing
    proc.send_signal(signal.SIGINT)
    try:
        _, err = proc.communicate(timeout=30)  # a hang runs forever
    except subprocess.TimeoutExpired:
        proc.kill()
        raise AssertionError("query kept running after SIGINT") from None
    assert proc.returncode == 130 and "Traceback" not in err, err


def _terminal_sigint() -> None:
    """SIGINT as at a terminal, in the child before exec: a child inherits an ignored or a
    blocked SIGINT (Ray and gRPC block signals in the threads they start), and in two full
    `make test` runs the query ran on past a SIGINT in this worker while alone it passed."""
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _wait_until_open(proc: subprocess.Popen[str], path: str, timeout: float = 120) -> None:
    """Until ``proc`` has the file open: a fixed sleep raced slow imports on a loaded machine."""
    want, deadline = os.path.realpath(path), time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.communicate()
        try:
            fds = os.listdir(f"/proc/{proc.pid}/fd")
            if any(os.path.realpath(f"/proc/{proc.pid}/fd/{fd}") == want for fd in fds):
                return
        except OSError:
            pass  # an fd closed while we looked
        time.sleep(0.1)
    raise AssertionError(f"the query never opened {path}")


# ---- (5) (8) PostgreSQL: statement_timeout, SIGTERM cancels on the server, privileged roles ---
def _active(pg_server, role: str) -> list[str]:
    import psycopg

    with psycopg.connect(host="127.0.0.1", port=pg_server.port, user="postgres",
                         dbname="postgres", autocommit=True) as conn:
        return [r[0] for r in conn.execute(
            "SELECT query FROM pg_stat_activity WHERE usename = %s AND state = 'active'",
            (role,))]


@pytest.mark.postgres
def test_postgres_query_is_bounded_cancellable_and_refuses_superusers(capsys, pg_server,
                                                                       pg_url: str) -> None:
    import uuid

    results_db.open(pg_url)
    code, _, err = run_cli(capsys, "query", "select 1 as x", "--db", pg_url)
    assert code == 2 and "role 'postgres' is a PostgreSQL superuser" in err, err
    role = f"reader_{uuid.uuid4().hex[:8]}"
    pg_server.admin(f"CREATE ROLE {role} LOGIN; GRANT pg_read_all_data TO {role}")
    reader = pg_url.replace("postgres@", f"{role}@", 1)
    code, out, err = run_cli(capsys, "query", "select count(*) as n from runs", "--format",
                             "csv", "--db", reader)
    assert code == 0 and out == "n\n0\n", err
    db = results_db.open(reader, readonly=True)
    t0 = time.monotonic()
    with pytest.raises(results_db.QueryLimitError, match=r"stopped after 0.5 s \(--timeout\)"):
        db.query("select pg_sleep(30) as x", results_db.QueryLimits(timeout_s=0.5))
    assert time.monotonic() - t0 < 10
    db.reader.dispose()
    proc = subprocess.Popen([sys.executable, "-m", "orchestrator", "query",
                             "select pg_sleep(120) as x", "--timeout", "0", "--db", reader],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT)
    try:
        deadline = time.monotonic() + 30
        while not any("pg_sleep(120)" in q for q in _active(pg_server, role)):
            assert time.monotonic() < deadline and proc.poll() is None, proc.stderr.read()
            time.sleep(0.2)
        proc.terminate()  # SIGTERM: the old client died and left the statement running
        proc.wait(timeout=20)
    finally:
        proc.kill()
    deadline = time.monotonic() + 10
    while any("pg_sleep(120)" in q for q in _active(pg_server, role)):
        assert time.monotonic() < deadline, "the server kept running the query after SIGTERM"
        time.sleep(0.2)


# ---- the next layer (own hostile pass): each used to reach Ray or a traceback -------------------
def test_rerun_refuses_a_file_as_storage_and_a_mistyped_status(capsys, tmp_path: Path,
                                                               url: str) -> None:
    db = results_db.open(url)
    rid = add_run(db, "s", "a-s0")
    add_run(db, "s", "b-s0", status="pending")  # what a typo in --status used to widen to
    (tmp_path / "afile").write_text("x\n")
    code, _, err = run_cli(capsys, "rerun", rid, "--storage", tmp_path / "afile", "--db", url)
    assert code == 2 and "--storage" in err and "is a file; expected a directory" in err, err
    code, _, err = run_cli(capsys, "rerun", "--sweep", "s", "--status", "faild", "--db", url)
    assert code == 2 and "--status: 'faild' is not a run status" in err, err
    assert {r: results_db.open(url).run(r).status for r in (rid, rid + 1)} == \
        {rid: "failed", rid + 1: "pending"}


def test_query_limits_refuse_infinite_values(capsys, url: str) -> None:
    results_db.open(url)
    for opt in ("--max-mb", "--timeout"):
        code, _, err = run_cli(capsys, "query", "select 1 as x", opt, "inf", "--db", url)
        assert code == 2 and "Traceback" not in err and "less than or equal" in err, err


def test_a_text_value_in_a_number_column_is_missing_not_a_crash(capsys, url: str) -> None:
    """SQLite keeps whatever a writer stores: text in summaries.value crashed leaderboard,
    table and effects with a polars cast traceback."""
    db = results_db.open(url)
    a, b = add_run(db, "s", "a-s0", status="succeeded"), add_run(db, "s", "baseline-s0",
                                                                  status="succeeded")
    for rid, v in ((a, 10.0), (b, 11.0)):
        db.log_summaries(rid, db.attempts(rid)[-1].id, {"val/ppl": v})
    db.engine.dispose()
    with sqlite3.connect(url.removeprefix("sqlite:///")) as c:
        c.execute("update summaries set value = 'abc' where run_id = ?", (a,))
    for cmd in ("leaderboard", "table", "effects"):
        code, out, err = run_cli(capsys, cmd, "s", "--db", url)
        assert code == 0 and "Traceback" not in err, (cmd, err)
    code, out, _ = run_cli(capsys, "query", "select value from summaries order by run_id",
                           "--format", "csv", "--db", url)
    assert out == "value\nabc\n11.0\n"  # the text is still there for anyone to see
    code, out, _ = run_cli(capsys, "leaderboard", "s", "--db", url, "--format", "json")
    means = [r["mean"] for r in __import__("json").loads(out)["rows"]]
    assert code == 0 and means == [11.0]  # the text value counts as missing
