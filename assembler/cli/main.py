"""The ``assembler`` command: one parser, a module per command group, thin over the Python API.

Exit status (docs/errors.md): 0 success; 2 bad input or usage (one clear line on stderr, never a
traceback); 3 an evaluation threshold was violated; 1 an output could not be written.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from assembler import __version__
from assembler.cli import assemble, assess, evaluate, lanes
from assembler.errors import AssemblerError

__all__ = ["main"]


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
    args = _parser().parse_args(argv)
    try:
        status: int = args.run(args)
    except AssemblerError as exc:
        print(f"assembler: error: {exc}", file=sys.stderr)
        return exc.exit_status
    except BrokenPipeError:
        return 0
    return status


if __name__ == "__main__":
    sys.exit(main())
