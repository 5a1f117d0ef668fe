"""The ``assembler`` command's parser and dispatch: a module per command group, thin over the Python API.

(Not named ``main``: a submodule of that name would replace the package's :func:`assembler.cli.main`
function as an attribute once imported.)

Exit status (docs/errors.md): 0 success; 2 bad input or usage (one
clear line on stderr, never a traceback); 3 an evaluation threshold was violated; 1 an output could
not be written (``assembler: error: cannot write OUT: <reason>``) or memory ran out; 130 Ctrl-C
(SIGINT) and 143 SIGTERM, after the workers are ended and the temporary files removed
(``assembler: interrupted`` / ``assembler: terminated``); SIGHUP 129 and SIGQUIT 131 the same way
(``assembler: hung up`` / ``assembler: quit``).
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from collections.abc import Sequence
from typing import NoReturn

from assembler import __version__
from assembler.cli import assemble, assess, evaluate, lanes
from assembler.cli.messages import error, error_lines
from assembler.cli.stopped import interrupted, stop_on_signals, stopped_by
from assembler.errors import AssemblerError, one_line, shown_path

__all__ = ["main"]


def _silence_stdout() -> None:
    """After standard output failed (a closed pipe, a full disk): point it at /dev/null so that
    the interpreter's final flush does not fail again with a traceback."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (AttributeError, OSError, ValueError):
        pass


def _error(message: str) -> None:
    """Print ``message`` as one ``assembler: error:`` line: control characters (a newline too)
    escaped and the line bounded (:mod:`assembler.cli.messages`), whatever the caller did."""
    error(message)


class _Parser(argparse.ArgumentParser):
    """argparse's parser, whose usage errors are one bounded line with control characters escaped
    (argparse echoes an unrecognized argument as given)."""

    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        self.exit(2, f"{self.prog}: error: {one_line(message)}\n")


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="assembler", description="Budgeted evidence assembly over lane dumps.")
    parser.add_argument("--version", action="version", version=f"assembler {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)
    assemble.register(commands)  # assemble, explain, convert
    assess.register(commands)
    lanes.register(commands)  # lanes build
    evaluate.register(commands)  # evaluate (+ compare, sweep)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``assembler`` command; returns the exit status."""
    try:
        args = _parser().parse_args(argv)  # a Ctrl-C while the parser is built is handled too
        with stop_on_signals():
            status: int = args.run(args)
            try:
                sys.stdout.flush()
            except BrokenPipeError:
                raise
            except OSError as exc:
                _silence_stdout()
                _error(f"cannot write standard output: {exc.strerror or exc}")
                return 1
    except AssemblerError as exc:
        lines = getattr(exc, "lines", None)
        if isinstance(lines, list):  # an EvaluateError: several self-contained lines
            error_lines(lines)
        else:
            _error(str(exc))
        return exc.exit_status
    except BrokenPipeError:
        _silence_stdout()
        return 0
    except KeyboardInterrupt as exc:
        return interrupted(stopped_by(exc))
    except MemoryError:
        _error("out of memory")
        return 1
    except OSError as exc:  # an environment failure no command turned into a message of its own
        where = f" {shown_path(exc.filename)}" if isinstance(exc.filename, str | bytes) else ""
        _error(f"input/output failure{where}: {exc.strerror or exc}")
        return 1
    except BaseException as exc:
        if type(exc).__name__ != "PanicException":  # a Rust panic in Polars, which is no Exception
            raise
        _error(_panic(exc))
        return 1
    return status


_OS_ERROR = re.compile(r"\bOs \{ code: ([0-9]+)")


def _panic(exc: BaseException) -> str:
    """A Rust panic of Polars in the environment's terms: its operating-system error when it
    carries one (``Too many open files`` when ``ulimit -n`` ran out), else a fixed sentence. The
    panic's own text is not echoed: it may hold a value of the data."""
    found = _OS_ERROR.search(str(exc))
    if found is not None:
        return f"Polars failed: {os.strerror(int(found.group(1)))}"
    return "Polars failed: an internal error (a panic)"


if __name__ == "__main__":
    sys.exit(main())
