"""Argument types shared by the command lines (``assembler``, ``assembler evaluate``, the rerank flags)."""

from __future__ import annotations

import argparse
from collections.abc import Callable

__all__ = ["integer_at_least"]


def integer_at_least(minimum: int, requirement: str) -> Callable[[str], int]:
    """An argparse type: an integer of at least ``minimum``; a bad value is refused with
    ``"<requirement>, got <value>"`` (each command keeps its own wording)."""

    def convert(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{requirement}, got {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"{requirement}, got {value}")
        return value

    return convert
