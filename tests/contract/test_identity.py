"""The one identity rule (contract/identity.py): fingerprint and seed-group keys come from one
canonical document, so what tells two runs apart also keeps them out of one seed group."""

from __future__ import annotations

from typing import Any

from contract import identity
from contract.config import RunSpec


def _spec(**kw: Any) -> RunSpec:
    doc: dict[str, Any] = {"name": "a", "sweep": "s", "model": {"preset": "tiny"},
                           "train": {"lr": 3e-3, "steps": 10, "warmup": 1}}
    for key, value in kw.items():
        section, field = key.split("__")
        doc[section] = {**doc.get(section, {}), field: value}
    return RunSpec.model_validate(doc)


def _keys(spec: RunSpec) -> tuple[str, str]:
    return identity.group_keys(spec.model_dump(mode="json"))


def test_workers_change_fingerprint_and_group_key_alike() -> None:
    one, two = _spec(resources__workers=1), _spec(resources__workers=2)
    assert one.fingerprint() != two.fingerprint()
    # the old group key dropped all of `resources`: these two were pooled as seeds of one group
    assert _keys(one)[0] != _keys(two)[0] and _keys(one)[1] != _keys(two)[1]


def test_scheduling_only_fields_change_neither() -> None:
    a, b = _spec(resources__cpus=1), _spec(resources__cpus=4, resources__gpus=1)
    renamed = a.model_copy(update={"name": "other"})
    assert a.fingerprint() == b.fingerprint() == renamed.fingerprint()
    assert _keys(a) == _keys(b) == _keys(renamed)


def test_seed_and_sweep_split_runs_but_not_groups() -> None:
    a, b = _spec(), _spec().model_copy(update={"seed": 7, "sweep": "t"})
    assert a.fingerprint() != b.fingerprint() and _keys(a) == _keys(b)


def test_lr_splits_groups_but_not_ladders() -> None:
    a, b = _spec(), _spec(train__lr=1e-2, train__min_lr=1e-3)
    assert _keys(a)[0] != _keys(b)[0] and _keys(a)[1] == _keys(b)[1]


def test_every_field_that_changes_the_fingerprint_splits_the_group() -> None:
    """Over a handful of result-changing edits: fingerprint differs <=> group_key differs."""
    base = _spec()
    edits = [_spec(train__steps=20), _spec(train__batch_size=4), _spec(data__val_fraction=0.1),
             _spec(model__qk_norm=True), _spec(resources__workers=3)]
    for other in edits:
        assert other.fingerprint() != base.fingerprint()
        assert _keys(other)[0] != _keys(base)[0], other.model_dump(exclude_defaults=True)


def test_partial_configs_default_workers_like_the_spec() -> None:
    """A hand-built config without resources is keyed as the RunSpec default (1 worker)."""
    doc = _spec().model_dump(mode="json")
    partial = {k: v for k, v in doc.items() if k != "resources"}
    assert identity.group_keys(partial) == identity.group_keys(doc)
    assert identity.fingerprint(partial) == _spec().fingerprint()


def _stored_before_init(spec: RunSpec) -> dict[str, Any]:
    """The config as runs stored before model.init existed: the same dump without the field."""
    doc = spec.model_dump(mode="json")
    doc["model"] = {k: v for k, v in doc["model"].items() if k != "init"}
    return doc


# sha256 of the stored config of _spec() as registered before model.init existed (commit
# 61e6176): a stored run's fingerprint, and its checkpoints' markers, must not move.
OLD_FINGERPRINT = "1997bd4d2cc0c31dda73c4338b1ea3bec349aa0c68798b309db484f3697836c7"


def test_stored_configs_without_the_init_scheme_keep_their_fingerprint() -> None:
    old = _stored_before_init(_spec())
    assert identity.fingerprint(old) == OLD_FINGERPRINT
    legacy = _spec(model__init="legacy")
    # the stored config reads as the legacy run it was, and an explicit legacy run is that run
    assert RunSpec.from_stored(old) == legacy
    assert legacy.fingerprint() == identity.fingerprint(old) == RunSpec.from_stored(
        old).fingerprint()
    assert identity.group_keys(old) == _keys(legacy)


def test_the_paired_default_is_a_new_run_and_a_new_group() -> None:
    paired, legacy = _spec(), _spec(model__init="legacy")
    assert paired.model.init == "paired"
    assert paired.fingerprint() != legacy.fingerprint()
    assert _keys(paired)[0] != _keys(legacy)[0] and _keys(paired)[1] != _keys(legacy)[1]
    # a fresh dump keeps its explicit scheme when read back as a stored config
    assert RunSpec.from_stored(paired.model_dump(mode="json")) == paired
