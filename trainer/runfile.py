"""Read one RunSpec YAML for ``python -m trainer``: every problem is one ValueError that names
the file, the key and what was expected, found before torch or DeepSpeed start.

What ``orchestrator validate`` checks for a sweep, this checks for one run file: the spec
(contract/config.py), then its data (trainer/datacheck.py, the same function ``validate`` calls).
Sweep files have the orchestrator's own bounded reader; the trainer cannot import it (the
dependencies point orchestrator -> trainer), so the one YAML rule a run file needs beyond
``safe_load`` lives here: a key given twice is an error (PyYAML keeps the last one silently,
so ``eval_every: 0`` then ``eval_every: 100`` would run with 100 and say nothing).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from contract.config import RunSpec
from trainer.datacheck import check

MAX_BYTES = 1 << 20  # a run spec is a few hundred bytes; never read a huge or endless file


class _UniqueKeyLoader(yaml.SafeLoader):
    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: dict[Any, int] = {}
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=True)
            line = key_node.start_mark.line + 1
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    None, None, f"duplicate key {key!r} (first defined on line {seen[key]})",
                    key_node.start_mark)
            seen[key] = line
        return super().construct_mapping(node, deep=deep)


def _read(path: Path) -> Any:
    if not path.is_file():  # also refuses FIFOs and devices, which would block or never end
        raise ValueError(f"{path}: no such run spec file" if not path.exists()
                         else f"{path}: not a regular file")
    with path.open("rb") as fh:
        raw = fh.read(MAX_BYTES + 1)
    if len(raw) > MAX_BYTES:
        raise ValueError(f"{path}: file is larger than {MAX_BYTES} bytes; not a run spec")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ValueError(f"{path}: byte {exc.start} is not UTF-8 ({exc.reason})") from None
    try:
        return yaml.load(text, Loader=_UniqueKeyLoader)  # a SafeLoader subclass: no tags run
    except yaml.MarkedYAMLError as exc:  # one line: FILE:LINE: what is wrong
        mark = exc.problem_mark
        line = f":{mark.line + 1}" if mark is not None else ""
        raise ValueError(f"{path}{line}: not valid YAML: {exc.problem}") from None
    except yaml.YAMLError as exc:
        raise ValueError(f"{path}: not valid YAML: {exc}") from None


def load_spec(path: Path, *, data: bool = True) -> RunSpec:
    """The validated RunSpec of ``path``; with ``data`` its data files are checked too."""
    doc = _read(path)
    if not isinstance(doc, dict):
        raise ValueError(f"{path}: expected a mapping with a RunSpec (name, model, train, ...)")
    try:
        spec = RunSpec.model_validate(doc)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        msg = first["msg"].removeprefix("Value error, ")
        # our own validators' messages start with the key they are about ("train.warmup: ...")
        said = re.match(r"[a-z_]+(\.[a-z_\[\]0-9]+)*: ", msg) is not None
        head = f"{path}: {msg}" if said or not where else f"{path}: {where}: {msg}"
        more = exc.error_count() - 1
        raise ValueError(head + (f" (and {more} more error(s))" if more else "")) from None
    if data:
        problems = [p for key, cfg in [("data", spec.data),
                                       *((f"eval.ppl_sets.{n}", c)
                                         for n, c in spec.eval.ppl_sets.items())]
                    for p in check(cfg, spec.train, vocab_size=spec.model.vocab_size, key=key)]
        if problems:
            raise ValueError(f"{path}: " + f"\n{path}: ".join(problems))
    return spec
