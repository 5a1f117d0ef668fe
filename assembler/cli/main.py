"""The ``assembler`` command: one parser, a module per command group, thin over the Python API.

Exit status (docs/errors.md, README "Failure behaviour"): 0 success; 2 bad input or usage (one
clear line on stderr, never a traceback); 3 an evaluation threshold was violated; 1 an output could
not be written (``assembler: error: cannot write OUT: <reason>``) or memory ran out; 130 Ctrl-C
(SIGINT) and 143 SIGTERM, after the workers are ended and the temporary files removed
(``assembler: interrupted`` / ``assembler: terminated``); SIGHUP 129 and SIGQUIT 131 the same way
(``assembler: hung up`` / ``assembler: quit``).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from assembler import __version__
from assembler.cli import assemble, assess, evaluate, lanes
from assembler.cli.stopped import Terminated, interrupted, stop_on_signals, stopped_by
from assembler.errors import AssemblerError
from assembler.run.paths import shown

__all__ = ["Terminated", "main"]


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
    print(f"assembler: error: {message}", file=sys.stderr)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="assembler", description="Budgeted evidence assembly over lane dumps.")
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
        where = f" {shown(exc.filename)}" if isinstance(exc.filename, str | bytes) else ""
        _error(f"input/output failure{where}: {exc.strerror or exc}")
        return 1
    return status


if __name__ == "__main__":
    sys.exit(main())
