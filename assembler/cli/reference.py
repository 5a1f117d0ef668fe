"""The command-line reference page, generated from the parsers themselves so it cannot drift.

``docs/hooks/cli_reference.py`` puts :func:`markdown` into ``docs/reference/cli.md`` when the site
is built; ``tests/cli/test_reference.py`` checks that it names every command.
"""

from __future__ import annotations

import argparse
import os

from assembler.cli.commands import _parser

__all__ = ["commands", "markdown"]

WIDTH = "100"
"""The help texts' line width: fixed, so the page is the same on every machine."""


def _subcommands(parser: argparse.ArgumentParser) -> list[tuple[str, argparse.ArgumentParser]]:
    found: list[tuple[str, argparse.ArgumentParser]] = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, child in action.choices.items():
                found.append((name, child))
    return found


def commands() -> list[tuple[str, argparse.ArgumentParser]]:
    """Every command and sub-command as ``("assembler evaluate compare", parser)``, in the order
    the parsers list them."""
    found: list[tuple[str, argparse.ArgumentParser]] = []

    def walk(prefix: str, parser: argparse.ArgumentParser) -> None:
        for name, child in _subcommands(parser):
            found.append((f"{prefix} {name}", child))
            walk(f"{prefix} {name}", child)

    walk("assembler", _parser(every=True))
    return found


def markdown() -> str:
    """One section per command: its usage and options exactly as ``--help`` prints them."""
    previous = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = WIDTH
    try:
        sections = []
        for name, parser in commands():
            parser.prog = name
            sections.append(f"## `{name}`\n\n```text\n{parser.format_help().rstrip()}\n```\n")
        return "\n".join(sections)
    finally:
        if previous is None:
            os.environ.pop("COLUMNS", None)
        else:
            os.environ["COLUMNS"] = previous
