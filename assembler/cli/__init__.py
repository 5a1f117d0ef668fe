"""The command line: ``assembler`` and its commands, thin over the typed Python API."""

from __future__ import annotations

import signal
from collections.abc import Sequence

from assembler.cli.stopped import interrupted

__all__ = ["main"]


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``assembler`` command; returns the exit status.

    The commands, and Polars, Arrow and NumPy behind them, load here rather than on ``import``: a
    Ctrl-C while they load (the first half second of every run) is the command's one-line
    interruption, status 130, not a traceback from the middle of an import.
    """
    try:
        from assembler.cli.main import main as run
    except KeyboardInterrupt:
        return interrupted(signal.SIGINT)
    return run(argv)
