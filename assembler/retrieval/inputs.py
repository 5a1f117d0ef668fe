"""The retrieval inputs (JSON Lines, see ``docs/retrieval.md``): corpus, facts, summaries, cases, contexts."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from assembler.errors import UsageError
from assembler.run.io import read_input

__all__ = [
    "Case",
    "CorpusError",
    "Fact",
    "Locator",
    "Paragraph",
    "Summary",
    "read_cases",
    "read_contexts",
    "read_corpus",
    "read_facts",
    "read_summaries",
]

Locator = tuple[str, str]


class CorpusError(UsageError):
    """A malformed retrieval input line: ``file:line: field: rule``."""


@dataclass(frozen=True)
class Paragraph:
    """One paragraph of a source; ``title`` (if any) is indexed with the text and names the source."""

    context: str
    source: str
    paragraph: int
    text: str
    title: str | None = None
    section: str | None = None
    locator: Locator | None = None

    @property
    def index_text(self) -> str:
        """The text both retrieval lanes index: title line, then the paragraph."""
        return f"{self.title}\n{self.text}" if self.title else self.text

    @property
    def name(self) -> str:
        """What the entity-mention graph links to: the title, else the source."""
        return self.title or self.source


@dataclass(frozen=True)
class Fact:
    """One assertion of a labelled triple, optionally attributed to a paragraph."""

    context: str
    subject: str
    label: str
    object: str
    weight: float = 1.0
    source: str | None = None
    paragraph: int | None = None


@dataclass(frozen=True)
class Summary:
    """One community summary (the community lane's document)."""

    context: str
    community: str
    text: str
    paragraph: int = 0
    level: int | None = None
    members: tuple[tuple[str, float], ...] = ()


@dataclass(frozen=True)
class Case:
    """One query: the eval case's id, query text and cues, and the context it runs against."""

    case_id: str
    query: str
    cues: tuple[str, ...] = ()
    context: str | None = None


def _lines(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    try:
        text = read_input(path).decode("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise CorpusError(f"cannot read {path}: {exc}") from None
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            value = json.loads(line)
        except json.JSONDecodeError as exc:
            raise CorpusError(f"{path}:{number}: not JSON: {exc}") from None
        if not isinstance(value, dict):
            raise CorpusError(f"{path}:{number}: must be a JSON object")
        yield number, value


class _Line:
    """Typed field access on one parsed line, with ``file:line: field: rule`` errors."""

    def __init__(self, path: Path, number: int, value: dict[str, Any], known: set[str]) -> None:
        self.where = f"{path}:{number}"
        self.value = value
        unknown = sorted(set(value) - known)
        if unknown:
            raise CorpusError(f"{self.where}: unknown key {unknown[0]!r}")

    def fail(self, key: str, rule: str) -> CorpusError:
        return CorpusError(f"{self.where}: {key}: {rule}")

    def string(self, key: str, *, required: bool = True, nonblank: bool = True) -> str | None:
        item = self.value.get(key)
        if item is None:
            if required:
                raise self.fail(key, "is required")
            return None
        if not isinstance(item, str):
            raise self.fail(key, "must be a string")
        if nonblank and not item.strip():
            raise self.fail(key, "must not be blank")
        return item

    def req(self, key: str, *, nonblank: bool = True) -> str:
        item = self.string(key, nonblank=nonblank)
        assert item is not None
        return item

    def uint(self, key: str, *, required: bool = True, default: int | None = None) -> int | None:
        item = self.value.get(key)
        if item is None:
            if required:
                raise self.fail(key, "is required")
            return default
        if isinstance(item, bool) or not isinstance(item, int) or not 0 <= item < 2**32:
            raise self.fail(key, "must be an integer from 0 to 4294967295")
        return item

    def number(self, key: str, default: float) -> float:
        item = self.value.get(key)
        if item is None:
            return default
        if isinstance(item, bool) or not isinstance(item, (int, float)):
            raise self.fail(key, "must be a number")
        return float(item)

    def context(self, default: str) -> str:
        return self.string("context", required=False) or default


def read_corpus(path: Path, default_context: str) -> list[Paragraph]:
    """Paragraphs in file order; (context, source, paragraph) must be unique."""
    out: list[Paragraph] = []
    seen: set[tuple[str, str, int]] = set()
    known = {"context", "source", "paragraph", "text", "title", "section", "locator"}
    for number, value in _lines(path):
        line = _Line(path, number, value, known)
        locator = value.get("locator")
        if locator is not None and not (
            isinstance(locator, dict)
            and set(locator) == {"kind", "value"}
            and all(isinstance(v, str) for v in locator.values())
        ):
            raise line.fail("locator", 'must be null or {"kind": string, "value": string}')
        paragraph = Paragraph(
            context=line.context(default_context),
            source=line.req("source"),
            paragraph=line.uint("paragraph") or 0,
            text=line.req("text", nonblank=False),
            title=line.string("title", required=False),
            section=line.string("section", required=False, nonblank=False),
            locator=(locator["kind"], locator["value"]) if locator else None,
        )
        key = (paragraph.context, paragraph.source, paragraph.paragraph)
        if key in seen:
            raise line.fail("paragraph", f"duplicate paragraph {paragraph.paragraph} of source {paragraph.source!r}")
        seen.add(key)
        out.append(paragraph)
    if not out:
        raise CorpusError(f"{path}: no paragraphs")
    return out


def read_facts(path: Path, default_context: str) -> list[Fact]:
    """Triple assertions in file order."""
    out: list[Fact] = []
    known = {"context", "subject", "label", "object", "weight", "source", "paragraph"}
    for number, value in _lines(path):
        line = _Line(path, number, value, known)
        source = line.string("source", required=False)
        paragraph = line.uint("paragraph", required=False)
        if paragraph is not None and source is None:
            raise line.fail("paragraph", "needs a source")
        out.append(
            Fact(
                context=line.context(default_context),
                subject=line.req("subject"),
                label=line.req("label"),
                object=line.req("object"),
                weight=line.number("weight", 1.0),
                source=source,
                paragraph=paragraph,
            )
        )
    return out


def read_summaries(path: Path, default_context: str) -> list[Summary]:
    """Community summaries in file order; (context, community) must be unique."""
    out: list[Summary] = []
    seen: set[tuple[str, str]] = set()
    known = {"context", "community", "text", "paragraph", "level", "members"}
    for number, value in _lines(path):
        line = _Line(path, number, value, known)
        members = value.get("members") or []
        if not isinstance(members, list) or not all(
            isinstance(m, dict)
            and isinstance(m.get("name"), str)
            and isinstance(m.get("strength"), (int, float))
            and not isinstance(m.get("strength"), bool)
            for m in members
        ):
            raise line.fail("members", 'must be a list of {"name": string, "strength": number}')
        summary = Summary(
            context=line.context(default_context),
            community=line.req("community"),
            text=line.req("text"),
            paragraph=line.uint("paragraph", required=False, default=0) or 0,
            level=line.uint("level", required=False),
            members=tuple((m["name"], float(m["strength"])) for m in members),
        )
        if (summary.context, summary.community) in seen:
            raise line.fail("community", f"duplicate community {summary.community!r}")
        seen.add((summary.context, summary.community))
        out.append(summary)
    return out


def read_contexts(path: Path) -> dict[str, str]:
    """``case_id -> context`` from ``{"case_id", "context"}`` lines."""
    out: dict[str, str] = {}
    for number, value in _lines(path):
        line = _Line(path, number, value, {"case_id", "context"})
        out[line.req("case_id")] = line.req("context")
    return out


def read_cases(path: Path) -> list[Case]:
    """The cases of a ``taguru_eval: 1`` file (header line skipped; full validation is the harness's)."""
    cases: list[Case] = []
    seen: set[str] = set()
    header = True
    for number, value in _lines(path):
        if header:
            header = False
            if value.get("taguru_eval") != 1:
                raise CorpusError(f"{path}:{number}: not a taguru_eval: 1 header")
            continue
        case_id, query, cues = value.get("case_id"), value.get("query"), value.get("cues") or []
        if not isinstance(case_id, str) or not case_id.strip():
            raise CorpusError(f"{path}:{number}: case_id: must be a non-blank string")
        if not isinstance(query, str) or not query.strip():
            raise CorpusError(f"{path}:{number}: case {case_id!r}: query must be a non-blank string")
        if not isinstance(cues, list) or not all(isinstance(c, str) for c in cues):
            raise CorpusError(f"{path}:{number}: case {case_id!r}: cues must be a list of strings")
        if case_id in seen:
            raise CorpusError(f"{path}:{number}: duplicate case_id {case_id!r}")
        seen.add(case_id)
        cases.append(Case(case_id, query, tuple(cues)))
    if not cases:
        raise CorpusError(f"{path}: no cases")
    return cases
