"""The ``assembler`` command's parser and dispatch: a module per command group, thin over the Python API.

Stdlib only, as the entry point imports it before the libraries load: the commands are listed by
name (:data:`COMMANDS`), and a run builds the parser of the command it names only, once that
command's module has loaded (with NumPy, Arrow and Polars: :func:`assembler.cli.main`). A usage
error is one line naming the help of the command used (:func:`usage_error`), exit 2.

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
import importlib
import os
import re
import sys
from collections.abc import Callable, Sequence
from typing import NamedTuple, NoReturn

from assembler import __version__
from assembler.cli.messages import ERROR, error, error_lines, lines
from assembler.cli.stopped import interrupted, stop_on_signals, stopped_by
from assembler.errors import MESSAGE_LIMIT, AssemblerError, one_line, shown_path

__all__ = ["COMMANDS", "Command", "command_named", "command_words", "main", "usage_error"]


class Command(NamedTuple):
    """A command of ``assembler``: its line in ``assembler --help`` and the module whose function
    ``<command>_flags(parser)`` adds its flags (``assembler.cli.assemble.explain_flags``)."""

    help: str
    module: str


COMMANDS = {
    "assemble": Command("assemble packages for every query of the input", "assembler.cli.assemble"),
    "explain": Command("show how one query's package was selected", "assembler.cli.assemble"),
    "convert": Command("lane dumps JSON Lines <-> Parquet (by OUTPUT's extension)", "assembler.cli.assemble"),
    "assess": Command("support assessment (Lexery U7) of run contexts, one per line", "assembler.cli.assess"),
    "lanes": Command("produce lane dumps by retrieval over a corpus (extra 'retrieval')", "assembler.cli.lanes"),
    "evaluate": Command("offline evaluation: baseline vs assembly on a labelled eval set", "assembler.cli.evaluate"),
}
"""Every command by name, in the order ``assembler --help`` lists them. A run builds the parser of
the command it names only, after loading that command's modules (:func:`main`)."""


def command_words(argv: Sequence[str]) -> list[str]:
    """The words of a command line that are not options, the command's name first (``lanes build``)."""
    return [word for word in argv if not word.startswith("-")]


def command_named(argv: Sequence[str]) -> str | None:
    """The command ``argv`` names (its first word that is not an option), or None (``--help``,
    ``--version``, nothing, or a word that is no command: the parser says so)."""
    words = command_words(argv)
    return words[0] if words and words[0] in COMMANDS else None


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


_PROG = "_usage_prog"
"""The namespace attribute naming the (sub)command a command line used: each parser sets it as a
default, and the deepest one parsed wins (argparse copies a subcommand's namespace over its
parent's)."""


class _Parser(argparse.ArgumentParser):
    """argparse's parser, whose usage errors are one bounded line with control characters escaped
    (argparse echoes an unrecognized argument as given), ending with where the help is."""

    def error(self, message: str) -> NoReturn:
        usage_error(self.prog, message)


def usage_error(prog: str, message: str) -> NoReturn:
    """``assembler: error: <message> (see `<prog> --help`)`` on one line, exit status 2. The message
    is escaped and shortened first, so that the hint is never cut off."""
    hint = f" (see `{prog} --help`)"
    room = MESSAGE_LIMIT - len(ERROR) - len(hint)
    text = one_line(message, room)
    if len(text) > room:  # shortened: its "…(N more)" needs room too (N one digit longer at most)
        text = one_line(message, room - (len(text) - room) - 1)
    lines([ERROR + text + hint])
    sys.exit(2)


def _parser(command: str | None = None, *, every: bool = False) -> argparse.ArgumentParser:
    """The ``assembler`` parser: every command listed, the flags of ``command`` only (or of every
    command with ``every``: the reference page, the tests)."""
    parser = _Parser(prog="assembler", description="Budgeted evidence assembly over lane dumps.")
    parser.add_argument("--version", action="version", version=f"assembler {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, help="each has its own --help")
    for name, entry in COMMANDS.items():
        child = commands.add_parser(name, help=entry.help)
        if every or name == command:
            module = importlib.import_module(entry.module)
            flags: Callable[[argparse.ArgumentParser], None] = getattr(module, f"{name}_flags")
            flags(child)
    _name_the_command(parser)
    return parser


def _name_the_command(parser: argparse.ArgumentParser) -> None:
    """Give every parser, subcommands too, its ``prog`` as the default of :data:`_PROG`."""
    parser.set_defaults(**{_PROG: parser.prog})
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in action.choices.values():
                _name_the_command(child)


def _parse(argv: Sequence[str]) -> argparse.Namespace:
    """The command line parsed, or a usage error (exit 2) naming the command it used."""
    parser = _parser(command_named(argv))
    args, extra = parser.parse_known_args(argv)
    if extra:
        usage_error(getattr(args, _PROG, parser.prog), f"unrecognized arguments: {' '.join(extra)}")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``assembler`` command; returns the exit status."""
    try:
        args = _parse(sys.argv[1:] if argv is None else argv)  # a Ctrl-C while the parser is built is handled too
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
