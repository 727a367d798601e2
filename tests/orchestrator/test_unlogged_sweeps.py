"""A sweep whose runs have not logged a point yet, and one trained before provenance was
recorded: ``orchestrator report`` renders both (it failed with "report builder failed
(SchemaError ...)"), and ``cached_by: config_and_code`` / ``rerun --code-other-than-current``
read a run with no recorded code version as other code (retrained), without a traceback."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

import results_db
from orchestrator.cli.main import main
from orchestrator.run.driver.code_cache import code_rerun_plan, requeue_other_code
from orchestrator.run.driver.submit import make_plan, register

SMOKE = Path(__file__).resolve().parents[2] / "sweeps" / "smoke.yaml"


def _db(tmp_path: Path, how: str) -> str:
    """``empty``: the sweep and no run. ``started``: the runs registered, one running,
    nothing logged. ``summaries``: every run succeeded with summaries only (no curve point,
    no provenance)."""
    url = f"sqlite:///{tmp_path / 'r.db'}"
    db = results_db.open(url)
    if how == "empty":  # the sweep row a submit writes first, no run yet
        db.ensure_sweep("smoke")
        return url
    runs = register(db, make_plan(SMOKE), force=False).to_run
    if how == "started":
        db.start_attempt(runs[0].id, host="h")
        return url
    for r in runs:
        a = db.start_attempt(r.id, host="h")
        db.log_summaries(r.id, a.id, {"val/ppl": 10.0 + r.id, "val/loss": 2.0})
        db.finish_attempt(a.id, "succeeded")
    return url


@pytest.mark.parametrize("fmt", ["html", "markdown"])
@pytest.mark.parametrize("how", ["empty", "started", "summaries"])
def test_report_renders_a_sweep_with_no_curve_point(how: str, fmt: str, tmp_path: Path) -> None:
    """The report builder ``orchestrator report`` runs as its child (dashboard.report), here in
    this process: a child's start per case proves nothing more (the next test runs the CLI)."""
    from dashboard.report.__main__ import write

    url = _db(tmp_path, how)
    out = tmp_path / ("r.html" if fmt == "html" else "r.md")
    assert write("smoke", url, out, fmt)[0] == out
    text = out.read_text(encoding="utf-8")
    assert "smoke" in text
    if fmt == "markdown" and how == "empty":
        assert "*no runs yet." in text  # not "0 runs: ."


def test_the_report_command_renders_a_sweep_with_no_run(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The same through the CLI and its child process, once."""
    url = _db(tmp_path, "empty")
    out = tmp_path / "r.md"
    code = main(["report", "smoke", "--db", url, "--out", str(out), "--format", "markdown"])
    cap = capsys.readouterr()
    assert code == 0, cap.err
    assert "*no runs yet." in out.read_text(encoding="utf-8")


def test_runs_without_provenance_are_other_code(tmp_path: Path) -> None:
    url = _db(tmp_path, "summaries")
    db = results_db.open(url)
    ids = [int(i) for i in db.runs(sweep="smoke", with_config=False, columns=["id"])["id"]]
    assert code_rerun_plan(db, "smoke").take == ids
    plan = make_plan(SMOKE)
    plan = dataclasses.replace(plan, spec=plan.spec.model_copy(
        update={"cached_by": "config_and_code"}))
    res = requeue_other_code(db, plan, register(db, plan, force=False), tmp_path / "runs",
                             print)
    assert sorted(r.id for r in res.to_run) == ids and not res.cached
    assert set(db.runs(sweep="smoke")["status"].to_list()) == {"pending"}


def test_export_to_a_fifo_names_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``export --out FIFO`` said "is a file"; it names what is there."""
    import os

    url = _db(tmp_path, "summaries")
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    assert main(["export", "--db", url, "--out", str(fifo)]) == 2
    assert f"--out {fifo}: is a FIFO; expected a directory" in capsys.readouterr().err
