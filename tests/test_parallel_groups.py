"""How `make test` deals tests to its xdist workers (tests/conftest.py): one group per module,
the fault matrix split in two, long modules first, and the group visible in the node id that
xdist's loadgroup scheduler reads (pytest 9 keeps node ids in ``item._id``)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from tests import conftest

FAULTS = "tests/e2e/test_cluster_faults.py"


class _Item:
    def __init__(self, nodeid: str) -> None:
        self.nodeid, self.groups = nodeid, []

    def add_marker(self, mark: pytest.MarkDecorator) -> None:
        self.groups.append(mark.args[0])


def _deal(ids: list[str], worker: bool = True) -> list[_Item]:
    items = [_Item(i) for i in ids]
    cfg = SimpleNamespace(workerinput={}) if worker else SimpleNamespace()
    cfg.getvalue = lambda name: False  # type: ignore[attr-defined]  # not loadgroup: no _id
    conftest.pytest_collection_modifyitems(cfg, items)  # type: ignore[arg-type]
    return items


def test_modules_are_groups_the_fault_matrix_is_two_and_long_modules_go_first() -> None:
    items = _deal(["tests/contract/test_params.py::a", "tests/trainer/test_train.py::a",
                   f"{FAULTS}::k[sqlite]", f"{FAULTS}::k[postgres]", f"{FAULTS}::n",
                   "tests/trainer/test_train.py::b"])
    assert [(i.nodeid, i.groups) for i in items] == [
        (f"{FAULTS}::k[sqlite]", [f"{FAULTS}#0"]), (f"{FAULTS}::n", [f"{FAULTS}#0"]),
        (f"{FAULTS}::k[postgres]", [f"{FAULTS}#1"]),
        ("tests/trainer/test_train.py::a", ["tests/trainer/test_train.py"]),
        ("tests/trainer/test_train.py::b", ["tests/trainer/test_train.py"]),
        ("tests/contract/test_params.py::a", ["tests/contract/test_params.py"])]


def test_outside_a_worker_nothing_is_reordered_or_marked() -> None:
    ids = ["tests/contract/test_params.py::a", f"{FAULTS}::k"]
    assert [(i.nodeid, i.groups) for i in _deal(ids, worker=False)] == [(n, []) for n in ids]


class _Node:
    """pytest 9's Item as far as node ids go: ``nodeid`` is ``str(self._id)``."""

    def __init__(self, node_id: object) -> None:
        self._id = node_id

    @property
    def nodeid(self) -> str:
        return str(self._id)


def test_the_group_reaches_the_node_id_xdist_schedules_by() -> None:
    nodeid = pytest.importorskip("_pytest.nodeid", reason="pytest < 9: xdist suffixes itself")
    item = _Node(nodeid.NodeId.parse("tests/x.py::t[a]"))
    loadgroup = SimpleNamespace(getvalue=lambda name: name == "loadgroup")
    conftest._suffix_group(item, "tests/x.py", loadgroup)  # type: ignore[arg-type]
    assert item.nodeid == "tests/x.py::t[a]@tests/x.py"  # xdist's scheduler splits at "@"
    plain = _Node(nodeid.NodeId.parse("tests/x.py::t"))
    conftest._suffix_group(plain, "tests/x.py", SimpleNamespace(getvalue=lambda name: False))
    assert plain.nodeid == "tests/x.py::t"  # not --dist loadgroup: ids untouched
