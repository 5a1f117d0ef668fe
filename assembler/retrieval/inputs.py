"""The retrieval inputs (JSON Lines, see ``docs/retrieval.md``): corpus, facts, summaries, cases, contexts."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from assembler.contract.jsoninput import read_json
from assembler.contract.request import MAX_INPUT_ITEMS
from assembler.contract.text import is_blank
from assembler.contract.wire import ShapeError, check_number, key_path
from assembler.errors import UsageError
from assembler.errors import shown as shown_text
from assembler.run.io import read_input
from assembler.run.paths import shown

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
    """``(line number, object)`` of every non-blank line, through the strict JSON reader
    (:func:`~assembler.contract.jsoninput.read_json`: the same rules as every other input)."""
    name = shown(path)
    try:
        data = read_input(path)
    except OSError as exc:
        raise CorpusError(f"cannot read {name}: {exc.strerror or exc}") from None
    for number, raw in enumerate(data.split(b"\n"), start=1):
        raw = raw.rstrip(b"\r")
        if not raw.strip():
            continue
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise CorpusError(f"{name}:{number}: invalid UTF-8 at byte {exc.start} of the line") from None
        try:
            value = read_json(line)
        except ShapeError as exc:
            field = f"{exc.path}: " if exc.path else ""
            raise CorpusError(f"{name}:{number}: {field}{exc.rule}") from None
        if not isinstance(value, dict):
            raise CorpusError(f"{name}:{number}: must be a JSON object, got {_kind(value)}")
        yield number, value


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    return {list: "an array", str: "a string", int: "a number", float: "a number"}.get(type(value), "a value")


class _Line:
    """Typed field access on one parsed line, with ``file:line: field: rule`` errors."""

    def __init__(self, path: Path, number: int, value: dict[str, Any], known: set[str]) -> None:
        self.where = f"{shown(path)}:{number}"
        self.value = value
        unknown = sorted(set(value) - known)
        if unknown:
            known_keys = ", ".join(sorted(known))
            raise CorpusError(f"{self.where}: {key_path('', unknown[0])}: unknown key (known: {known_keys})")

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
        if nonblank and is_blank(item):  # the rule assemble and evaluate apply
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
        try:
            return check_number(item, key)  # finite, within an f64 (an integer past it is refused)
        except ShapeError as exc:
            raise self.fail(key, exc.rule) from None

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
            raise line.fail(
                "paragraph", f"duplicate paragraph {paragraph.paragraph} of source '{shown_text(paragraph.source)}'"
            )
        seen.add(key)
        out.append(paragraph)
    if not out:
        raise CorpusError(f"{shown(path)}: no paragraphs")
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
                weight=_weight(line),
                source=source,
                paragraph=paragraph,
            )
        )
    return out


MAX_WEIGHT = 1e300
"""The largest magnitude of a triple's weight: an association's weight is the mean (and an
attribution's the sum) of its assertions' weights, which must stay within an f64."""


def _weight(line: _Line) -> float:
    weight = line.number("weight", 1.0)
    if abs(weight) > MAX_WEIGHT:
        raise line.fail("weight", "must be at most 1e300 in magnitude (sums of weights must stay within an f64)")
    return weight


def read_summaries(path: Path, default_context: str) -> list[Summary]:
    """Community summaries in file order; (context, community) must be unique."""
    out: list[Summary] = []
    seen: set[tuple[str, str]] = set()
    known = {"context", "community", "text", "paragraph", "level", "members"}
    for number, value in _lines(path):
        line = _Line(path, number, value, known)
        members = _members(line, value.get("members") or [])
        summary = Summary(
            context=line.context(default_context),
            community=line.req("community"),
            text=line.req("text"),
            paragraph=line.uint("paragraph", required=False, default=0) or 0,
            level=line.uint("level", required=False),
            members=members,
        )
        if (summary.context, summary.community) in seen:
            raise line.fail("community", f"duplicate community '{shown_text(summary.community)}'")
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


def _members(line: _Line, members: Any) -> tuple[tuple[str, float], ...]:
    """``members``: a list of ``{"name": string, "strength": number}`` (finite, within an f64)."""
    rule = 'must be a list of {"name": string, "strength": number}'
    if not isinstance(members, list):
        raise line.fail("members", rule)
    out: list[tuple[str, float]] = []
    for index, member in enumerate(members):
        if not (isinstance(member, dict) and isinstance(member.get("name"), str)):
            raise line.fail(f"members[{index}]", rule)
        try:
            out.append((member["name"], check_number(member.get("strength"), "strength")))
        except ShapeError as exc:
            raise line.fail(f"members[{index}].strength", exc.rule) from None
    return tuple(out)


def read_cases(path: Path) -> list[Case]:
    """The cases of a ``taguru_eval: 1`` file (header line skipped; full validation is the harness's).

    What is read is checked as ``assembler evaluate`` and ``assemble`` check it, so that every
    lane dump built from the cases is one they read: non-blank ``case_id`` and ``query``, ``cues``
    a list of strings of at most the contract's 1,000 origins.
    """
    name = shown(path)
    cases: list[Case] = []
    seen: set[str] = set()
    header = True
    for number, value in _lines(path):
        where = f"{name}:{number}"
        if header:
            header = False
            stamp = value.get("taguru_eval")
            if type(stamp) is not int or stamp != 1:
                raise CorpusError(f"{where}: taguru_eval: must be 1 (the first line is the taguru_eval: 1 header)")
            continue
        case_id, query, cues = value.get("case_id"), value.get("query"), value.get("cues") or []
        if not isinstance(case_id, str) or is_blank(case_id):
            raise CorpusError(f"{where}: case_id: must be a non-blank string")
        case = f"case '{shown_text(case_id)}'"
        if not isinstance(query, str) or is_blank(query):
            raise CorpusError(f"{where}: {case}: query: must be a non-blank string")
        if not isinstance(cues, list) or not all(isinstance(c, str) for c in cues):
            raise CorpusError(f"{where}: {case}: cues: must be a list of strings")
        if len(cues) > MAX_INPUT_ITEMS:
            raise CorpusError(
                f"{where}: {case}: cues: carries {len(cues)} items, past the request's limit of "
                f"{MAX_INPUT_ITEMS} origins"
            )
        if case_id in seen:
            raise CorpusError(f"{where}: case_id: duplicate case_id '{shown_text(case_id)}'")
        seen.add(case_id)
        cases.append(Case(case_id, query, tuple(cues)))
    if not cases:
        raise CorpusError(f"{name}: no cases")
    return cases
