"""THE identity rule of a run: one canonical document, and everything derived from it.

``canonical_doc(config)`` is the config (the JSON of a RunSpec) minus what does not change the
result: ``name`` (a label) and the scheduling-only ``resources.cpus``/``gpus``.
``resources.workers`` stays: it multiplies the global batch (RunSpec.tokens_per_step).
- ``fingerprint``: the sha256 of the whole canonical document -> which run this is (a run
  belongs to exactly one sweep, so ``sweep`` is in it).
- ``group_keys``: the same document minus ``seed`` and ``sweep`` -> which runs are seed
  replicates of one configuration (``group_key``), and minus ``train.lr``/``train.min_lr`` too
  -> which runs form one learning-rate ladder (``lr_group_key``; ``min_lr`` goes because an LR
  axis that scales it with ``lr`` is still one ladder).
Both sides read the same document, so two runs the fingerprint tells apart by anything but
seed, sweep or LR are never pooled as seeds of one group (they used to be when only
``resources.workers`` differed).

A field a RunSpec no longer has (``RETIRED``) is put back into the document at the one value
every stored run had, so the fingerprints of older runs -- in the DB and in their checkpoints'
markers -- stay what they were: their cache hits and resumes keep working.

A field added to the RunSpec after runs were stored (``ADDED``) changes no stored fingerprint:
at the value every older run had (which is what its absence means) it stays out of the document,
so only a run at another value -- a new default -- gets a new fingerprint and is never
deduplicated with, or pooled as seeds beside, the older runs. ``with_added`` fills the field into
a stored config so that it validates to what was run, not to today's default.

Configs may be partial (hand-built in tests, older specs): every field is optional here, an
absent ``resources.workers`` is ``DEFAULT_WORKERS`` (owned here, the default of
contract.config.Resources). No import of contract.config: RunSpec.fingerprint calls this.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

# Identity columns the seed-group keys leave out, beside the learning rate of lr_group_key.
REPLICATE_KEYS = ("seed", "sweep")
LR_KEYS = ("lr", "min_lr")  # under train
DEFAULT_WORKERS = 1  # data-parallel workers of a run (contract.config.Resources.workers)
# block -> {field: the value every run had}. train.fail_at_step was a test-only fault hook in
# the RunSpec; tests inject faults from outside now (tests/support/stepfault.py), and
# migration 0005 took the field out of the stored configs.
RETIRED: dict[str, dict[str, Any]] = {"train": {"fail_at_step": None}}
# block -> {field: the value every run stored before the field existed}. model.init: before
# paired initialisation every run drew its weights from the global RNG in module order;
# model.nsa: every run before it had dense attention.
ADDED: dict[str, dict[str, Any]] = {"model": {"init": "legacy", "nsa": None}}


def with_added(config: Mapping[str, Any]) -> dict[str, Any]:
    """A stored config with each absent ADDED field at its pre-field value (a copy)."""
    doc = dict(config)
    for block, fields in ADDED.items():
        if isinstance(doc.get(block), Mapping):
            doc[block] = {**fields, **doc[block]}
    return doc


def canonical_doc(config: Mapping[str, Any]) -> dict[str, Any]:
    """The config minus ``name``, the scheduling-only resources and each ADDED field at its
    pre-field value, plus the RETIRED fields (a deep copy)."""
    doc: dict[str, Any] = json.loads(json.dumps(dict(config), default=str))
    doc.pop("name", None)
    resources = doc.get("resources")
    given = resources if isinstance(resources, dict) else {}
    doc["resources"] = {"workers": given.get("workers", DEFAULT_WORKERS)}
    for block, fields in RETIRED.items():
        if isinstance(doc.get(block), dict):
            for key, value in fields.items():
                doc[block].setdefault(key, value)
    for block, fields in ADDED.items():
        if isinstance(doc.get(block), dict):
            for key, value in fields.items():
                if doc[block].get(key, value) == value:
                    doc[block].pop(key, None)
    return doc


def digest(doc: Mapping[str, Any]) -> str:
    """sha256 of the canonical JSON of ``doc`` (sorted keys, no spaces)."""
    canonical = json.dumps(doc, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()


def fingerprint(config: Mapping[str, Any]) -> str:
    """What determines the result of a run (RunSpec.fingerprint)."""
    return digest(canonical_doc(config))


def group_keys(config: Mapping[str, Any]) -> tuple[str, str]:
    """(group_key, lr_group_key), 16 hex digits each: see the module docstring."""
    doc = canonical_doc(config)
    for k in REPLICATE_KEYS:
        doc.pop(k, None)
    group = digest(doc)[:16]
    train = doc.get("train")
    if isinstance(train, dict):
        for k in LR_KEYS:
            train.pop(k, None)
    return group, digest(doc)[:16]
