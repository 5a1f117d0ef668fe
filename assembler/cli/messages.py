"""How the command prints what it has to say: every error, warning and summary line is one line
of bounded length, with control characters escaped (:func:`assembler.errors.one_line`).

The callers escape and shorten what they echo (:func:`assembler.errors.shown` for ids and keys,
:func:`assembler.errors.shown_path` for file names); this is the last line of defence, so that no
input can forge a second ``assembler: error:`` line, drive the terminal or print a line megabytes
long, whatever a caller forgot. A line that cannot be printed (standard error closed or broken)
is dropped: a message must not change what the command does or its exit status.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Sequence
from typing import TextIO

from assembler.errors import one_line

__all__ = ["ERROR", "MAX_ERROR_LINES", "WARNING", "error", "error_lines", "lines", "warning"]

ERROR = "assembler: error: "
WARNING = "assembler: warning: "

MAX_ERROR_LINES = 20
"""At most this many lines for one error of several lines (then ``... and N more``)."""


def lines(texts: Iterable[str], file: TextIO | None = None) -> None:
    """Print each of ``texts`` as one bounded line on ``file`` (standard error by default)."""
    stream = sys.stderr if file is None else file
    try:
        for text in texts:
            print(one_line(text), file=stream)
    except (OSError, ValueError):  # a closed or broken stream: nothing more can be said there
        if stream is not sys.stderr:
            raise


def error(message: str) -> None:
    """``assembler: error: <message>``, one line."""
    lines([ERROR + message])


def error_lines(messages: Sequence[str]) -> None:
    """An error of several self-contained lines (an :class:`~assembler.evaluate.EvaluateError`),
    each as :func:`error` prints one, at most :data:`MAX_ERROR_LINES` of them."""
    shown = [ERROR + message for message in messages[:MAX_ERROR_LINES]]
    if len(messages) > MAX_ERROR_LINES:
        shown.append(f"{ERROR}... and {len(messages) - MAX_ERROR_LINES} more")
    lines(shown)


def warning(message: str, prefix: str = WARNING) -> None:
    """``assembler: warning: <message>``, one line."""
    lines([prefix + message])
