"""How the command stops on a signal: one line and ``128 +`` the signal's number.

A module of its own, importing nothing heavy: the entry point (:func:`assembler.cli.main`) uses it
while the commands and their libraries are still loading, and installs :func:`stop_on_signals`
first of all, so that SIGTERM, SIGHUP and SIGQUIT never take their default action (a kill that
leaves temporary files, and for SIGQUIT a core dump) once the command has started.
"""

from __future__ import annotations

import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

__all__ = ["RAISED", "Terminated", "interrupted", "stop_on_signals", "stopped_by"]

_WORDS = {
    signal.SIGINT: "interrupted",
    signal.SIGTERM: "terminated",
    signal.SIGHUP: "hung up",
    signal.SIGQUIT: "quit",
}

RAISED = (signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT)
"""The signals that raise :class:`Terminated` while the command runs (SIGINT raises Python's own
``KeyboardInterrupt``)."""


class Terminated(KeyboardInterrupt):
    """SIGTERM, SIGHUP or SIGQUIT, raised in the main thread: every cleanup that runs on Ctrl-C
    runs on it too. ``signum`` is the signal."""

    def __init__(self, signum: int = signal.SIGTERM) -> None:
        super().__init__(signum)
        self.signum = signal.Signals(signum)


def _raise_terminated(signum: int, frame: FrameType | None) -> None:
    raise Terminated(signum)


@contextmanager
def stop_on_signals() -> Iterator[None]:
    """The :data:`RAISED` signals raise :class:`Terminated` in the block (main thread only), then
    the handlers before are back. One that was ignored when the command started (``nohup``'s
    SIGHUP) stays ignored."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {}
    for signum in RAISED:
        if signal.getsignal(signum) is signal.SIG_IGN:
            continue
        previous[signum] = signal.signal(signum, _raise_terminated)
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def stopped_by(exc: KeyboardInterrupt) -> signal.Signals:
    """The signal behind an interruption: a :class:`Terminated`'s, else SIGINT (Ctrl-C)."""
    return exc.signum if isinstance(exc, Terminated) else signal.SIGINT


def interrupted(signum: signal.Signals) -> int:
    """Say in one line which signal stopped the command (SIGINT ``interrupted``, SIGTERM
    ``terminated``, SIGHUP ``hung up``, SIGQUIT ``quit``); its exit status (130, 143, 129, 131)."""
    print(f"assembler: {_WORDS.get(signum, 'terminated')}", file=sys.stderr)
    return 128 + signum
