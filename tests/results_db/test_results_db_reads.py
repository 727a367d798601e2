"""results_db reads: leaderboard/ablation numbers on hand-built runs, views, downsampling,
and the read-only query connection."""

from __future__ import annotations

import math
import statistics

import polars as pl
import pytest

import results_db
from results_db import NewRun, ReadOnlyQueryError
from tests.support.synth import add_finished_run, gate_config

G1 = [{"position": "G1"}]
G1_HEAD = [{"position": "G1", "granularity": "headwise"}]
# variant -> (gates, val/ppl per seed)
PPL = {"baseline": ([], [20.0, 21.0, 22.0]),
       "sdpa_elementwise": (G1, [18.0, 18.5, 19.0]),
       "sdpa_headwise": (G1_HEAD, [19.0, 19.4])}


@pytest.fixture
def db(db_url: str):
    with results_db.open(db_url) as d:
        yield d


def _fill(db, sweep: str = "tbl", baseline_name: str = "baseline") -> int:
    sid = db.ensure_sweep(sweep)
    for variant, (gates, ppls) in PPL.items():
        name = baseline_name if variant == "baseline" else variant
        for seed, ppl in enumerate(ppls):
            add_finished_run(db, sid, name, seed,
                             gate_config(gates, seed=seed),
                             summaries={"val/ppl": ppl, "val/loss": math.log(ppl),
                                        "probe/max_activation": 100.0 * (seed + 1)})
    # a diverged seed of the headwise gate and a failed baseline seed: never averaged
    add_finished_run(db, sid, "sdpa_headwise", 9,
                     gate_config(G1_HEAD, seed=9), status="diverged",
                     summaries={"val/ppl": float("nan"), "stability/diverged": 1.0})
    add_finished_run(db, sid, baseline_name, 9, gate_config(seed=9),
                     status="failed", summaries={"val/ppl": 1.0})
    return sid


def test_leaderboard_mean_std_n_delta(db) -> None:
    _fill(db)
    lb = db.leaderboard("tbl")
    assert lb["variant"].to_list() == ["sdpa_elementwise", "sdpa_headwise", "baseline"]
    assert lb["rank"].to_list() == [1, 2, 3]
    rows = {r["variant"]: r for r in lb.iter_rows(named=True)}
    for variant, (_, ppls) in PPL.items():
        r = rows[variant]
        assert r["n"] == len(ppls)
        assert r["mean"] == pytest.approx(statistics.mean(ppls))
        assert r["std"] == pytest.approx(statistics.stdev(ppls))
        assert r["delta"] == pytest.approx(statistics.mean(ppls) - 21.0)
    assert rows["sdpa_elementwise"]["delta_pct"] == pytest.approx(100 * (18.5 - 21) / 21)
    assert rows["sdpa_headwise"]["n_diverged"] == 1 and rows["baseline"]["n_diverged"] == 0
    assert rows["baseline"]["is_baseline"] and rows["baseline"]["delta"] == 0
    assert rows["sdpa_headwise"]["gate_granularity"] == "headwise"
    # descending ranks the other way
    assert db.leaderboard("tbl", ascending=False)["variant"].to_list()[0] == "baseline"


def test_leaderboard_baseline_is_the_ungated_variant_when_none_is_named(db) -> None:
    _fill(db, baseline_name="plain")
    rows = {r["variant"]: r for r in db.leaderboard("tbl").iter_rows(named=True)}
    assert rows["plain"]["is_baseline"] and rows["sdpa_elementwise"]["baseline"] == "plain"
    assert rows["sdpa_elementwise"]["delta"] == pytest.approx(18.5 - 21.0)


def test_leaderboard_view_agrees(db) -> None:
    _fill(db)
    v = db.query("SELECT variant, n, mean_val_ppl, std_val_ppl, n_diverged FROM leaderboard "
                 "WHERE sweep = 'tbl' ORDER BY mean_val_ppl")
    assert v["variant"].to_list() == ["sdpa_elementwise", "sdpa_headwise", "baseline"]
    assert v["n"].to_list() == [3, 2, 3]
    assert v["std_val_ppl"].to_list() == pytest.approx([0.5, statistics.stdev([19.0, 19.4]),
                                                        1.0])
    assert v["n_diverged"].to_list() == [0, 1, 0]
    rs = db.query("SELECT name, val_ppl, val_loss, gate_position FROM run_summary "
                  "WHERE name = 'sdpa_elementwise-s1'")
    assert rs.row(0) == ("sdpa_elementwise-s1", 18.5, pytest.approx(math.log(18.5)), "G1")


def test_ablation_table(db) -> None:
    _fill(db)
    t = db.ablation_table("tbl", metrics=("val/ppl", "probe/max_activation"))
    assert t["variant"].to_list()[0] == "baseline"  # the baseline row first
    rows = {r["variant"]: r for r in t.iter_rows(named=True)}
    el = rows["sdpa_elementwise"]
    assert el["val/ppl:mean"] == pytest.approx(18.5) and el["val/ppl:std"] == pytest.approx(0.5)
    assert el["val/ppl:delta"] == pytest.approx(-2.5)
    assert el["val/ppl:text"] == "18.5 ± 0.5"
    assert el["probe/max_activation:mean"] == pytest.approx(200.0)
    assert (el["gate_position"], el["gate_granularity"], el["n"]) == ("G1", "elementwise", 3)
    assert rows["sdpa_headwise"]["n_diverged"] == 1
    assert "max_stable_lr" not in t.columns  # no LR axis in this sweep


def test_metrics_downsampling_keeps_spike_and_nan(db) -> None:
    sid = db.ensure_sweep("curves")
    pts = [(s, "train/loss", 3.0 - s * 1e-4) for s in range(10_000)]
    pts[6123] = (6123, "train/loss", 50.0)  # one loss spike
    pts[9000] = (9000, "train/loss", float("nan"))  # a NaN step
    rid = add_finished_run(db, sid, "baseline", points=pts +
                           [(s, "train/lr", 1e-3) for s in range(10)])
    m = db.metrics([rid], ["train/loss"], max_points=200)
    assert 50 < m.height <= 200
    steps = m["step"].to_list()
    assert steps == sorted(steps) and steps[-1] == 9999  # the last point is kept
    assert 6123 in steps and max(v for v in m["value"].to_list() if v is not None) == 50.0
    assert 9000 in steps and m.filter(m["step"] == 9000)["value"].to_list() == [None]
    assert min(v for v in m["value"].to_list() if v is not None) == pytest.approx(3.0 - 9999e-4)
    # a short series comes back whole
    assert db.metrics([rid], ["train/lr"], max_points=200).height == 10
    assert db.metrics([rid]).height == 10_010
    with pytest.raises(ValueError, match="max_points must be >= 4"):
        db.metrics([rid], max_points=2)


@pytest.mark.parametrize("sql", [
    "INSERT INTO sweeps (name, spec, description, created) VALUES ('x', '', '', '2026-01-01')",
    "DELETE FROM runs", "DROP TABLE metrics", "UPDATE runs SET status = 'succeeded'",
    "CREATE TABLE evil (x INT)"])
def test_query_is_read_only(db, sql: str) -> None:
    sid = db.ensure_sweep("tbl")
    add_finished_run(db, sid, "baseline", summaries={"val/ppl": 3.0})
    n_runs = db.query("SELECT COUNT(*) AS n FROM runs")["n"][0]
    with pytest.raises(ReadOnlyQueryError, match="read-only"):
        db.query(sql)
    assert db.query("SELECT COUNT(*) AS n FROM runs")["n"][0] == n_runs
    assert db.sweeps().height == 1


def test_query_sqlite_cannot_escape_read_only(sqlite_url: str, tmp_path) -> None:
    with results_db.open(sqlite_url) as db:
        for sql in ("PRAGMA query_only = 0", f"ATTACH '{tmp_path / 'x.db'}' AS x"):
            with pytest.raises(ReadOnlyQueryError):
                db.query(sql)
        assert not (tmp_path / "x.db").exists()
        with pytest.raises(ValueError, match="rejected the SQL"):
            db.query("SELECT nope FROM runs")


def test_query_postgres_cannot_escape_read_only(pg_url: str) -> None:
    with results_db.open(pg_url) as db:
        db.ensure_sweep("keep")
        # several statements in one call (COMMIT then write) are refused outright
        for sql in ("SET default_transaction_read_only = off; COMMIT; DELETE FROM sweeps",
                    "COMMIT; BEGIN READ WRITE; DELETE FROM sweeps; COMMIT"):
            with pytest.raises(ValueError, match="multiple commands"):
                db.query(sql)
        # a session SET does not outlive its (rolled back) call
        with pytest.raises(ValueError, match="returned no rows"):
            db.query("SET default_transaction_read_only = off")
        for _ in range(3):  # whichever pooled connection serves the next call
            with pytest.raises(ReadOnlyQueryError):
                db.query("DELETE FROM sweeps")
        assert db.sweeps()["name"].to_list() == ["keep"]
        assert db.query("SELECT 'a%' LIKE 'a%' AS ok")["ok"].to_list() == [True]


def test_runs_without_config_and_with_chosen_columns(db) -> None:
    _fill(db)
    full = db.runs(sweep="tbl")
    lean = db.runs(sweep="tbl", with_config=False)
    assert "config" in full.columns and "config" not in lean.columns
    assert lean.columns == [c for c in full.columns if c != "config"]
    assert lean.equals(full.drop("config"))
    some = db.runs(sweep="tbl", status="succeeded", with_config=False,
                   columns=["id", "variant", "gate_input_dependent"],
                   variant="sdpa_headwise")
    assert some.columns == ["id", "variant", "gate_input_dependent", "sweep"]
    assert some["variant"].to_list() == ["sdpa_headwise"] * 2
    assert some.schema["gate_input_dependent"] == pl.Boolean  # typed, not SQLite's 0/1
    with pytest.raises(ValueError, match="unknown column.*'colour'"):
        db.runs(columns=["id", "colour"])


def test_leaderboard_view_is_raw(db) -> None:
    """The SQL view has per-group aggregates only; baseline/delta/verdict live in
    results_db/analysis (one owner of what a result means)."""
    _fill(db)
    cols = set(db.query("SELECT * FROM leaderboard").columns)
    assert not cols & {"baseline", "is_baseline", "delta", "delta_pct", "rank", "verdict",
                       "ci_low", "ci_high"}


def test_summary_names_curves_and_tokens_per_step(db) -> None:
    from contract.config import RunSpec

    _fill(db)
    assert db.summary_names("tbl") == ["probe/max_activation", "stability/diverged",
                                       "val/loss", "val/ppl"]
    assert db.summary_names("nope") == []
    sid = db.ensure_sweep("tok")
    spec = RunSpec(name="r", sweep="tok", model={"preset": "tiny", "gates": []},
                   train={"batch_size": 4, "grad_accum": 2, "seq_len": 32})
    rid = add_finished_run(db, sid, "baseline", 0, spec.model_dump(mode="json"),
                           points=[(s, "train/loss", 3.0 - s / 100) for s in range(50)])
    # a config that is not a whole RunSpec (an older or hand-written DB): registered by hand,
    # as no sweep file can produce it
    db.register_runs(sid, [NewRun(name="partial", fingerprint="tok:partial", variant="baseline",
                                  seed=1, config=gate_config(seed=1))])
    assert db.tokens_per_step("tok") == {rid: 4 * 2 * 32}
    curve = db.curves([rid], ["train/loss"], max_points=8)
    assert 0 < curve.height <= 8 + 4 and curve["step"].is_sorted()
    assert db.curves([rid], ["train/loss"])["step"].to_list() == list(range(50))


def test_row_counts_and_views_through_the_api(db) -> None:
    """What benchmarks count and time without SQL text of their own."""
    assert db.row_counts()["runs"] == 0
    _fill(db)
    counts = db.row_counts()
    # 8 seeds + the diverged headwise seed + the failed baseline seed
    assert (counts["sweeps"], counts["runs"]) == (1, 10)
    assert counts["summaries"] == 8 * 3 + 1 + 1 + 1  # 3 each; diverged: 2; failed: 1
    view = db.view("leaderboard")
    assert view.equals(db.query("SELECT * FROM leaderboard"))
    assert db.view("run_summary").height == 10
    with pytest.raises(ValueError, match="unknown view 'runs'"):
        db.view("runs")
