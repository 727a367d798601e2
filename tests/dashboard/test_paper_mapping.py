"""The paper row -> variant mapping (dashboard/paper.py PAPER_ROWS) against the shipped sweeps.

Every shipped YAML under sweeps/ is expanded with the orchestrator's own loader and each run's
dimension columns derived exactly as results_db stores them, so the dashboard's
``paper.match(variant, dims)`` is asked what it will be asked for real runs. Checks:
- every row of Tables 1, 2, 3, 4 and 6 is claimed by at least one variant of a shipped sweep;
- every claim agrees with the variant's config (the row's gate site, activation, score shape,
  sandwich norm, Switch-Head targets/E/k), and a variant's rows in one table are one method;
- within a sweep no two variants claim the same row;
- every variant of a paper-scale sweep (sweeps/paper/) claims a row, and only rows of the
  tables of its model family (the 15A2B MoE: 1, 3, 4, 6; the dense 1.7B: 2).
No model is built: expansion and dims only (the CLI test counts parameters on meta).
"""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from contract.config import RunSpec
from dashboard import paper
from dashboard.labels import activation_label, normalize_dims, score_shape
from orchestrator.cli.main import main
from orchestrator.run.driver.submit import make_plan
from results_db.schema.dims import derive_dims

ROOT = Path(__file__).resolve().parents[2]
SWEEPS = ROOT / "sweeps"
SHIPPED = sorted(SWEEPS.rglob("*.yaml"))
TABLES = ("table1", "table2", "table3", "table4", "table6")
SITES = {"SDPA": "G1", "v": "G2", "k": "G3", "q": "G4", "Dense Output": "G5"}
# Paper-scale variants with no paper row, each with the reason (none today).
EXTRAS: dict[str, str] = {}


@dataclass(frozen=True)
class Claim:
    sweep: str  # the YAML, relative to sweeps/
    variant: str
    spec: RunSpec
    dims: dict[str, Any]
    rows: dict[str, tuple[str, ...]]  # table -> row keys ("#" or Method)


def _row_key(row: dict[str, str]) -> str:
    return row.get("#") or row["Method"]


@pytest.fixture(scope="module")
def claims() -> list[Claim]:
    """One Claim per (sweep, variant, model config): an LR axis gives one claim, a model
    axis (e.g. gate.position) one per model."""
    out: list[Claim] = []
    for path in SHIPPED:
        seen: set[tuple[str, str]] = set()
        for run in make_plan(path).runs:
            key = (run.variant, run.spec.model.model_dump_json())
            if key in seen:
                continue
            seen.add(key)
            dims = derive_dims(run.spec.model_dump(mode="json"))
            entry = paper.match(run.variant, dims)
            out.append(Claim(str(path.relative_to(SWEEPS)), run.variant, run.spec, dims,
                             dict(entry.rows) if entry else {}))
    return out


def test_every_shipped_sweep_is_expanded(claims: list[Claim]) -> None:
    names = {c.sweep for c in claims}
    for wanted in ("baselines.yaml", "gates.yaml", "paper/moe_15a2b.yaml",
                   "paper/dense_1p7b.yaml", "paper/switch_heads.yaml"):
        assert wanted in names, f"sweeps/{wanted} is not shipped or did not expand"


@pytest.mark.parametrize("table", TABLES)
def test_every_paper_row_is_a_variant_of_a_shipped_sweep(claims: list[Claim],
                                                          table: str) -> None:
    claimed: dict[str, list[str]] = defaultdict(list)
    for c in claims:
        for key in c.rows.get(table, ()):
            claimed[key].append(f"{c.sweep}:{c.variant}")
    missing = [f"{_row_key(r)} ({r['Method']})" for r in paper.load_table(table)
               if _row_key(r) not in claimed]
    assert not missing, f"{table}: rows without a variant in any shipped sweep: {missing}"


def test_both_scales_cover_the_issue7_rows(claims: list[Claim]) -> None:
    """The CPU-scale sweeps reproduce sandwich norm (Table 2 row 7) and all of Table 6 too."""
    cpu = {k for c in claims if not c.sweep.startswith("paper/")
           for k in c.rows.get("table6", ())}
    assert cpu == {_row_key(r) for r in paper.load_table("table6")}
    assert any("7" in c.rows.get("table2", ()) for c in claims
               if not c.sweep.startswith("paper/"))


def _gate_row_agrees(claim: Claim, method: str, act: str, shape: str | None) -> None:
    """A Table 1/3/4 row against the variant: gate site, activation, score shape."""
    d = normalize_dims(claim.dims)
    where = f"{claim.sweep}:{claim.variant} vs {method!r}"
    if "Baseline" in method or "=" in method or "Experts" in method:  # T1 rows 1-4
        assert not d["gate_position"] and d["nonlinearity"] == "none", where
        return
    site = next(s for s in sorted(SITES, key=len, reverse=True) if method.startswith(s))
    if d["gate_position"]:
        assert d["gate_position"] == SITES[site], where
        assert ("Headwise" in method) == (d["gate_granularity"] == "headwise"), where
        assert ("Head-" in method or "head-" in method) == \
            (d["gate_sharing"] == "head_shared"), where
        assert ("Additive" in method) == (d["gate_combine"] == "additive"), where
        assert ("Input-Independent" in method) == (not d["gate_input_dependent"]), where
    else:  # Table 3's non-linearity-only controls sit at the SDPA output
        assert site == "SDPA" and d["nonlinearity"] != "none", where
    assert activation_label(claim.dims).lower() == act.lower(), where
    if shape is not None:
        assert score_shape(claim.dims) == shape, where


_SWITCH = re.compile(r"Switch (kv|v), (\d+)top(\d+)")


def _dense_or_switch_row_agrees(claim: Claim, table: str, method: str) -> None:
    """Table 2 / Table 6 rows against the variant: gate, sandwich norm, Switch-Head."""
    m = claim.spec.model
    where = f"{claim.sweep}:{claim.variant} vs {table} {method!r}"
    assert (m.norm_style == "sandwich") == ("Sandwich" in method), where
    assert m.clip_residual is None, where  # clipping has no paper row
    sw = _SWITCH.fullmatch(method)
    if sw:
        assert not m.gates and m.switch_head is not None, where
        assert (m.switch_head.targets, m.switch_head.n_experts, m.switch_head.top_k) == \
            (sw[1], int(sw[2]), int(sw[3])), where
        return
    assert m.switch_head is None, where
    if method.startswith("SDPA"):
        assert len(m.gates) == 1 and m.gates[0].position == "G1", where
        granularity = "headwise" if "Headwise" in method else "elementwise"
        assert m.gates[0].granularity == granularity, where
    else:
        assert method.startswith("Baseline") and not m.gates and m.nonlinearity == "none", where


def test_every_claim_agrees_with_the_variants_config(claims: list[Claim]) -> None:
    for c in claims:
        for table, keys in c.rows.items():
            rows = [r for r in paper.load_table(table) if _row_key(r) in keys]
            assert len(rows) == len(keys), (c.variant, table, keys)
            methods = {r["Method"] for r in rows}
            # several rows of one table (Table 2: settings / LRs) must be one method
            assert len(methods) == 1, f"{c.sweep}:{c.variant} claims {table} rows {methods}"
            row = rows[0]
            if table in ("table2", "table6"):
                _dense_or_switch_row_agrees(c, table, row["Method"])
            else:
                act = row.get("Act") or row["Activation"]
                _gate_row_agrees(c, row["Method"], act, row.get("Score shape"))
                m = c.spec.model
                assert m.switch_head is None and m.norm_style == "pre", c.variant


def test_no_two_variants_of_a_sweep_claim_one_row(claims: list[Claim]) -> None:
    owner: dict[tuple[str, str, str], str] = {}
    for c in claims:
        for table, keys in c.rows.items():
            for key in keys:
                other = owner.setdefault((c.sweep, table, key), c.variant)
                assert other == c.variant, \
                    f"{c.sweep}: {other!r} and {c.variant!r} both claim {table} row {key!r}"


def test_paper_scale_variants_each_reproduce_rows_of_their_model_family(
        claims: list[Claim]) -> None:
    for c in claims:
        if not c.sweep.startswith("paper/") or c.variant in EXTRAS:
            continue
        assert c.rows, f"{c.sweep}:{c.variant} maps to no paper row (add it to PAPER_ROWS " \
                       "or to EXTRAS with a reason)"
        family = {"table1", "table3", "table4", "table6"} if c.spec.model.moe else {"table2"}
        assert set(c.rows) <= family, f"{c.sweep}:{c.variant} claims {sorted(c.rows)}"
        if "table2" in c.rows:  # the dense study's rows name their LR
            (key,) = c.rows["table2"]
            row = next(r for r in paper.load_table("table2") if r["#"] == key)
            assert c.spec.train.lr == float(row["Max LR"]), c.variant


def test_dashboard_values_for_the_new_baselines() -> None:
    """What the ablation tables print beside ours for the baseline variants."""
    assert paper.paper_max_stable_lr("baseline_sandwich", {}) == pytest.approx(8e-3)
    assert paper.paper_max_stable_lr("sdpa_headwise", {"gate_position": "G1",
                                                      "gate_granularity": "headwise"}) == 4e-3
    assert paper.paper_value("switch_v_8top2", {}, "table6", "PPL") == 5.870
    assert paper.paper_value("t6r02_switch_kv_8top8", {}, "table6", "Added (M)") == 38
    assert paper.paper_max_stable_lr("t2r12_48l_1t_baseline_lr8e3", {}) is None  # diverged
    assert paper.paper_rows("t1r05_sdpa_elementwise", {"gate_position": "G1"}, "table2") == []
    assert paper.match("baseline_clip", {}) is None  # the appendix control: no table row


@pytest.mark.parametrize("path", ["sweeps/baselines.yaml", "sweeps/paper/switch_heads.yaml"])
def test_cli_validates_the_issue7_sweeps(capsys: pytest.CaptureFixture[str], path: str) -> None:
    code = main(["validate", str(ROOT / path), "--no-data"])  # paper data: cluster paths
    out = capsys.readouterr().out
    assert code == 0, out
    runs = {"sweeps/baselines.yaml": 15, "sweeps/paper/switch_heads.yaml": 6}[path]
    assert f"valid, {runs} runs" in out
    assert "switch_v_8top2" in out


# ---- the dashboard's ablation tables for the baseline sweeps (a real SQLite results DB) ----------

def _registered(tmp_path: Path, yaml: str) -> tuple[Any, str]:
    """``yaml`` registered in a fresh DB, every run succeeded with val/ppl = 3 + its index."""
    import results_db
    from orchestrator.run.driver.submit import register

    db = results_db.open(f"sqlite:///{tmp_path / 'r.db'}")
    plan = make_plan(SWEEPS / yaml)
    for i, run in enumerate(register(db, plan, force=False).to_run):
        attempt = db.start_attempt(run.id, host="h")
        db.log_summaries(run.id, attempt.id, {"val/ppl": 3.0 + i, "stability/loss_spikes": 0.0})
        db.finish_attempt(attempt.id, "succeeded")
    return db, plan.spec.name


def _table(db: Any, sweep: str, kind: str) -> dict[str, dict[str, str]]:
    from dashboard import ablation

    names = ablation.metric_names(kind, db.summary_names(sweep))
    msl = db.max_stable_lr(sweep) if kind == "stability" else None
    table = ablation.build(kind, db.ablation_table(sweep, names), names, with_paper=True,
                           max_stable_lr=msl)
    return {r["Variant"]: r for r in table.display.iter_rows(named=True)}


def test_quality_and_stability_tables_show_the_issue7_rows(tmp_path: Path) -> None:
    db, sweep = _registered(tmp_path, "baselines.yaml")
    q = _table(db, sweep, "quality")
    lo = "@ lr=3e-3"
    assert q[f"baseline {lo}"]["Paper PPL (Δ%)"] == "6.026"
    assert q[f"sdpa_headwise {lo}"]["Paper PPL (Δ%)"].startswith("5.792 (")
    # a variant run at one LR carries it too (the sweep has an LR axis)
    sv, skv = q[f"switch_v_8top2 {lo}"], q[f"switch_kv_8top8 {lo}"]
    assert (sv["Method"], sv["Paper PPL (Δ%)"][:5]) == ("Switch v", "5.870")
    assert (skv["Method"], skv["Paper +M"]) == ("Switch kv", "38")
    # sandwich norm is a dense-model row (Table 2): not quoted beside the MoE tables' figures
    assert q[f"baseline_sandwich {lo}"]["Method"] == "Baseline + Sandwich Norm"
    assert q[f"baseline_sandwich {lo}"]["Paper PPL (Δ%)"] == "–"
    assert q[f"baseline_clip {lo}"]["Method"] == "Baseline + Clip ±1"
    s = _table(db, sweep, "stability")
    assert s["baseline_sandwich"]["Paper max LR"] == "8e-3"  # row 7: trains at 8e-3
    assert s["baseline"]["Paper max LR"] == "5.3e-3"  # row 12 diverged at 8e-3
    assert s["sdpa_headwise"]["Paper max LR"] == "4e-3"
    assert s["baseline_clip"]["Paper max LR"] == "–"


def test_dense_paper_sweep_quotes_table2(tmp_path: Path) -> None:
    db, sweep = _registered(tmp_path, "paper/dense_1p7b.yaml")
    q = _table(db, sweep, "quality")
    assert q["t2r07_48l_400b_sandwich_lr8e3 @ lr=8e-3"]["Paper PPL (Δ%)"].startswith("7.407")
    assert q["t2r07_48l_400b_sandwich_lr8e3 @ lr=8e-3"]["Method"] == "Baseline + Sandwich Norm"
    # diverged in the paper
    assert q["t2r12_48l_1t_baseline_lr8e3 @ lr=8e-3"]["Paper PPL (Δ%)"] == "–"
    assert q["t2r09_48l_400b_sdpa_headwise @ lr=4e-3"]["Paper PPL (Δ%)"].startswith("7.370")
