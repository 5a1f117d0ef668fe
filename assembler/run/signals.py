"""Ctrl-C, SIGTERM, SIGHUP and SIGQUIT while a chunk is assembled in this process.

Python raises ``KeyboardInterrupt`` (and the command's handler of the other three its subclass)
wherever the main thread is. Inside Polars' or Arrow's native code, which calls back into Python
(to read a data type, say), that exception is swallowed as "ignored" and an unrelated ``TypeError``
comes out with a traceback. So the signals are held while a chunk is assembled and delivered once
it is done: an interrupted run stops within one chunk's time, with the command's own one-line
message.
"""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

__all__ = ["STOPPING", "TERMINAL", "held_signals"]

STOPPING = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT)
"""The signals that stop a run cleanly (the command removes its temporary files and ends its workers)."""

TERMINAL = (signal.SIGINT, signal.SIGHUP, signal.SIGQUIT)
"""The ones a terminal sends to the whole process group (Ctrl-C, a hang-up, Ctrl-\\): a worker
ignores them and leaves them to the command, which ends it."""


@contextmanager
def held_signals(*, ignore_interrupt: bool = False) -> Iterator[None]:
    """Hold the :data:`STOPPING` signals for the block and send the first one held to this process
    after it, to the handlers that were in place. ``ignore_interrupt``: the :data:`TERMINAL` ones
    are ignored instead (``SIG_IGN``, which a process started within the block inherits) and
    one of them within it is lost; SIGTERM is still held. Elsewhere than in the main thread,
    nothing changes (only the main thread may change handlers, and only it runs them)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    held: list[int] = []

    def hold(signum: int, frame: FrameType | None) -> None:
        held.append(signum)

    handlers = {signum: signal.SIG_IGN if ignore_interrupt and signum in TERMINAL else hold for signum in STOPPING}
    previous = {signum: signal.signal(signum, handler) for signum, handler in handlers.items()}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        if held:
            os.kill(os.getpid(), held[0])
