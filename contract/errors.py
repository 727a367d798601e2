"""User-facing errors: one clear sentence first, FILE:LINE KEY.PATH where we know them."""

from __future__ import annotations

from dataclasses import dataclass


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
        return "\n".join([head, *(f"  {i}" for i in self.issues)])
