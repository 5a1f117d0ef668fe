"""How the command says that a signal stopped it: one line and ``128 +`` the signal's number.

A module of its own, importing nothing heavy: the entry point (:func:`assembler.cli.main`) uses it
while the commands and their libraries are still loading.
"""

from __future__ import annotations

import signal
import sys

__all__ = ["interrupted"]


def interrupted(signum: signal.Signals) -> int:
    """Say in one line that SIGINT (Ctrl-C) or SIGTERM stopped the command; its exit status (130, 143)."""
    print(f"assembler: {'terminated' if signum == signal.SIGTERM else 'interrupted'}", file=sys.stderr)
    return 128 + signum
