"""One vocabulary (results_db/schema/vocab.py): gate defaults read from the RunSpec contract, the
finished states from the state machine, verdict names; contract.config stays torch-free."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from contract.config import GateSpec, ModelConfig
from contract.states import DONE_OK
from results_db.schema import vocab
from results_db.schema.dims import derive_dims


def test_import_trainer_config_does_not_import_torch() -> None:
    code = ("import sys, json; import contract.config, results_db.schema.vocab; "
            "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in "
            "('torch', 'deepspeed', 'ray'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert json.loads(out.stdout) == []


def test_gate_defaults_are_the_runspec_defaults() -> None:
    g = GateSpec()
    assert vocab.GATE_DEFAULTS == {
        "gate_granularity": g.granularity, "gate_sharing": g.sharing,
        "gate_combine": g.combine, "gate_activation": g.activation,
        "gate_input_dependent": g.input_dependent,
        "nonlinearity": ModelConfig.model_fields["nonlinearity"].default}
    assert vocab.DEFAULT_POSITION == g.position
    # a gate given only its position gets exactly these defaults in the runs table
    dims = derive_dims({"model": {"gates": [{"position": "G2"}]}})
    for col, default in vocab.GATE_DEFAULTS.items():
        if col != "nonlinearity":
            assert dims[col] == (default if isinstance(default, bool) else str(default))


def test_finished_states_and_dimensions() -> None:
    assert DONE_OK == {"succeeded", "diverged"}
    assert set(vocab.GATE_DIMENSIONS) < set(vocab.DIMENSIONS) and "lr" in vocab.DIMENSIONS
    assert len(set(vocab.DIMENSIONS)) == len(vocab.DIMENSIONS)


def test_verdict_kind() -> None:
    assert vocab.verdict_kind("needs >= 12 seeds") == "needs >= k seeds"
    assert vocab.verdict_kind("better") == "better" and vocab.verdict_kind(None) is None
    with pytest.raises(ValueError, match="not one of"):
        vocab.verdict_kind("great")


@pytest.mark.parametrize("metric,higher", [("val/ppl", False), ("val/loss", False),
                                           ("bench/hellaswag", True),
                                           ("bench/wikitext/word_perplexity", False),
                                           ("longctx/yarn/2x/retrieval_acc", True),
                                           ("probe/max_activation", False)])
def test_metric_direction(metric: str, higher: bool) -> None:
    assert vocab.higher_is_better(metric) is higher


def test_results_db_exports_the_vocabulary() -> None:
    """Contract: the vocabulary is importable from the package itself."""
    import results_db

    for name in ("DIMENSIONS", "VERDICTS"):
        assert getattr(results_db, name, None) is getattr(vocab, name), \
            f"results_db/__init__.py must re-export results_db.schema.vocab.{name}"
    # the finished states with a result have one name, the contract's
    assert results_db.DONE_OK is DONE_OK
    assert not hasattr(vocab, "FINISHED_STATES")
