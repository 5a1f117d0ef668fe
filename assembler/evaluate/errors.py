"""Errors of the evaluation harness: each carries the lines to print, and maps to an exit status."""

from __future__ import annotations

from collections.abc import Sequence

from assembler.errors import UsageError

__all__ = ["EvaluateError"]


class EvaluateError(UsageError):
    """Bad input or usage (exit 2): one or more self-contained lines naming file, line, field, rule."""

    def __init__(self, lines: str | Sequence[str]) -> None:
        self.lines = [lines] if isinstance(lines, str) else list(lines)
        super().__init__("\n".join(self.lines))
