"""Griffe extension: docstrings written for Python's own tools read well as Markdown on the API pages.

Doctest examples (``>>>`` lines and their output) are shown as Python console code, not read as
Markdown (where ``x["a"]["b"]`` is a link); Sphinx roles (``:func:`~assembler.pipeline.assemble```)
become code spans (``assemble``)."""

from __future__ import annotations

import re
from typing import Any

import griffe

_ROLE = re.compile(r":(?:func|class|meth|attr|data|mod|exc|obj|const):`(~?)([^`]+)`")


def plain_roles(text: str) -> str:
    """Sphinx roles as code spans: ``:func:`~a.b.c``` is ```c```, ``:func:`a.b.c``` is ```a.b.c```."""
    return _ROLE.sub(lambda m: f"`{m.group(2).rsplit('.', 1)[-1] if m.group(1) else m.group(2)}`", text)


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
        if obj.docstring is not None:
            obj.docstring.value = plain_roles(fence_doctests(obj.docstring.value))
