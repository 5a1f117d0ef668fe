"""The command line: ``assembler`` and its commands, thin over the typed Python API."""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

from assembler.cli.startup import load_libraries, prepare_process
from assembler.cli.stopped import interrupted, stop_on_signals, stopped_by
from assembler.run.environment import environment_defaults

__all__ = ["POLARS_THREADS", "main", "no_rust_backtraces"]

POLARS_THREADS = "1"
"""Polars' thread pool in each process of the command, unless ``POLARS_MAX_THREADS`` is set.

A process assembles one chunk (a few hundred queries, a few thousand rows per frame) at a time,
too little for Polars' threads to pay: the command uses more cores with more processes
(``--workers``). On two cores, one process took the same CPU and wall time with one thread as
with two, and a run on both cores 7 % less of each, since the command's threads no longer compete
with its worker's (docs/performance.md, "Polars' threads"). The Python API leaves Polars to its
own default (one thread per CPU); the pool's workers get their share of the CPUs either way."""


@contextmanager
def no_rust_backtraces() -> Iterator[None]:
    """``RUST_BACKTRACE=0`` while the command runs (the previous value back after), whatever the
    environment says: a Polars panic caused by a failed allocation, printing a backtrace, allocates
    again and deadlocks in Rust's backtrace lock (the process hangs, deaf to SIGTERM), and the
    command prints one line, never a traceback."""
    previous = os.environ.get("RUST_BACKTRACE")
    os.environ["RUST_BACKTRACE"] = "0"
    try:
        yield
    finally:
        if previous is None:
            os.environ.pop("RUST_BACKTRACE", None)
        else:
            os.environ["RUST_BACKTRACE"] = previous


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``assembler`` command; returns the exit status.

    The commands, and Polars, Arrow and NumPy behind them, load here rather than on ``import``: a
    Ctrl-C while they load (the first half second of every run) is the command's one-line
    interruption, status 130, not a traceback from the middle of an import. SIGTERM, SIGHUP and
    SIGQUIT raise from here on too (:func:`~assembler.cli.stopped.stop_on_signals`: statuses 143,
    129 and 131), never their default action. Polars' thread pool is sized before it loads
    (:data:`POLARS_THREADS`), after the checks of :mod:`assembler.cli.startup` (closed standard
    streams, a bad ``POLARS_MAX_THREADS``, too few file descriptors or too little address space:
    one line, no traceback).
    """
    failed = prepare_process()  # the standard streams, POLARS_MAX_THREADS, the limits (assembler/cli/startup.py)
    if failed is not None:
        return failed
    try:
        with stop_on_signals(), environment_defaults({"POLARS_MAX_THREADS": POLARS_THREADS}), no_rust_backtraces():
            failed = load_libraries()
            if failed is not None:
                return failed
            from assembler.cli.commands import main as run

            return run(argv)
    except KeyboardInterrupt as exc:  # while the commands load (the command handles its own)
        return interrupted(stopped_by(exc))
