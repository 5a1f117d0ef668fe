"""``assembler assess``: support assessment (Lexery U7) of run contexts, one per line."""

from __future__ import annotations

import argparse
import sys

from assembler.assess import fixed_clock
from assembler.cli.args import add_errors_flags, errors_path
from assembler.errors import UsageError
from assembler.run.assess import run_assess
from assembler.run.options import DEFAULT_CHUNK_SIZE
from assembler.run.paths import refuse_same_files

__all__ = ["assess_flags"]


def _cmd_assess(args: argparse.Namespace) -> int:
    try:
        clock = fixed_clock(args.now)
    except UsageError as exc:  # the library names its argument; the command names its flag
        raise UsageError(f"--{exc}") from None
    refuse_same_files({"input": args.inputs}, {"-o": args.output, "--errors": errors_path(args)})
    summary = run_assess(
        args.inputs,
        args.output,
        on_error=args.on_error,
        errors_path=errors_path(args),
        chunk_size=args.chunk_size,
        clock=clock,
        max_record_bytes=args.max_record_bytes,
    )
    print(summary.line(), file=sys.stderr)
    return 0


def assess_flags(assess: argparse.ArgumentParser) -> None:
    """The flags of ``assembler assess`` (its line in ``assembler --help``: :mod:`assembler.cli.commands`)."""
    assess.add_argument("inputs", nargs="+", metavar="INPUT", help="run contexts (.jsonl; - = stdin)")
    assess.add_argument("-o", "--output", default="-", help="output file (default -, standard output)")
    assess.add_argument("--now", metavar="ISO8601", help="assembled_at of every result (default: the current time)")
    add_errors_flags(assess, DEFAULT_CHUNK_SIZE)
    assess.set_defaults(run=_cmd_assess)
