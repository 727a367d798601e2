"""The `orchestrator` CLI without Ray: validate, dry run, runs/show/status/query/export/cancel,
exit codes and error messages (real SQLite files written through results_db's API)."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest

import results_db
from orchestrator.cli.main import main
from tests.support import smokedb

ROOT = Path(__file__).resolve().parents[2]
SMOKE = ROOT / "sweeps" / "smoke.yaml"
SPECS = Path(__file__).resolve().parents[1] / "data" / "specs"


def run_cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main([str(a) for a in args])
    cap = capsys.readouterr()
    return code, cap.out, cap.err


@pytest.fixture()
def url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'results.db'}"


@pytest.fixture()
def filled(url: str) -> str:
    """The smoke sweep registered; run 1 succeeded with metrics, run 2 failed."""
    return smokedb.fill(url)


def test_validate_prints_every_run_and_exits_zero(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_cli(capsys, "validate", SMOKE)
    assert code == 0, err
    for name in ("baseline-s0", "sdpa_elementwise-s0", "sdpa_headwise-s0"):
        assert name in out
    assert "valid, 3 runs" in out
    # parameter counts from the meta-device model: the headwise gate adds n_head * d_model
    # per layer = 4 * 64 * 2 = 512 parameters
    assert "512" in out


@pytest.mark.parametrize("bad", sorted(p.name for p in SPECS.glob("bad_*.yaml")))
def test_invalid_spec_exits_2_with_location_and_writes_nothing(
        capsys: pytest.CaptureFixture[str], url: str, bad: str) -> None:
    results_db.open(url)  # an existing, empty DB: it must stay empty
    code, out, err = run_cli(capsys, "submit", SPECS / bad, "--db", url)
    assert code == 2
    assert err.startswith("error: invalid sweep")
    assert f"{SPECS / bad}:" in err and "Traceback" not in err
    db = results_db.open(url)
    assert db.sweeps().height == 0 and db.runs().height == 0


def test_dry_run_writes_nothing_and_shows_db_state(capsys: pytest.CaptureFixture[str],
                                                   tmp_path: Path, filled: str) -> None:
    fresh = f"sqlite:///{tmp_path / 'never.db'}"
    code, out, _ = run_cli(capsys, "submit", SMOKE, "--dry-run", "--no-params", "--db", fresh)
    assert code == 0 and "3 to run" in out and "nothing was written" in out
    assert not (tmp_path / "never.db").exists()
    code, out, _ = run_cli(capsys, "submit", SMOKE, "--dry-run", "--no-params", "--db", filled)
    assert code == 0 and "1 cached, 2 to run" in out
    assert "succeeded" in out and "failed" in out


def test_runs_filters_and_show_details(capsys: pytest.CaptureFixture[str], filled: str) -> None:
    code, out, _ = run_cli(capsys, "runs", "--db", filled, "--status", "failed")
    assert code == 0 and "1 runs" in out and "sdpa_elementwise-s0" in out
    assert "baseline-s0" not in out
    code, out, _ = run_cli(capsys, "runs", "--db", filled, "--gate-position", "G1")
    assert "2 runs" in out
    code, out, _ = run_cli(capsys, "show", "sdpa_elementwise-s0", "--db", filled)
    assert code == 0 and "RuntimeError: boom" in out and "traceback of attempt 1" in out
    code, out, _ = run_cli(capsys, "show", "1", "--db", filled)
    assert "train/loss" in out and "val/ppl" in out and "12.5" in out


def test_unknown_run_is_a_one_line_error(capsys: pytest.CaptureFixture[str], filled: str) -> None:
    code, out, err = run_cli(capsys, "show", "nope", "--db", filled)
    assert code == 2 and err.startswith("error: no run with id or name 'nope'")
    assert "Traceback" not in err


def test_query_formats(capsys: pytest.CaptureFixture[str], filled: str, tmp_path: Path) -> None:
    sql = "select name, status from runs order by id"
    code, out, _ = run_cli(capsys, "query", sql, "--db", filled, "--format", "csv")
    assert code == 0 and out.splitlines()[:3] == ["name,status", "baseline-s0,succeeded",
                                                  "sdpa_elementwise-s0,failed"]
    code, out, _ = run_cli(capsys, "query", sql, "--db", filled, "--format", "json")
    assert json.loads(out)[0] == {"name": "baseline-s0", "status": "succeeded"}
    pq = tmp_path / "q.parquet"
    code, _, _ = run_cli(capsys, "query", sql, "--db", filled, "--format", "parquet", "--out", pq)
    assert code == 0 and pl.read_parquet(pq).height == 3
    code, out, _ = run_cli(capsys, "query", sql, "--db", filled)
    assert code == 0 and "sdpa_headwise-s0" in out
    code, _, err = run_cli(capsys, "query", sql, "--db", filled, "--format", "xml")
    assert code == 2 and "--format" in err


@pytest.mark.parametrize("sql", ["delete from runs", "insert into sweeps (name) values ('x')",
                                 "drop table metrics"])
def test_query_refuses_writes(capsys: pytest.CaptureFixture[str], filled: str, sql: str) -> None:
    code, _, err = run_cli(capsys, "query", sql, "--db", filled)
    assert code == 2 and "read-only" in err and "Traceback" not in err
    assert results_db.open(filled).runs().height == 3


def test_status_flags_stale_runs_without_writing(capsys: pytest.CaptureFixture[str],
                                                 filled: str) -> None:
    """status is read-only: a running run without heartbeat is reported, not marked lost."""
    db = results_db.open(filled)
    third = db.runs(status="pending")["id"][0]
    db.start_attempt(int(third), host="dead-host")  # never heartbeats again
    code, out, _ = run_cli(capsys, "status", "--db", filled, "--stale-after", "60")
    assert code == 0 and "no heartbeat" not in out
    code, out, _ = run_cli(capsys, "status", "smoke", "--db", filled, "--stale-after", "0")
    assert code == 0 and "no heartbeat for more than 0 s" in out and f"ids {third}" in out
    assert db.run(int(third)).status == "running"
    code, _, err = run_cli(capsys, "status", "nosuch", "--db", filled)
    assert code == 2 and "no sweep named 'nosuch'" in err


def test_cancel_and_export(capsys: pytest.CaptureFixture[str], filled: str,
                           tmp_path: Path) -> None:
    code, out, _ = run_cli(capsys, "cancel", "--sweep", "smoke", "--db", filled)
    assert code == 0 and "cancelled 1 run(s)" in out
    assert results_db.open(filled).runs(status="cancelled").height == 1
    code, out, _ = run_cli(capsys, "export", "--out", tmp_path / "x", "--db", filled)
    assert code == 0
    assert pl.read_parquet(tmp_path / "x" / "metrics.parquet").height == 3
    assert pl.read_parquet(tmp_path / "x" / "runs.parquet").height == 3


def test_detach_and_usage_errors(capsys: pytest.CaptureFixture[str], url: str) -> None:
    code, _, err = run_cli(capsys, "submit", SMOKE, "--detach", "--db", url)
    assert code == 2 and "--detach needs a Ray cluster" in err  # orchestrator/cli/jobs.py
    code, _, err = run_cli(capsys, "submit", SMOKE, "--bogus")
    assert code == 2 and "No such option" in err
    code, _, err = run_cli(capsys, "rerun", "--db", url)
    assert code == 2 and "give run ids" in err


def test_db_upgrade(capsys: pytest.CaptureFixture[str], url: str) -> None:
    code, out, _ = run_cli(capsys, "db", "upgrade", "--db", url)
    assert code == 0 and "revision" in out


def test_spawn_rerun_requeues_at_once_and_detaches(filled: str, tmp_path: Path) -> None:
    """The dashboard's button: the DB shows the run pending before the child does anything."""
    import os
    import signal

    from contract.errors import UserError
    from orchestrator.run.driver.rerun import spawn_rerun

    db = results_db.open(filled)
    failed = db.run("sdpa_elementwise-s0")
    pid = spawn_rerun(filled, failed.id, log_dir=tmp_path / "logs")
    try:
        assert db.run(failed.id).status == "pending"
        assert os.getpgid(pid) == pid  # its own session: survives the Streamlit process
        assert list((tmp_path / "logs").glob(f"rerun-{failed.id}-*.log"))
    finally:
        os.killpg(pid, signal.SIGKILL)  # this test checks the hand-off, not the training
    with pytest.raises(UserError, match="no run with id or name"):
        spawn_rerun(filled, 999)


@pytest.mark.slow
def test_dashboard_serves_on_localhost(filled: str) -> None:
    """`orchestrator dashboard` finds the installed app and serves it on 127.0.0.1."""
    import os
    import signal
    import subprocess
    import sys
    import time
    import urllib.request

    from tests.support.ports import free_port

    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "orchestrator", "dashboard", "--port",
                             str(port), "--db", filled], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, start_new_session=True, text=True)
    try:
        deadline, body = time.monotonic() + 90, ""
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/_stcore/health",
                                            timeout=2) as resp:
                    body = resp.read().decode()
                    break
            except OSError:
                time.sleep(0.5)
        assert body == "ok", f"dashboard did not come up (exit {proc.poll()})"
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=30)


def test_sweep_eta_from_live_runs() -> None:
    """The slowest running run's own ETA, plus the queue at the mean run length (elapsed +
    ETA) over the runs in flight: 100 + 2 x mean(100 + 50, 100 + 100) / 2 = 275 s."""
    from datetime import datetime, timedelta, timezone

    from orchestrator.cli.read import sweep_eta

    started = datetime.now(timezone.utc) - timedelta(seconds=100)
    live = pl.DataFrame({"status": ["running", "running", "pending", "pending"],
                         "eta_s": [50.0, 100.0, None, None],
                         "started": [started, started, None, None]})
    assert sweep_eta(live) == pytest.approx(275.0, abs=1.0)
    assert sweep_eta(live.filter(pl.col("status") == "pending")) is None  # nothing measured
    assert sweep_eta(live.head(0)) == 0.0  # nothing left


@pytest.mark.parametrize("argv", [["--help"], ["validate", "{bad}"], ["validate", "{smoke}"]],
                         ids=["help", "yaml-error", "validate-smoke"])
def test_fast_paths_import_no_heavy_package(tmp_path: Path, argv: list[str]) -> None:
    """--help, an error path and validate (no DB) must not import torch, Ray, DeepSpeed or
    polars (they cost seconds); a fresh interpreter reports what got imported."""
    import subprocess
    import sys

    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\nbase: {model: {preset: tiny}, train: {steps: yes}}\n")
    args = [a.format(bad=bad, smoke=SMOKE) for a in argv]
    db = f"sqlite:///{tmp_path / 'none.db'}"
    code = ("import sys\nfrom orchestrator.cli.main import main\n"
            f"rc = main({args + ['--db', db] if argv[0] != '--help' else args!r})\n"
            "heavy = [m for m in ('torch', 'ray', 'deepspeed', 'polars') if m in sys.modules]\n"
            "print('HEAVY', heavy, 'RC', rc)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120).stdout
    assert "HEAVY [] RC" in out, out[-2000:]


def test_validate_no_params_refuses_a_param_match_that_cannot_fit(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """submit refused it (counting parameters hit the rule); ``validate --no-params`` counted
    nothing and said the sweep was fine. The rule is the config's now: both refuse it."""
    sweep = tmp_path / "pm.yaml"
    sweep.write_text("name: pm\nbase: {model: {preset: tiny, d_ff: 8, param_match: true}}\n"
                     "variants: {g1: {gate.position: G1}}\n", encoding="utf-8")
    for args in (("validate", str(sweep), "--no-params"),
                 ("submit", str(sweep), "--dry-run", "--db", f"sqlite:///{tmp_path / 'x.db'}")):
        code, _, err = run_cli(capsys, *args)
        assert code == 2 and "model.param_match: the gates add 8192 parameters" in err, err
