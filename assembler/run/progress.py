"""When a command draws progress bars: the one rule every command's bars follow."""

from __future__ import annotations

import sys

__all__ = ["progress_shown"]


def progress_shown(quiet: bool) -> bool:
    """Bars are drawn on standard error only when it is a terminal and ``quiet`` (``-q``) is not
    asked for: a log file or a pipe never receives a bar's redraws. A missing or closed standard
    error draws none.

    >>> progress_shown(quiet=True)
    False
    """
    if quiet:
        return False
    try:
        return sys.stderr.isatty()
    except (AttributeError, OSError, ValueError):  # no standard error, or a closed one
        return False
