"""Usage errors and help: a usage error is one line naming the help of the command used (exit 2);
every argument of every parser has help text and every usage line starts with its command; the
parser of the command named is the only one built, and the top level loads no library."""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from assembler.cli import main
from assembler.cli.commands import COMMANDS, _parser
from assembler.errors import MESSAGE_LIMIT

ROOT = Path(__file__).resolve().parent.parent.parent
CONFORMANCE = ROOT / "data" / "conformance" / "lanes.jsonl"
COMMAND_NAMES = ", ".join(repr(name) for name in COMMANDS)


def every_parser() -> list[tuple[str, argparse.ArgumentParser]]:
    """``("assembler", top level)`` and every command and subcommand as ``("assembler evaluate compare", parser)``."""
    found: list[tuple[str, argparse.ArgumentParser]] = []

    def walk(name: str, parser: argparse.ArgumentParser) -> None:
        found.append((name, parser))
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for child_name, child in action.choices.items():
                    walk(f"{name} {child_name}", child)

    walk("assembler", _parser(every=True))
    return found


def usage_error(capsys: pytest.CaptureFixture[str], argv: list[str]) -> str:
    """What ``assembler ARGV`` prints on stderr, asserting exit status 2 and nothing on stdout."""
    with pytest.raises(SystemExit) as stopped:
        main(argv)
    assert stopped.value.code == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    return captured.err


@pytest.mark.parametrize(
    ("argv", "message", "command"),
    [
        (["assemble", "--max-items", "-1"], "argument --max-items: must be a non-negative integer, got -1", "assemble"),
        (["assemble", str(CONFORMANCE), "--bogus"], "unrecognized arguments: --bogus", "assemble"),
        (["convert", str(CONFORMANCE)], "the following arguments are required: -o/--output", "convert"),
        (["evaluate", "compare", "base.json"], "the following arguments are required: HEAD.json", "evaluate compare"),
        (
            ["evaluate", "compare", "a", "b", "--seed", "x"],
            "argument --seed: needs a non-negative integer, got 'x'",
            "evaluate compare",
        ),
        (
            ["evaluate", "tune", "--folds", "1"],
            "argument --folds: needs an integer of at least 2, got 1",
            "evaluate tune",
        ),
        (["evaluate", "--out", "a", "--out", "b"], "--out given twice", "evaluate"),
        (
            ["lanes", "from-runs", "--corpus", "c.jsonl"],
            "the following arguments are required: --run, --queries, -o/--output",
            "lanes from-runs",
        ),
        (["lanes"], "the following arguments are required: lanes_command", "lanes"),
        (["bogus"], f"argument command: invalid choice: 'bogus' (choose from {COMMAND_NAMES})", ""),
        ([], "the following arguments are required: command", ""),
    ],
)
def test_a_usage_error_is_one_line_naming_the_help_of_the_command_used(
    capsys: pytest.CaptureFixture[str], argv: list[str], message: str, command: str
) -> None:
    prog = f"assembler {command}".rstrip()
    assert usage_error(capsys, argv) == f"assembler: error: {message} (see `{prog} --help`)\n"


def test_a_usage_error_of_the_installed_command_is_one_line_and_exit_2() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "assembler", "assemble", "--max-items", "-1"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        timeout=120,
    )
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == (
        "assembler: error: argument --max-items: must be a non-negative integer, got -1 "
        "(see `assembler assemble --help`)\n"
    )


def test_a_huge_unrecognized_argument_is_escaped_and_shortened_before_the_hint(
    capsys: pytest.CaptureFixture[str],
) -> None:
    err = usage_error(capsys, ["assemble", "--bogus\x1b[2J\n" + "x" * 100_000])
    assert err.count("\n") == 1 and "\x1b" not in err
    assert err.startswith("assembler: error: unrecognized arguments: --bogus\\x1b[2J\\x0axxx")
    assert err.endswith("more) (see `assembler assemble --help`)\n")
    assert len(err) <= MESSAGE_LIMIT + 1


@pytest.mark.parametrize(("name", "parser"), every_parser(), ids=[name for name, _ in every_parser()])
def test_every_argument_of_every_parser_has_help_text(name: str, parser: argparse.ArgumentParser) -> None:
    assert [action.dest for action in parser._actions if not action.help] == []


@pytest.mark.parametrize(("name", "parser"), every_parser(), ids=[name for name, _ in every_parser()])
def test_every_usage_starts_with_its_command(name: str, parser: argparse.ArgumentParser) -> None:
    """The usage line of ``--help`` (and the hint of a usage error) names the command as typed."""
    assert parser.prog == name
    usage = parser.format_usage()
    assert usage.startswith(f"usage: {name} ")
    for line in usage.splitlines()[1:]:  # a second usage of its own (evaluate), or a wrapped one
        assert line.startswith(" ") and (line.strip().startswith(name) or name not in line)


def test_the_help_of_evaluate_compare_shows_its_usage_and_both_artifacts(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as stopped:
        main(["evaluate", "compare", "--help"])
    assert stopped.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: assembler evaluate compare [-h] ")
    positionals = out.split("positional arguments:\n")[1].split("\n\n")[0].splitlines()
    assert [line.split()[0] for line in positionals] == ["BASE.json", "HEAD.json"]
    assert all(len(line.split()) > 1 for line in positionals)  # each with its help text


LOADED = """
import json, sys
from assembler.cli import main
try:
    status = main({argv!r})
except SystemExit as stopped:
    status = stopped.code
loaded = [name for name in ("numpy", "pyarrow", "polars", *{modules!r}) if name in sys.modules]
print(json.dumps([status, loaded]), file=sys.stderr)
"""


def loaded_after(argv: list[str], modules: tuple[str, ...] = ()) -> tuple[str, int, list[str]]:
    """``assembler ARGV`` in a process of its own: (stdout, exit status, which of NumPy, Arrow,
    Polars and ``modules`` were loaded)."""
    done = subprocess.run(
        [sys.executable, "-c", LOADED.format(argv=argv, modules=modules)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "300"},  # help lines unwrapped
        timeout=120,
        check=True,
    )
    status, loaded = json.loads(done.stderr.splitlines()[-1])
    return done.stdout, status, loaded


@pytest.mark.parametrize(("argv", "status"), [(["--help"], 0), (["--version"], 0), (["bogus"], 2), ([], 2)])
def test_the_top_level_loads_no_library(argv: list[str], status: int) -> None:
    out, exit_status, loaded = loaded_after(argv)
    assert (exit_status, loaded) == (status, [])
    if argv == ["--help"]:  # every command, with its line
        rows = [found.groups() for line in out.splitlines() if (found := re.fullmatch(r"    (\S+) +(.+)", line))]
        assert dict(rows) == {name: command.help for name, command in COMMANDS.items()}


def test_a_command_builds_and_loads_its_own_parser_only(tmp_path: Path) -> None:
    others = ("assembler.cli.evaluate", "assembler.cli.lanes", "assembler.cli.assess", "assembler.evaluate")
    _, status, loaded = loaded_after(["assemble", str(CONFORMANCE), "-o", str(tmp_path / "out.jsonl"), "-q"], others)
    assert (status, loaded) == (0, ["numpy", "pyarrow", "polars"])
