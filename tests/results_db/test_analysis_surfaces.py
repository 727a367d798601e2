"""One function decides the baseline, and every surface shows the same
baseline, deltas and verdicts -- the API, the CLI (`orchestrator leaderboard --format json`),
the dashboard's data layer and benchmarks/reproduction_table.py, on one DB holding the hard
cases (no variant called `baseline`, SwitchHead / more-kv-heads variants declared first,
an LR axis)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

import results_db
from tests.support.synth import add_finished_run, gate_config

G1 = [{"position": "G1"}]
# declared in this order; 'plain' is the baseline by the rule (no variant is named baseline)
VARIANTS = (("switch_v", dict(switch_head={"targets": "v", "n_experts": 2}), 0.0),
            ("kv_heads_x2", dict(n_kv_head=2), -0.02),
            ("sdpa_elementwise", dict(gates=G1), -0.05),
            ("plain", {}, 0.0))
LRS = (1e-3, 3e-3)


@pytest.fixture(scope="module")
def url(tmp_path_factory: pytest.TempPathFactory) -> str:
    url = f"sqlite:///{tmp_path_factory.mktemp('surfaces') / 'r.db'}"
    with results_db.open(url) as db:
        sid = db.ensure_sweep("issue10")
        for name, model, effect in VARIANTS:
            for lr in LRS:
                for seed in (0, 1, 2):
                    ppl = 10.0 * (1 + effect) * (1 + 0.01 * seed) * (1 if lr == 1e-3 else 0.9)
                    cfg = gate_config(model.get("gates"), lr=lr, seed=seed,
                                      **{k: v for k, v in model.items() if k != "gates"})
                    add_finished_run(db, sid, name, seed, cfg,
                                     summaries={"val/ppl": ppl, "val/loss": math.log(ppl)})
    return url


def _key(row: dict) -> tuple[str, float]:
    return row["variant"], round(float(row["lr"]), 12)


def _api(url: str) -> dict[tuple[str, float], dict]:
    with results_db.open(url, readonly=True) as db:
        assert db.baseline("issue10") == "plain"
        return {_key(r): r for r in db.leaderboard("issue10").iter_rows(named=True)}


def test_api_baseline_and_same_lr_deltas(url: str) -> None:
    api = _api(url)
    assert {k for k, r in api.items() if r["is_baseline"]} == {("plain", lr) for lr in LRS}
    for lr in LRS:  # per-seed factors cancel in the paired delta: exactly the effect
        row = api["sdpa_elementwise", lr]
        assert row["ci_method"] == "paired" and row["verdict"] == "better"
        base = 10.0 * (1 if lr == 1e-3 else 0.9) * 1.01
        assert row["delta"] == pytest.approx(-0.05 * base)
    assert api["switch_v", 1e-3]["verdict"] == "within noise"


def test_cli_shows_the_api_numbers(url: str, capsys: pytest.CaptureFixture[str]) -> None:
    from orchestrator.cli.main import main

    code = main(["leaderboard", "issue10", "--db", url, "--format", "json"])
    doc = json.loads(capsys.readouterr().out)
    assert code == 0
    api = _api(url)
    with results_db.open(url, readonly=True) as db:
        assert doc["summary"].startswith(db.findings("issue10").text())
    cli = {_key(r): r for r in doc["rows"]}
    assert set(cli) == set(api)
    for k, r in api.items():
        for col in ("is_baseline", "verdict", "ci_method", "rank", "n"):
            assert cli[k][col] == r[col], (k, col)
        for col in ("delta", "ci_low", "ci_high"):
            assert (cli[k][col] is None) == (r[col] is None)
            if r[col] is not None:
                assert cli[k][col] == pytest.approx(r[col])


def test_dashboard_data_shows_the_api_numbers(url: str) -> None:
    from dashboard import data

    board = data.leaderboard(url, "issue10", "val/ppl", True, ("succeeded",))
    api = _api(url)
    assert data.baseline(url, "issue10") == "plain"
    for r in board.iter_rows(named=True):
        a = api[_key(r)]
        assert (r["verdict"], r["is_baseline"]) == (a["verdict"], a["is_baseline"])
        assert (r["delta"] is None and a["delta"] is None) or \
            r["delta"] == pytest.approx(a["delta"])


def test_reproduction_table_shows_the_api_verdicts(url: str) -> None:
    import importlib.util

    path = Path(__file__).resolve().parents[2] / "benchmarks/reproduction_table.py"
    spec = importlib.util.spec_from_file_location("reproduction_table", path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    md = mod.render(url, "issue10")
    assert "baseline `plain`" in md
    for (variant, lr), r in _api(url).items():
        label = f"{variant} @ lr={'1e-3' if lr == 1e-3 else '3e-3'}"
        line = next(ln for ln in md.splitlines() if ln.startswith(f"| {label} |"))
        assert f"| {r['verdict']} |" in line, (label, line)
