"""What the command checks and repairs before it loads Polars: the standard streams, the
environment variable Polars would panic on, and the process limits it cannot load under.

Stdlib only (with :mod:`assembler.errors` and :mod:`assembler.cli.messages`): it runs before the
heavy libraries load, where their failures would be tracebacks, Rust panics or a silent exit.

* **Closed standard streams** (``<&-``, ``>&-``, ``2>&-``): each closed descriptor 0, 1, 2 is
  opened on ``/dev/null`` first, so that no file the command opens later lands on it (an output
  file on descriptor 1 would receive whatever is printed). Standard error goes to ``/dev/null``:
  the command does its work and exits with its status, its messages unseen. Standard input and
  output are opened the other way round (input write-only, output read-only), so that using
  them fails as a closed descriptor does, ``Bad file descriptor``: ``-o -`` is then
  ``cannot write standard output: Bad file descriptor``, exit 1, never a silent success.
* **Terminal text in a narrow encoding** (``PYTHONIOENCODING=ascii``, a Latin-1 locale): what
  the command prints as text (``explain``, summaries, messages) writes a character the encoding
  lacks as a ``\\uXXXX`` escape instead of failing. Packages and every other output file are
  UTF-8 bytes whatever the encoding.
* **POLARS_MAX_THREADS** must be a whole number from 1 to :data:`MAX_POLARS_THREADS`: Polars
  panics on ``0``, ignores anything else it cannot read with a warning, and tries to start as many
  threads as a huge number says. Refused as a usage error (exit 2) naming the variable.
* **Limits**: fewer than :data:`MIN_FILE_DESCRIPTORS` descriptors (``ulimit -n``; the soft limit
  is raised that far when the hard limit allows) or an address-space limit (``ulimit -v``) under
  :data:`MIN_ADDRESS_SPACE` (1 GiB) are refused with exit 1 before anything loads: under them
  Polars, Arrow or NumPy fail to load or panic, some by ending the process from C. A failure
  while loading them is one line too (:func:`load_libraries`), exit 1.
"""

from __future__ import annotations

import codecs
import contextlib
import errno
import importlib
import io
import os
import re
import sys
import warnings
from collections.abc import Mapping

from assembler.cli.messages import error
from assembler.errors import shown
from assembler.run.signals import held_signals

__all__ = [
    "LIBRARIES",
    "MAX_POLARS_THREADS",
    "MIN_ADDRESS_SPACE",
    "MIN_FILE_DESCRIPTORS",
    "load_libraries",
    "prepare_process",
]

MAX_POLARS_THREADS = 1024
"""The most Polars threads per process ``POLARS_MAX_THREADS`` may ask for: more than any machine
the command runs on has cores; a value of 100,000 had Polars start threads for minutes."""

MIN_FILE_DESCRIPTORS = 32
"""The fewest open files (``ulimit -n``) the command runs with: one process needs about 8 (Polars'
runtime, the input, the output and its temporary file), a run with two workers about 24."""

MIN_ADDRESS_SPACE = 2**30
"""The smallest address-space limit (``ulimit -v``) the command starts under. Measured on two
CPUs: Polars, Arrow and NumPy need about 600 MiB to load, and under 1 GiB about half the runs
that loaded were still ended by Polars' allocator (a thread's stack could not be mapped) with no
message; under 512 MiB some ended from C while loading (OpenBLAS, jemalloc). More CPUs need more
(a thread pool per library)."""

LIBRARIES = (("NumPy", "numpy"), ("Arrow", "pyarrow"), ("Polars", "polars"))
"""What :func:`load_libraries` loads, by the name its messages give it, before the command's own
modules (which build tables with them as they load)."""

_THREADS = re.compile(r"\+?[0-9]+")  # how Polars reads the number (Rust's usize), blanks trimmed
_STREAMS = ((0, os.O_WRONLY), (1, os.O_RDONLY), (2, os.O_WRONLY))  # fd, how /dev/null stands in


def _closed(fd: int) -> bool:
    try:
        os.fstat(fd)
    except OSError as exc:
        return exc.errno == errno.EBADF
    return False


def _standard_streams() -> None:
    """Open ``/dev/null`` on each closed descriptor 0, 1, 2 and give Python a stream for it."""
    for fd, flags in _STREAMS:
        if not _closed(fd):
            continue
        try:
            null = os.open(os.devnull, flags)
        except OSError:
            continue
        if null != fd:
            os.dup2(null, fd, inheritable=True)
            os.close(null)
        else:
            os.set_inheritable(fd, True)
    if sys.stdin is None:
        sys.stdin = io.TextIOWrapper(io.BufferedReader(io.FileIO(0, "r", closefd=False)), encoding="utf-8")
    if sys.stdout is None:
        sys.stdout = io.TextIOWrapper(
            io.BufferedWriter(io.FileIO(1, "w", closefd=False)), encoding="utf-8", errors="backslashreplace"
        )
    if sys.stderr is None:
        sys.stderr = io.TextIOWrapper(
            io.BufferedWriter(io.FileIO(2, "w", closefd=False)),
            encoding="utf-8",
            errors="backslashreplace",
            line_buffering=True,
        )


def _terminal_text() -> None:
    """Standard output and error write what their encoding lacks as escapes, never failing."""
    for stream in (sys.stdout, sys.stderr):
        if not isinstance(stream, io.TextIOWrapper) or stream.errors != "strict":
            continue
        try:
            narrow = codecs.lookup(stream.encoding).name != "utf-8"
        except LookupError:
            narrow = True
        if narrow:
            stream.reconfigure(errors="backslashreplace")


def polars_threads_problem(environ: Mapping[str, str]) -> str | None:
    """Why ``POLARS_MAX_THREADS`` cannot be used, or None (unset, or a whole number 1..=1024).

    >>> polars_threads_problem({"POLARS_MAX_THREADS": "0"})
    "POLARS_MAX_THREADS must be a whole number of threads from 1 to 1024, got '0'"
    >>> polars_threads_problem({"POLARS_MAX_THREADS": " +2"}) is None, polars_threads_problem({}) is None
    (True, True)
    """
    value = environ.get("POLARS_MAX_THREADS")
    if value is None:
        return None
    text = value.strip()
    if _THREADS.fullmatch(text) is not None and 1 <= int(text) <= MAX_POLARS_THREADS:
        return None
    return f"POLARS_MAX_THREADS must be a whole number of threads from 1 to {MAX_POLARS_THREADS}, got '{shown(value)}'"


def _limits_problem() -> str | None:
    """Why the process limits cannot run the command, or None (raising a low soft ``ulimit -n``
    to :data:`MIN_FILE_DESCRIPTORS` when the hard limit allows)."""
    try:
        import resource
    except ImportError:  # not a POSIX system: no limits to read
        return None
    infinity = resource.RLIM_INFINITY
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != infinity and soft < MIN_FILE_DESCRIPTORS:
        if hard == infinity or hard >= MIN_FILE_DESCRIPTORS:
            with contextlib.suppress(OSError, ValueError):
                resource.setrlimit(resource.RLIMIT_NOFILE, (MIN_FILE_DESCRIPTORS, hard))
            soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
        if soft != infinity and soft < MIN_FILE_DESCRIPTORS:
            return (
                f"too few file descriptors: the limit (ulimit -n) is {soft}; "
                f"the command needs at least {MIN_FILE_DESCRIPTORS}"
            )
    space = resource.getrlimit(resource.RLIMIT_AS)[0]
    if space != infinity and space < MIN_ADDRESS_SPACE:
        return f"cannot load Polars: out of memory: {_address_space(space)}, the command needs at least 1 GiB"
    return None


def _address_space(limit: int) -> str:
    return f"the address-space limit (ulimit -v) is {limit >> 20} MiB"


def _address_space_limit() -> int | None:
    try:
        import resource
    except ImportError:
        return None
    soft = resource.getrlimit(resource.RLIMIT_AS)[0]
    return None if soft == resource.RLIM_INFINITY else soft


def prepare_process() -> int | None:
    """Repair the standard streams, then check the environment and the limits; the exit status
    when the command cannot run (its one line printed), else None."""
    _standard_streams()
    _terminal_text()
    problem = polars_threads_problem(os.environ)
    if problem is not None:
        error(problem)
        return 2
    problem = _limits_problem()
    if problem is not None:
        error(problem)
        return 1
    return None


def _load_failure(name: str, exc: BaseException) -> str:
    """The message of a library that failed to load, in the environment's terms where it can tell."""
    if isinstance(exc, MemoryError):
        return f"cannot load {name}: out of memory"
    if isinstance(exc, OSError) and exc.strerror:
        return f"cannot load {name}: {exc.strerror}"
    limit = _address_space_limit()
    if limit is not None:  # a shared library that could not be mapped shows as anything at all
        return f"cannot load {name}: out of memory: {_address_space(limit)}"
    return f"cannot load {name}: {type(exc).__name__}: {shown(str(exc))} (is the installation complete?)"


def load_libraries(command: str) -> int | None:
    """Load NumPy, Arrow, Polars and the module of the command (``assembler.cli.assemble``); on a
    failure print one line and return exit status 1.

    The warnings they give while loading are held back and shown only when all of them loaded
    (Polars warns that its binary is missing when the address space is too small to map it, then
    fails). So are Ctrl-C and the other stopping signals (:func:`~assembler.run.signals.held_signals`),
    delivered to the caller's handlers once the loading ends: raised in the middle of an import, the
    interruption can be "ignored" with a traceback inside the import system, or come out as the
    library's own ``ImportError`` (NumPy's), which would read as a broken installation.
    """
    with held_signals(), warnings.catch_warnings(record=True) as held:
        warnings.simplefilter("always")
        for name, module in (*LIBRARIES, ("the command", command)):
            try:
                importlib.import_module(module)
            except (KeyboardInterrupt, SystemExit):
                raise
            except BaseException as exc:  # also a Rust panic, which is no Exception
                error(_load_failure(name, exc))
                return 1
    for warning in held:
        warnings.showwarning(warning.message, warning.category, warning.filename, warning.lineno)
    return None
