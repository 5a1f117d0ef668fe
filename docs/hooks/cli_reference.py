"""MkDocs hook: fills docs/reference/cli.md with the help of every command, from the parsers."""

from __future__ import annotations

from typing import Any

MARKER = "<!-- commands: generated when the site is built -->"


def on_page_markdown(markdown: str, page: Any, **_: Any) -> str:
    if MARKER not in markdown:
        return markdown
    from assembler.cli.reference import markdown as reference

    return markdown.replace(MARKER, reference())
