"""The one bounded, safe YAML reader (sweep files and run files): every key keeps its line.

User input may be careless or hostile, so every bound is enforced *while* reading, never after:
- the file must be a regular file (``os.stat`` before opening: ``/dev/zero`` or a FIFO is refused
  without being opened; opened ``O_NONBLOCK`` and re-checked with ``fstat`` against a swap) and
  at most ``MAX_BYTES`` (at most ``MAX_BYTES + 1`` bytes are ever read);
- nesting depth and node count are checked by the composer as it descends (``_Loader``), so a
  10,000-level document stops at level ``MAX_DEPTH`` instead of exhausting Python's stack, and
  alias expansion is bounded by ``_Builder`` (no billion laughs);
- a plain document needs no tags: any explicit tag (``!!python/name:...``, ``!!binary``,
  ``!custom``, ``!!str``) on a scalar, list or mapping is refused;
- duplicate mapping keys are errors (``yaml.safe_load`` silently keeps the last one).
Every failure becomes a ``SpecError`` whose issue reads ``FILE:LINE: key.path: what was
expected``, which the CLI prints as one line with exit code 2 (``python -m trainer``'s run
files, trainer/runfile.py, print the same issue).
"""

from __future__ import annotations

import os
import re
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from contract.errors import SpecError, SpecIssue

MAX_BYTES = 1 << 20  # 1 MiB: a sweep or run file is hand-written
SWEEP_TOP = "a mapping with 'name', 'base' and 'variants' or 'axes'"  # what a sweep file holds
MAX_DEPTH = 32
MAX_NODES = 200_000  # counts nodes as expanded through aliases

KeyPath = tuple[str | int, ...]


class _Refused(Exception):
    """A bound or rule broken while composing: (0-based line, message)."""

    def __init__(self, line: int, message: str) -> None:
        super().__init__(message)
        self.line, self.message = line, message


class _Loader(yaml.SafeLoader):
    """SafeLoader that bounds depth and nodes while composing, refuses tags, tracks the key
    path being read (for error messages), and reads ``3e-3`` (no dot) as a float: YAML 1.1
    (PyYAML) would keep it a string, and learning rates are written that way."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self.key_path: list[str | int] = []  # where the composer is now
        self.n_nodes = 0

    def compose_node(self, parent: Any, index: Any) -> Any:
        event = self.peek_event()
        if not isinstance(event, yaml.AliasEvent):
            self.n_nodes += 1
            line = event.start_mark.line
            if self.n_nodes > MAX_NODES:
                raise _Refused(line, f"the document has more than {MAX_NODES} nodes")
            if len(self.key_path) > MAX_DEPTH:
                raise _Refused(line, f"nesting deeper than {MAX_DEPTH} levels")
            tag = getattr(event, "tag", None)
            if tag is not None:
                raise _Refused(line, f"YAML tag {tag!r} is not allowed; expected plain "
                                     "values, lists and mappings (remove the tag)")
        return super().compose_node(parent, index)

    # types-PyYAML types `anchor` as a dict; PyYAML passes the anchor's name (str | None)
    def compose_sequence_node(self, anchor: str | None  # type: ignore[override]
                              ) -> yaml.SequenceNode:
        start = self.get_event()
        node = yaml.SequenceNode(self.resolve(yaml.SequenceNode, None, start.implicit), [],
                                 start.start_mark, None, flow_style=start.flow_style)
        if anchor is not None:
            self.anchors[anchor] = node
        self.key_path.append(0)
        while not self.check_event(yaml.SequenceEndEvent):
            self.key_path[-1] = len(node.value)
            node.value.append(self.compose_node(node, len(node.value)))
        self.key_path.pop()
        node.end_mark = self.get_event().end_mark
        return node

    def compose_mapping_node(self, anchor: str | None  # type: ignore[override]
                             ) -> yaml.MappingNode:
        start = self.get_event()
        node = yaml.MappingNode(self.resolve(yaml.MappingNode, None, start.implicit), [],
                                start.start_mark, None, flow_style=start.flow_style)
        if anchor is not None:
            self.anchors[anchor] = node
        self.key_path.append("")
        while not self.check_event(yaml.MappingEndEvent):
            key = self.compose_node(node, None)
            self.key_path[-1] = key.value if isinstance(key, yaml.ScalarNode) else "?"
            node.value.append((key, self.compose_node(node, key)))
        self.key_path.pop()
        node.end_mark = self.get_event().end_mark
        return node


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


def _fail(file: str, line: int | None, path: KeyPath, message: str) -> SpecError:
    return SpecError([SpecIssue(file, line, tuple(path), message)])


def load_text(text: str, file: str = "<string>", *, expected: str = SWEEP_TOP) -> Source:
    """Parse ``text``; raise SpecError naming the file, line and key on any problem.
    ``expected``: what the document should hold, said when it is empty."""
    if len(text) > MAX_BYTES or len(text.encode("utf-8", "surrogatepass")) > MAX_BYTES:
        raise _fail(file, None, (), f"file is larger than {MAX_BYTES} bytes; expected a "
                                    "hand-written YAML file")
    loader = None
    try:
        loader = _Loader(text)  # the reader refuses control characters right here
        node = loader.get_single_node()
    except _Refused as exc:
        raise _fail(file, exc.line + 1, _where(loader), exc.message) from None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        problem = exc.problem or exc.context or "unreadable"
        raise _fail(file, mark.line + 1 if mark else None, _where(loader),
                    f"invalid YAML: {problem}") from None
    except yaml.reader.ReaderError as exc:  # a control character or invalid code point
        raise _fail(file, text[:exc.position].count("\n") + 1, _where(loader),
                    f"invalid YAML: control character {_char(exc.character)} is not "
                    "allowed; expected printable text") from None
    except yaml.YAMLError as exc:  # pragma: no cover - every PyYAML error is one of the above
        raise _fail(file, None, _where(loader), f"invalid YAML: {exc}") from None
    finally:
        if loader is not None:
            loader.dispose()
    if node is None:
        raise _fail(file, 1, (), f"the file is empty; expected {expected}")
    src = Source(file=file, data=None)
    src.data = _Builder(src).build(node, (), 0)
    return src


def _short(text: str, n: int = 40) -> str:
    """``text`` cut to ``n`` characters: an error message quotes a value, not a megabyte."""
    return text if len(text) <= n else f"{text[:n]}... ({len(text)} characters)"


def _char(ch: int | str) -> str:
    return f"U+{ch if isinstance(ch, int) else ord(ch):04X}"


def _where(loader: _Loader | None, shown: int = 8) -> KeyPath:
    """The key path being read when parsing stopped (the first ``shown`` levels of a deep one)."""
    path = tuple(loader.key_path) if loader is not None else ()
    return path if len(path) <= shown else (*path[:shown], f"...({len(path)} levels)")


def read_bounded(path: str | Path, limit: int = MAX_BYTES) -> bytes:
    """The bytes of a regular file of at most ``limit`` bytes, or a SpecError.

    ``os.stat`` first: a device or FIFO is never opened (opening a FIFO blocks, reading
    ``/dev/zero`` never ends). ``O_NONBLOCK`` + ``fstat`` cover a file swapped in between.
    """
    p = str(path)
    try:
        if not stat.S_ISREG(os.stat(p).st_mode):
            raise _fail(p, None, (), _not_regular(os.stat(p).st_mode))
        fd = os.open(p, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise _fail(p, None, (), "no such file") from None
    except OSError as exc:
        raise _fail(p, None, (), f"cannot read the file: {exc.strerror or exc}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise _fail(p, None, (), _not_regular(st.st_mode))
        if st.st_size > limit:
            raise _fail(p, None, (), f"file is larger than {limit} bytes; expected a "
                                     "hand-written YAML file")
        chunks, got = [], 0
        while got <= limit:
            chunk = os.read(fd, limit + 1 - got)
            if not chunk:
                break
            chunks.append(chunk)
            got += len(chunk)
    except OSError as exc:
        raise _fail(p, None, (), f"cannot read the file: {exc.strerror or exc}") from None
    finally:
        os.close(fd)
    if got > limit:  # it grew after the fstat
        raise _fail(p, None, (), f"file is larger than {limit} bytes")
    return b"".join(chunks)


def _not_regular(mode: int) -> str:
    kind = ("a directory" if stat.S_ISDIR(mode) else "a FIFO" if stat.S_ISFIFO(mode)
            else "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode)
            else "a socket" if stat.S_ISSOCK(mode) else "not a regular file")
    return f"this is {kind}; expected a regular YAML file"


def load_file(path: str | Path, *, expected: str = SWEEP_TOP) -> Source:
    data = read_bounded(path)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[:exc.start].count(b"\n") + 1
        raise _fail(str(path), line, (), f"byte {data[exc.start]:#04x} is not UTF-8; expected "
                                         "a UTF-8 text file") from None
    return load_text(text, str(path), expected=expected)


class _Builder:
    """Node graph -> plain dict/list/scalars, recording lines and bounding alias expansion."""

    def __init__(self, src: Source) -> None:
        self.src = src
        self.nodes = 0
        self.scalars = _Loader("")  # only for scalar construction and merge keys

    def build(self, node: yaml.Node, path: KeyPath, depth: int) -> Any:
        self.nodes += 1
        if self.nodes > MAX_NODES:
            raise SpecError([self.src.issue(path, f"the document expands to more than "
                                                  f"{MAX_NODES} nodes (aliases?)")])
        if depth > MAX_DEPTH:
            raise SpecError([self.src.issue(path, f"nesting deeper than {MAX_DEPTH} levels "
                                                  "(a recursive alias?)")])
        self.src.lines.setdefault(path, node.start_mark.line + 1)
        if isinstance(node, yaml.MappingNode):
            return self._mapping(node, path, depth)
        if isinstance(node, yaml.SequenceNode):
            return [self.build(v, (*path, i), depth + 1) for i, v in enumerate(node.value)]
        return self._scalar(node, path)

    def _scalar(self, node: yaml.Node, path: KeyPath) -> Any:
        try:
            return self.scalars.construct_object(node, deep=True)
        except (yaml.YAMLError, ValueError, OverflowError) as exc:
            raise SpecError([SpecIssue(self.src.file, node.start_mark.line + 1, path,
                                       f"cannot read the value {_short(repr(node.value))}: "
                                       f"{_short(str(getattr(exc, 'problem', None) or exc), 80)}"
                                       )]) from None

    def _mapping(self, node: yaml.MappingNode, path: KeyPath, depth: int) -> dict[Any, Any]:
        try:
            self.scalars.flatten_mapping(node)  # resolves '<<' merge keys
        except yaml.YAMLError as exc:
            raise SpecError([self.src.issue(path, f"invalid merge key: "
                                                  f"{getattr(exc, 'problem', exc)}")]) from None
        out: dict[Any, Any] = {}
        for key_node, value_node in node.value:
            line = key_node.start_mark.line + 1
            if not isinstance(key_node, yaml.ScalarNode):
                raise SpecError([SpecIssue(self.src.file, line, path,
                                           "mapping keys must be plain scalars")])
            key = self._scalar(key_node, path)
            if not isinstance(key, (str, int, float, bool)) or key is None:
                raise SpecError([SpecIssue(self.src.file, line, path,
                                           "mapping keys must be plain scalars")])
            key = str(key) if not isinstance(key, str) else key
            if key in out:
                first = self.src.lines.get((*path, key))
                raise SpecError([SpecIssue(self.src.file, line, (*path, key),
                                           f"duplicate key (first defined on line {first})")])
            self.src.lines[(*path, key)] = line
            out[key] = self.build(value_node, (*path, key), depth + 1)
        return out
