"""Read one RunSpec YAML for ``python -m trainer``: every problem is one ValueError that names
the file, the line, the key and what was expected, found before torch or DeepSpeed start.

What ``orchestrator validate`` checks for a sweep, this checks for one run file, with the same
parts: THE bounded YAML reader (contract/yamlsrc.py: size, tags, duplicate keys, ``1e3`` as a
number), the spec (contract/config.py, its errors flattened by contract.errors), then its data
(trainer/datacheck.py, the same function ``validate`` calls).
"""

from __future__ import annotations

from pathlib import Path

from pydantic import ValidationError

from contract.config import RunSpec
from contract.errors import SpecError, format_path, pydantic_problems
from contract.yamlsrc import Source, load_file
from trainer.datacheck import check

RUN_TOP = "a mapping with a RunSpec (name, model, train, ...)"


def _read(path: Path) -> Source:
    try:
        return load_file(path, expected=RUN_TOP)
    except SpecError as exc:  # the reader stops at its first problem: one located line
        raise ValueError(str(exc.issues[0])) from None


def _spec(src: Source) -> RunSpec:
    try:
        return RunSpec.model_validate(src.data)
    except ValidationError as exc:
        first, *rest = pydantic_problems(exc)
        line = src.line_of(first.key)
        where = src.file if line is None else f"{src.file}:{line}"
        key = format_path(first.path)
        head = f"{where}: {first.text}" if first.named or not key else \
            f"{where}: {key}: {first.text}"
        raise ValueError(head + (f" (and {len(rest)} more error(s))" if rest else "")) from None


def load_spec(path: Path, *, data: bool = True) -> RunSpec:
    """The validated RunSpec of ``path``; with ``data`` its data files are checked too."""
    src = _read(path)
    if not isinstance(src.data, dict):
        raise ValueError(f"{path}:1: expected {RUN_TOP}")
    spec = _spec(src)
    if data:
        problems = [p for key, cfg in [("data", spec.data),
                                       *((f"eval.ppl_sets.{n}", c)
                                         for n, c in spec.eval.ppl_sets.items())]
                    for p in check(cfg, spec.train, vocab_size=spec.model.vocab_size, key=key)]
        if problems:
            raise ValueError(f"{path}: " + f"\n{path}: ".join(problems))
    return spec
