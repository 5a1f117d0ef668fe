"""Griffe extension: the docstrings' doctest examples (``>>>`` lines and their output) are shown as
Python console code on the API pages, not read as Markdown (where ``x["a"]["b"]`` is a link)."""

from __future__ import annotations

from typing import Any

import griffe


def fence_doctests(text: str) -> str:
    """``text`` with every run of doctest lines (a ``>>>`` line, its ``...`` continuations and
    the output up to the next blank line) inside a ```` ```pycon ```` fence."""
    out: list[str] = []
    in_example = False
    in_fence = False
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith("```"):
            in_fence = not in_fence
        if not in_fence and not in_example and stripped.startswith(">>>"):
            out.append("```pycon")
            in_example = True
        elif in_example and not stripped:
            out.append("```")
            in_example = False
        out.append(line.strip() if in_example else line)
    if in_example:
        out.append("```")
    return "\n".join(out)


class DoctestBlocks(griffe.Extension):
    def on_instance(self, *, obj: griffe.Object, **_: Any) -> None:
        if obj.docstring is not None and ">>>" in obj.docstring.value:
            obj.docstring.value = fence_doctests(obj.docstring.value)
