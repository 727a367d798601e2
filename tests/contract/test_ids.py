"""Hostile input: one rule for an integer in typed or linked text (contract/ids.py), ASCII digits
only; str.isdigit() took '²' (int() then raised) and '١٢' (read as 12)."""

from __future__ import annotations

from pathlib import Path

import pytest

from contract.ids import MAX_ID, ascii_int, parse_id
from orchestrator.cli.main import main


@pytest.mark.parametrize(("text", "value"), [
    ("0", 0), ("7", 7), ("007", 7), (str(MAX_ID), MAX_ID), ("²", None), ("١٢", None),
    ("-1", None), ("+1", None), (" 1", None), ("1 ", None), ("1_000", None), ("", None),
    ("1e3", None), ("９", None)])
def test_ascii_digits_only(text: str, value: int | None) -> None:
    assert parse_id(text) == value
    assert ascii_int(text) == (None if value is None else int(text))


def test_ids_beyond_64_bits_and_non_text_are_names() -> None:
    assert parse_id(str(MAX_ID + 1)) is None and ascii_int(str(MAX_ID + 1)) == MAX_ID + 1
    assert parse_id(True) is None and parse_id(3) == 3 and parse_id(-3) is None
    assert parse_id(None) is None and parse_id(2.0) is None


def test_a_sweep_key_with_a_superscript_index_names_the_key(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "s.yaml"
    f.write_text("name: t\nbase:\n  model: {preset: tiny}\nvariants:\n  baseline: {}\n"
                 "  g: {model.gates.²: {position: G1}}\n")
    assert main(["validate", str(f), "--no-data"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "s.yaml:6: variants.g.model.gates.²" in err, err


def test_digits_that_are_one_runs_id_and_another_runs_name_are_ambiguous(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """An all-digit reference was always the id, even when a run carried that name (a DB
    writer can name a run '1'): `cancel 1` then cancelled the other run."""
    import results_db
    from tests.orchestrator.test_hostile_cli import add_run

    url = f"sqlite:///{tmp_path / 'r.db'}"
    db = results_db.open(url)
    first = add_run(db, "s", "a-s0", status="pending")
    named = add_run(db, "s", str(first), status="pending")  # run 2, named "1"
    for argv in (["cancel", str(first)], ["show", str(first)], ["rerun", str(first)]):
        assert main([*argv, "--db", url]) == 2, argv
        err = capsys.readouterr().err
        assert "is ambiguous" in err and f"{named} (s)" in err and err.count("\n") == 1, err
    assert {r: results_db.open(url).run(r).status for r in (first, named)} == \
        {first: "pending", named: "pending"}
    assert main(["cancel", "a-s0", "--db", url]) == 0  # its other reference
    assert main(["cancel", str(named), "--db", url]) == 0  # id 2 is nobody's name
    capsys.readouterr()
    assert results_db.open(url).run(first).status == "cancelled"


def test_digits_read_out_of_db_names_are_ascii_too() -> None:
    """A metric name a DB writer chose: 'layer_١' (Arabic-Indic one) is no layer index."""
    from contract.metrics import LONGCTX_NAME
    from dashboard.charts import layer_index

    assert layer_index("probe/max_activation/layer_3") == 3
    assert layer_index("probe/max_activation/layer_١") is None
    assert LONGCTX_NAME.match("longctx/yarn/٤x/ppl") is None
