"""Safe, bounded YAML loading that remembers where every key came from.

``yaml.safe_load`` forgets line numbers and silently keeps the last of two duplicate keys.
A sweep file is user input, so we compose the node graph with PyYAML's safe loader and build
plain Python values ourselves: duplicate mapping keys are errors, size/depth/node counts are
bounded (no alias bombs), and every key path maps to its 1-based source line so validation
errors can quote FILE:LINE KEY.PATH.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from orchestrator.errors import SpecError, SpecIssue

MAX_BYTES = 1 << 20  # 1 MiB: a sweep file is hand-written
MAX_DEPTH = 32
MAX_NODES = 200_000  # counts nodes as expanded through aliases

KeyPath = tuple[str | int, ...]


class _Loader(yaml.SafeLoader):
    """SafeLoader that also reads ``3e-3`` (no dot) as a float, as users expect.

    YAML 1.1 (PyYAML) would keep it a string; learning rates are written that way.
    """


_FLOAT = re.compile(r"^[-+]?(?:[0-9][0-9_]*)(?:\.[0-9_]*)?[eE][-+]?[0-9]+$")
_Loader.add_implicit_resolver("tag:yaml.org,2002:float", _FLOAT, list("-+0123456789"))


@dataclass
class Source:
    """A parsed YAML document plus the line of every key path (1-based)."""

    file: str
    data: Any
    lines: dict[KeyPath, int] = field(default_factory=dict)

    def line_of(self, path: KeyPath) -> int | None:
        """The line of ``path`` or of its nearest ancestor that has one."""
        for cut in range(len(path), -1, -1):
            line = self.lines.get(tuple(path[:cut]))
            if line is not None:
                return line
        return None

    def issue(self, path: KeyPath, message: str) -> SpecIssue:
        return SpecIssue(self.file, self.line_of(path), path, message)


def load_text(text: str, file: str = "<string>") -> Source:
    """Parse ``text``; raise SpecError naming the file and line on any problem."""
    if len(text.encode()) > MAX_BYTES:
        raise SpecError([SpecIssue(file, None, (), f"file is larger than {MAX_BYTES} bytes")])
    try:
        node = yaml.compose(text, Loader=_Loader)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 1 if mark is not None else None
        problem = getattr(exc, "problem", None) or str(exc)
        raise SpecError([SpecIssue(file, line, (), f"invalid YAML: {problem}")]) from None
    src = Source(file=file, data=None)
    if node is None:
        raise SpecError([SpecIssue(file, 1, (), "the file is empty; expected a mapping with "
                                                "'name', 'base' and 'variants' or 'axes'")])
    builder = _Builder(src)
    src.data = builder.build(node, (), 0)
    return src


def load_file(path: str | Path) -> Source:
    p = Path(path)
    try:
        size = p.stat().st_size
        if size > MAX_BYTES:
            raise SpecError([SpecIssue(str(p), None, (), f"file is larger than {MAX_BYTES} bytes")])
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise SpecError([SpecIssue(str(p), None, (), "no such file")]) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise SpecError([SpecIssue(str(p), None, (), f"cannot read the file: {exc}")]) from None
    return load_text(text, str(p))


class _Builder:
    """Node graph -> plain dict/list/scalars, recording lines and enforcing bounds."""

    def __init__(self, src: Source) -> None:
        self.src = src
        self.nodes = 0
        self.scalars = _Loader("")  # only for construct_scalar-style resolution

    def build(self, node: yaml.Node, path: KeyPath, depth: int) -> Any:
        self.nodes += 1
        if self.nodes > MAX_NODES:
            raise SpecError([self.src.issue(path, f"the document expands to more than "
                                                  f"{MAX_NODES} nodes (aliases?)")])
        if depth > MAX_DEPTH:
            raise SpecError([self.src.issue(path, f"nesting deeper than {MAX_DEPTH} levels")])
        self.src.lines.setdefault(path, node.start_mark.line + 1)
        if isinstance(node, yaml.MappingNode):
            return self._mapping(node, path, depth)
        if isinstance(node, yaml.SequenceNode):
            return [self.build(v, (*path, i), depth + 1) for i, v in enumerate(node.value)]
        return self.scalars.construct_object(node, deep=True)

    def _mapping(self, node: yaml.MappingNode, path: KeyPath, depth: int) -> dict[Any, Any]:
        self.scalars.flatten_mapping(node)  # resolves '<<' merge keys
        out: dict[Any, Any] = {}
        for key_node, value_node in node.value:
            key = self.scalars.construct_object(key_node, deep=True)
            if not isinstance(key, (str, int, float, bool)) or key is None:
                raise SpecError([SpecIssue(self.src.file, key_node.start_mark.line + 1, path,
                                           "mapping keys must be plain scalars")])
            key = str(key) if not isinstance(key, str) else key
            if key in out:
                first = self.src.lines.get((*path, key))
                raise SpecError([SpecIssue(self.src.file, key_node.start_mark.line + 1,
                                           (*path, key), f"duplicate key (first defined on "
                                                         f"line {first})")])
            self.src.lines[(*path, key)] = key_node.start_mark.line + 1
            out[key] = self.build(value_node, (*path, key), depth + 1)
        return out
