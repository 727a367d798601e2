"""User-facing errors: one clear sentence first, FILE:LINE KEY.PATH where we know them."""

from __future__ import annotations

import re
from dataclasses import dataclass

from pydantic import ValidationError

from contract.ids import ascii_int


def format_path(path: tuple[str | int, ...]) -> str:
    return ".".join(str(p) for p in path)


@dataclass(frozen=True)
class SpecIssue:
    file: str
    line: int | None
    path: tuple[str | int, ...]
    message: str

    def __str__(self) -> str:
        where = self.file if self.line is None else f"{self.file}:{self.line}"
        key = format_path(self.path)
        return f"{where}: {key}: {self.message}" if key else f"{where}: {self.message}"


class UserError(Exception):
    """A problem with the user's input or environment: printed without a traceback."""


class Interrupted(Exception):
    """The user stopped a driver (SIGINT/SIGTERM) and its unfinished runs were marked cancelled:
    the CLI prints the message and exits 130."""


SHOWN_ISSUES = 20  # problems an invalid sweep file lists (the rest are counted)


class SpecError(UserError):
    """A sweep file is invalid; carries every issue found (deduplicated, in order)."""

    def __init__(self, issues: list[SpecIssue]) -> None:
        seen: dict[str, SpecIssue] = {}
        for issue in issues:
            seen.setdefault(str(issue), issue)
        self.issues = list(seen.values())
        super().__init__(self._text())

    def _text(self) -> str:
        if len(self.issues) == 1:
            return f"invalid sweep: {self.issues[0]}"
        files = sorted({i.file for i in self.issues})
        head = f"invalid sweep {', '.join(files)}: {len(self.issues)} problems:"
        shown = [f"  {i}" for i in self.issues[:SHOWN_ISSUES]]
        more = len(self.issues) - SHOWN_ISSUES
        # 30,000 unknown keys printed 30,001 lines: the first ones say what is wrong
        tail = [f"  ... and {more} more (fix these first)"] if more > 0 else []
        return "\n".join([head, *shown, *tail])


# Our own validators start their message with the key they are about ("train.warmup: 9 must
# be below train.steps"): such a message is located at that key, not at the model it checks.
_KEY_IN_MESSAGE = re.compile(r"^([a-z_]+(?:\.[a-z_0-9]+)+): ")


@dataclass(frozen=True)
class Problem:
    """One pydantic error as a user reads it: where (key path) and what was expected.

    ``path``: pydantic's location (the model or field that refused). ``key``: the key the
    problem is about: ``path``, or the deeper key the message starts with ("train.warmup:
    ..." on ``train``), whose line a printer should show. ``named``: the message says its key
    itself, so a printer need not repeat it. ``got``: the offending value, shortened, if plain.
    """

    path: tuple[str | int, ...]
    key: tuple[str | int, ...]
    message: str
    named: bool = False
    got: str | None = None
    kind: str = ""  # pydantic's error type ("greater_than_equal", "missing", ...)

    @property
    def text(self) -> str:
        return self.message if self.got is None else f"{self.message} (got {self.got})"


def pydantic_problems(exc: ValidationError) -> list[Problem]:
    """THE flattener of pydantic errors (sweep files, run files and nested config models all
    use it): loc tuples -> key paths, pydantic's wording -> ours, a named key -> its path."""
    out = []
    for err in exc.errors():
        # union members add tags such as "function-after[_check(), GateSpec]": not keys
        loc = tuple(p for p in err["loc"] if not (isinstance(p, str) and "[" in p))
        msg = err["msg"].removeprefix("Value error, ")
        kind = err["type"]
        if kind == "extra_forbidden":
            msg = "unknown key (not a field here)"
        elif kind == "missing":
            msg = "required key is missing"
        got = None
        if "input" in err and kind not in ("missing", "extra_forbidden") \
                and not isinstance(err["input"], (dict, list)):
            text = repr(err["input"])
            got = text if len(text) <= 60 else text[:60] + "..."
        m = _KEY_IN_MESSAGE.match(msg)
        key = loc
        if m is not None:
            named = tuple(p if ascii_int(p) is None else int(p) for p in m.group(1).split("."))
            if named[:len(loc)] == loc and len(named) > len(loc):
                key = named
        out.append(Problem(loc, key, msg, m is not None, got, kind))
    return out
