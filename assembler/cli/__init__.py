"""The command line: ``assembler`` and its commands, thin over the typed Python API."""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, nullcontext
from typing import NoReturn

from assembler.cli.startup import load_libraries, prepare_process
from assembler.cli.stopped import interrupted, stop_on_signals, stopped_by
from assembler.run.environment import end_without_teardown, environment_defaults, frozen_once_loaded
from assembler.run.workers import end_early, start_early

__all__ = ["BLAS_THREADS", "DENSE_COMMANDS", "POLARS_THREADS", "asked_workers", "main", "no_rust_backtraces", "script"]

POLARS_THREADS = "1"
"""Polars' thread pool in each process of the command, unless ``POLARS_MAX_THREADS`` is set.

A process assembles one chunk (a few hundred queries, a few thousand rows per frame) at a time,
too little for Polars' threads to pay: the command uses more cores with more processes
(``--workers``). On two cores, one process took the same CPU and wall time with one thread as
with two, and a run on both cores 7 % less of each, since the command's threads no longer compete
with its worker's (docs/performance.md, "Polars' threads"). The Python API leaves Polars to its
own default (one thread per CPU); the pool's workers get their share of the CPUs either way."""

BLAS_THREADS = "1"
"""OpenBLAS's threads in the command's process, unless ``OPENBLAS_NUM_THREADS`` is set, for every
command but ``lanes build`` (:data:`DENSE_COMMANDS`, which multiplies embedding matrices): the
others' matrix products are small (near-duplicate tests among one query's candidates), and the
threads OpenBLAS starts as NumPy loads cost more CPU than they save (docs/performance.md,
"OpenBLAS's threads")."""

DENSE_COMMANDS = (("lanes", "build"),)
"""The commands whose matrix products are large enough for OpenBLAS's own threads."""


def _thread_defaults(words: Sequence[str]) -> dict[str, str]:
    """The thread pools the command sizes before its libraries load (``words``: the command line's
    words that are not options, the command's name first)."""
    defaults = {"POLARS_MAX_THREADS": POLARS_THREADS}
    if tuple(words[:2]) not in DENSE_COMMANDS:
        defaults["OPENBLAS_NUM_THREADS"] = BLAS_THREADS
    return defaults


def asked_workers(arguments: Sequence[str]) -> int:
    """The processes ``--workers N`` (or ``--workers=N``) asks for, read before the parser exists;
    1 when the flag is absent, abbreviated or not a number (the parser then decides and says)."""
    for index, word in enumerate(arguments):
        value = word.removeprefix("--workers=") if word.startswith("--workers=") else None
        if word == "--workers" and index + 1 < len(arguments):
            value = arguments[index + 1]
        if value is not None:
            return int(value) if value.isascii() and value.isdigit() else 1
    return 1


@contextmanager
def _early_workers(command: str | None, arguments: Sequence[str]) -> Iterator[None]:
    """For ``assemble --workers N``: the pool's workers start before this process loads its
    libraries, loading theirs meanwhile (:func:`~assembler.run.workers.start_early`), and end
    with the command if its run did not take them (an input of one chunk, a usage error)."""
    if command == "assemble":
        start_early(asked_workers(arguments))
    try:
        yield
    finally:
        end_early()


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


def main(argv: Sequence[str] | None = None, *, own_process: bool = False) -> int:
    """Entry point of the ``assembler`` command; returns the exit status.

    The command named, and Polars, Arrow and NumPy behind it, load here rather than on ``import``:
    a Ctrl-C while they load (the first half second of every run) is the command's one-line
    interruption, status 130, not a traceback from the middle of an import. SIGTERM, SIGHUP and
    SIGQUIT raise from here on too (:func:`~assembler.cli.stopped.stop_on_signals`: statuses 143,
    129 and 131), never their default action. Polars' and OpenBLAS's thread pools are sized before
    they load (:data:`POLARS_THREADS`, :data:`BLAS_THREADS`), after the checks of
    :mod:`assembler.cli.startup` (closed standard streams, a bad ``POLARS_MAX_THREADS``, too few
    file descriptors or too little address space: one line, no traceback). Only the command named
    loads, and its parser alone is built (:mod:`assembler.cli.commands`); ``--help``,
    ``--version`` and a word that is no command load no library. ``own_process``: the process is
    the command's alone (the executable's), so what loading made is frozen out of the garbage
    collector's way (:func:`~assembler.run.environment.frozen_once_loaded`).
    """
    failed = prepare_process()  # the standard streams, POLARS_MAX_THREADS, the limits (assembler/cli/startup.py)
    if failed is not None:
        return failed
    arguments = list(sys.argv[1:] if argv is None else argv)
    try:
        with stop_on_signals(), no_rust_backtraces():
            from assembler.cli.commands import COMMANDS, command_named, command_words  # stdlib only
            from assembler.cli.commands import main as run

            command = command_named(arguments)
            with environment_defaults(_thread_defaults(command_words(arguments))), _early_workers(command, arguments):
                if command is not None:
                    with frozen_once_loaded() if own_process else nullcontext():
                        failed = load_libraries(COMMANDS[command].module)
                    if failed is not None:
                        return failed
                return run(arguments)
    except KeyboardInterrupt as exc:  # while the command loads (the command handles its own)
        return interrupted(stopped_by(exc))


def script() -> NoReturn:
    """The ``assembler`` executable (and ``python -m assembler``): :func:`main`, then the end.

    Once a command is done its files are committed and its output flushed: the process ends at
    once with the command's status (:func:`~assembler.run.environment.end_without_teardown`), or
    as usual while a thread that is no daemon still runs, waiting for it."""
    status = main(own_process=True)
    others = [thread for thread in threading.enumerate() if thread is not threading.main_thread()]
    if any(not thread.daemon and thread.is_alive() for thread in others):
        sys.exit(status)
    end_without_teardown(status)
