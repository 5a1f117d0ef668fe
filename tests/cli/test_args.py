"""The shared argparse integer type: the bound is inclusive and the command's wording is kept."""

from __future__ import annotations

import argparse

import pytest

from assembler.cli.args import integer_at_least


def test_the_minimum_itself_is_accepted() -> None:
    assert integer_at_least(1, "needs a positive integer")("1") == 1
    assert integer_at_least(0, "must be a non-negative integer")("0") == 0


@pytest.mark.parametrize(("text", "shown"), [("0", "0"), ("-3", "-3"), ("abc", "'abc'"), ("1.5", "'1.5'")])
def test_a_refusal_names_the_value_in_the_commands_wording(text: str, shown: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError, match=f"^needs a positive integer, got {shown}$"):
        integer_at_least(1, "needs a positive integer")(text)
