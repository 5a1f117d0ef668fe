"""What a run's processes set for themselves and the processes they start, and how they end
(stdlib only: the command line uses it before Polars loads)."""

from __future__ import annotations

import atexit
import gc
import os
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager, suppress
from typing import NoReturn

__all__ = ["end_without_teardown", "environment_defaults", "frozen_once_loaded"]


@contextmanager
def environment_defaults(values: Mapping[str, str]) -> Iterator[None]:
    """Set each of ``values`` that the environment does not set already; on exit, remove the ones
    set here, so that a caller's process gets its environment back.

    >>> import os
    >>> with environment_defaults({"ASSEMBLER_DOCTEST": "1"}):
    ...     os.environ["ASSEMBLER_DOCTEST"]
    '1'
    >>> "ASSEMBLER_DOCTEST" in os.environ
    False
    """
    added = [name for name in values if name not in os.environ]
    os.environ.update({name: values[name] for name in added})
    try:
        yield
    finally:
        for name in added:
            os.environ.pop(name, None)


@contextmanager
def frozen_once_loaded() -> Iterator[None]:
    """Load modules with Python's cyclic garbage collector paused, then freeze what they made
    (``gc.freeze``: moved where the collector never looks) and resume it. For a process that is
    the command's own (the executable, a started worker), never a Python API caller's.

    Loading NumPy, Arrow, Polars and the package makes a few hundred thousand objects that live as
    long as the process: the collector walking them while they load, and again at every full
    collection after, was about 30 ms of a five-record run's 0.36 s of CPU (docs/performance.md,
    "Start-up"). The little garbage made while loading is kept.

    >>> import gc
    >>> with frozen_once_loaded():
    ...     gc.isenabled()
    False
    >>> gc.isenabled(), gc.get_freeze_count() > 0
    (True, True)
    >>> gc.unfreeze()
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        if enabled:
            gc.enable()


def end_without_teardown(status: int) -> NoReturn:
    """End the process with ``status`` once its exit handlers ran and its standard streams are
    flushed, skipping the interpreter's teardown: unloading NumPy, Arrow and Polars and freeing
    every module's objects costs about 0.1 s of CPU, a sixth of a small run, for nothing. For a
    process whose work is done: its files closed, no thread but daemons left running."""
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        with suppress(OSError, ValueError):  # closed or failing: the command has said so already
            stream.flush()
    os._exit(status)
