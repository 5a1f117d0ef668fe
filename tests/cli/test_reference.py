"""The command-line reference page is generated from the parsers: every command is on it."""

from __future__ import annotations

import pytest

from assembler.cli.reference import commands, markdown


def test_the_reference_names_every_command_and_option() -> None:
    names = [name for name, _ in commands()]
    assert {"assembler assemble", "assembler evaluate compare", "assembler lanes build"} <= set(names)
    page = markdown()
    for name, parser in commands():
        assert f"## `{name}`" in page
        for action in parser._actions:
            for flag in action.option_strings:
                assert flag in page, f"{name}: {flag} is missing from the reference"


def test_the_reference_does_not_depend_on_the_terminal_width(monkeypatch: pytest.MonkeyPatch) -> None:
    wide = markdown()
    monkeypatch.setenv("COLUMNS", "40")
    assert markdown() == wide
