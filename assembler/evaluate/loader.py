"""The ``taguru_eval: 1`` eval file (spec section 1): load, validate, fail fast with file and line.

One JSON object per line; the first non-blank line is the header, every later non-blank line a
case. Unknown keys are rejected at every level. Every error is an :class:`EvaluateError` whose
line reads ``<path>: line N: <what>: <rule>``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from assembler.contract.jsoninput import read_json
from assembler.contract.jsontext import format_f32, to_f32
from assembler.contract.text import is_blank
from assembler.contract.wire import ShapeError, check_duplicates, check_number, check_string, check_uint
from assembler.errors import shown, shown_path
from assembler.evaluate.errors import EvaluateError
from assembler.run.io import read_input

__all__ = [
    "DEFAULT_LIMIT",
    "MAX_LIMIT",
    "CaseOptions",
    "EvalCase",
    "EvalSet",
    "ExpectedAssociation",
    "ExpectedCitation",
    "ExpectedSource",
    "check_limits",
    "load_eval",
    "parse_eval_text",
]

DEFAULT_LIMIT = 10
MAX_LIMIT = 1000
_U32_MAX = 2**32 - 1
_U8_MAX = 255

_HEADER_KEYS = ("taguru_eval", "name", "default_target")
_CASE_KEYS = (
    "case_id",
    "query",
    "cues",
    "expected_sources",
    "expected_concepts",
    "expected_labels",
    "expected_associations",
    "expected_citations",
    "options",
)
_SOURCE_KEYS = ("source", "paragraphs", "relevance")
_OPTION_KEYS = ("limit", "floor", "tags", "since", "until")
_ASSOCIATION_KEYS = ("subject", "label", "object")
_CITATION_KEYS = ("source", "paragraph", "section", "quote")


@dataclass(frozen=True)
class ExpectedSource:
    """A source (optionally restricted to paragraphs) the passage lane should surface."""

    source: str
    paragraphs: tuple[int, ...] = ()
    relevance: int = 1


@dataclass(frozen=True)
class ExpectedAssociation:
    """A (subject, label, object) fact the structural lane should find."""

    subject: str
    label: str
    object: str


@dataclass(frozen=True)
class ExpectedCitation:
    """A locator that should be served; ``section_declared`` separates absent from ``null``."""

    source: str
    paragraph: int
    section_declared: bool = False
    section: str | None = None
    quote: str | None = None


@dataclass(frozen=True)
class CaseOptions:
    """Per-case options; ``None`` = absent (or ``null``)."""

    limit: int | None = None
    floor: float | None = None
    tags: tuple[str, ...] | None = None
    since: int | None = None
    until: int | None = None

    def retrieval_filters(self) -> list[str]:
        """The declared retrieval-time filters (their names), which an offline run cannot apply."""
        return [name for name in ("floor", "tags", "since", "until") if getattr(self, name) is not None]


@dataclass(frozen=True)
class EvalCase:
    """One validated case."""

    case_id: str
    query: str
    line: int
    cues: tuple[str, ...] = ()
    expected_sources: tuple[ExpectedSource, ...] = ()
    expected_concepts: tuple[str, ...] = ()
    expected_labels: tuple[str, ...] = ()
    expected_associations: tuple[ExpectedAssociation, ...] = ()
    expected_citations: tuple[ExpectedCitation, ...] = ()
    options: CaseOptions = field(default_factory=CaseOptions)

    @property
    def limit(self) -> int:
        """``options.limit`` or the default 10."""
        return DEFAULT_LIMIT if self.options.limit is None else self.options.limit

    @property
    def declares_structural(self) -> bool:
        """Whether the structural lane runs for this case (concepts, labels or associations)."""
        return bool(self.expected_concepts or self.expected_labels or self.expected_associations)

    @property
    def evidence_sources(self) -> tuple[ExpectedSource, ...]:
        """The expected sources that count for rank metrics (relevance >= 1)."""
        return tuple(entry for entry in self.expected_sources if entry.relevance >= 1)


@dataclass(frozen=True)
class EvalSet:
    """A loaded eval file."""

    path: str
    name: str | None
    cases: tuple[EvalCase, ...]


class _Problem(Exception):
    """A located problem inside one line (internal)."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


def load_eval(path: str) -> EvalSet:
    """Read and validate an eval file; raise :class:`EvaluateError` at the first problem."""
    try:
        data = read_input(Path(path))
    except OSError as exc:
        raise EvaluateError(f"cannot read {shown_path(path)}: {exc.strerror or exc}") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise EvaluateError(
            f"cannot read {shown_path(path)}: line {line}: not valid UTF-8 (byte {exc.start})"
        ) from None
    return parse_eval_text(text, path)


def parse_eval_text(text: str, path: str) -> EvalSet:
    """Validate the text of an eval file named ``path`` (used in every message)."""
    name: str | None = None
    header_seen = False
    cases: list[EvalCase] = []
    seen: set[str] = set()
    for number, raw_line in enumerate(text.split("\n"), start=1):
        if is_blank(raw_line):
            continue
        try:
            value = _parse_line(raw_line)
            if not header_seen:
                name = _header(value)
                header_seen = True
            else:
                cases.append(_case(value, number, seen))
        except _Problem as problem:
            raise EvaluateError(f"{shown_path(path)}: line {number}: {problem.message}") from None
    if not header_seen:
        raise EvaluateError(f"{shown_path(path)}: empty file: expected a taguru_eval header line")
    if not cases:
        raise EvaluateError(f"{shown_path(path)}: no cases: expected at least one case line after the header")
    return EvalSet(path=path, name=name, cases=tuple(cases))


def check_limits(evalset: EvalSet) -> None:
    """Every ``options.limit`` must be 1..=1000 (checked after loading, in case order)."""
    for case in evalset.cases:
        if not 1 <= case.limit <= MAX_LIMIT:
            raise EvaluateError(
                f"{shown_path(evalset.path)}: line {case.line}: case '{shown(case.case_id)}': "
                f"options.limit must be 1..={MAX_LIMIT}, got {case.limit}"
            )


def _parse_line(line: str) -> Any:
    """One line through the strict JSON reader (the rules of every input): a syntax error, a
    refused number, nesting too deep, a repeated key or a lone surrogate, with its field."""
    try:
        return read_json(line.strip())
    except ShapeError as exc:
        raise _Problem(f"{exc.path}: {exc.rule}" if exc.path else exc.rule) from None


def _describe(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return f"the number {value!r}"
    names: dict[type, str] = {dict: "an object", list: "an array", str: "a string"}
    return names.get(type(value), type(value).__name__)


def _object(value: Any, path: str, known: Sequence[str], retired: dict[str, str] | None = None) -> dict[str, Any]:
    """An object holding only ``known`` keys (a repeated known key is refused, as serde does)."""
    if not isinstance(value, dict):
        raise ShapeError(path, f"must be an object, got {_describe(value)}")
    check_duplicates(value, known, path)
    for key in value:
        if key not in known:
            where = f"{path}.{shown(key)}" if path else shown(key)
            extra = (retired or {}).get(key, f"known keys: {', '.join(known)}")
            raise ShapeError(where, f"unknown field ({extra})")
    return value


def _strings(value: Any, path: str) -> tuple[str, ...]:
    if not isinstance(value, list):
        raise ShapeError(path, f"must be an array of strings, got {_describe(value)}")
    return tuple(check_string(item, f"{path}[{i}]") for i, item in enumerate(value))


def _required_string(obj: dict[str, Any], key: str, path: str) -> str:
    where = f"{path}.{key}" if path else key
    if key not in obj:
        raise ShapeError(where, "is required but missing")
    return check_string(obj[key], where)


def _header(value: Any) -> str | None:
    try:
        header = _object(value, "", _HEADER_KEYS)
        if "taguru_eval" not in header:
            raise ShapeError("taguru_eval", "is required but missing")
        stamp = check_uint(header["taguru_eval"], "taguru_eval")
        name = header.get("name")
        if name is not None:
            name = check_string(name, "name")
    except ShapeError as exc:
        raise _Problem(f"not a valid eval header: {exc.path}: {exc.rule}") from None
    if stamp != 1:
        raise _Problem(f"taguru_eval must be 1, got {stamp}")
    return name


def _case(value: Any, line: int, seen: set[str]) -> EvalCase:
    try:
        case = _object(value, "", _CASE_KEYS)
        case_id = _required_string(case, "case_id", "")
        query = _required_string(case, "query", "")
        cues = _strings(case["cues"], "cues") if "cues" in case else ()
        sources = _expected_sources(case.get("expected_sources", []))
        concepts = _strings(case["expected_concepts"], "expected_concepts") if "expected_concepts" in case else ()
        options_raw = _object(
            case.get("options", {}),
            "options",
            _OPTION_KEYS,
            retired={"sources": "options.sources is retired; use options.tags/since/until"},
        )
        limit_raw = options_raw.get("limit")
        limit = None if limit_raw is None else check_uint(limit_raw, "options.limit")
    except ShapeError as exc:
        raise _Problem(f"not a valid eval case: {exc.path}: {exc.rule}") from None
    try:
        labels = _optional(case, "expected_labels", _strings)
        associations = _optional(case, "expected_associations", _associations)
        citations = _optional(case, "expected_citations", _citations)
        options = _options(options_raw, limit)
    except ShapeError as exc:
        raise _Problem(f"case '{shown(case_id)}': {exc.path}: {exc.rule}") from None
    _check_case(case_id, query, seen, sources, labels, associations, citations, options)
    return EvalCase(
        case_id=case_id,
        query=query,
        line=line,
        cues=cues,
        expected_sources=sources,
        expected_concepts=concepts,
        expected_labels=labels,
        expected_associations=associations,
        expected_citations=citations,
        options=options,
    )


def _optional(case: dict[str, Any], key: str, parse: Any) -> tuple[Any, ...]:
    value = case.get(key)
    return () if value is None else tuple(parse(value, key))


def _expected_sources(value: Any) -> tuple[ExpectedSource, ...]:
    if not isinstance(value, list):
        raise ShapeError("expected_sources", f"must be an array of objects, got {_describe(value)}")
    entries = []
    for i, item in enumerate(value):
        path = f"expected_sources[{i}]"
        entry = _object(item, path, _SOURCE_KEYS)
        source = _required_string(entry, "source", path)
        paragraphs_raw = entry.get("paragraphs", [])
        if not isinstance(paragraphs_raw, list):
            raise ShapeError(f"{path}.paragraphs", f"must be an array of integers, got {_describe(paragraphs_raw)}")
        paragraphs = tuple(check_uint(p, f"{path}.paragraphs[{j}]", _U32_MAX) for j, p in enumerate(paragraphs_raw))
        relevance = check_uint(entry["relevance"], f"{path}.relevance", _U8_MAX) if "relevance" in entry else 1
        entries.append(ExpectedSource(source, paragraphs, relevance))
    return tuple(entries)


def _associations(value: Any, path: str) -> list[ExpectedAssociation]:
    if not isinstance(value, list):
        raise ShapeError(path, f"must be an array of objects, got {_describe(value)}")
    out = []
    for i, item in enumerate(value):
        where = f"{path}[{i}]"
        entry = _object(item, where, _ASSOCIATION_KEYS)
        out.append(ExpectedAssociation(*(_required_string(entry, key, where) for key in _ASSOCIATION_KEYS)))
    return out


def _citations(value: Any, path: str) -> list[ExpectedCitation]:
    if not isinstance(value, list):
        raise ShapeError(path, f"must be an array of objects, got {_describe(value)}")
    out = []
    for i, item in enumerate(value):
        where = f"{path}[{i}]"
        entry = _object(item, where, _CITATION_KEYS)
        source = _required_string(entry, "source", where)
        if entry.get("paragraph") is None:
            raise ShapeError(f"{where}.paragraph", "is required (a 0-based paragraph index)")
        paragraph = check_uint(entry["paragraph"], f"{where}.paragraph", _U32_MAX)
        declared = "section" in entry
        section = entry.get("section")
        if section is not None:
            section = check_string(section, f"{where}.section")
        quote = entry.get("quote")
        if quote is not None:
            quote = check_string(quote, f"{where}.quote")
        out.append(ExpectedCitation(source, paragraph, declared, section, quote))
    return out


def _options(raw: dict[str, Any], limit: int | None) -> CaseOptions:
    floor = None
    if raw.get("floor") is not None:
        floor = to_f32(check_number(raw["floor"], "options.floor"))
    tags = None if raw.get("tags") is None else _strings(raw["tags"], "options.tags")
    since = None if raw.get("since") is None else check_uint(raw["since"], "options.since")
    until = None if raw.get("until") is None else check_uint(raw["until"], "options.until")
    return CaseOptions(limit=limit, floor=floor, tags=tags, since=since, until=until)


def _check_case(
    case_id: str,
    query: str,
    seen: set[str],
    sources: Sequence[ExpectedSource],
    labels: Sequence[str],
    associations: Sequence[ExpectedAssociation],
    citations: Sequence[ExpectedCitation],
    options: CaseOptions,
) -> None:
    if is_blank(case_id):
        raise _Problem("case_id must not be empty")
    where = f"case '{shown(case_id)}'"
    if is_blank(query):
        raise _Problem(f"{where}: query must not be empty")
    if case_id in seen:
        raise _Problem(f"duplicate case_id '{shown(case_id)}'")
    seen.add(case_id)
    for i, entry in enumerate(sources):
        if is_blank(entry.source):
            raise _Problem(f"{where}: expected_sources: source must not be empty (entry {i})")
        if entry.relevance > 3:
            raise _Problem(f"{where}: expected_sources relevance must be 0..=3, got {entry.relevance} (entry {i})")
    for i, label in enumerate(labels):
        if is_blank(label):
            raise _Problem(f"{where}: expected_labels: entries must not be empty (entry {i})")
    for i, assoc in enumerate(associations):
        for key in _ASSOCIATION_KEYS:
            if is_blank(getattr(assoc, key)):
                raise _Problem(
                    f"{where}: expected_associations: subject/label/object must not be empty (entry {i}: {key})"
                )
    for i, citation in enumerate(citations):
        if is_blank(citation.source):
            raise _Problem(f"{where}: expected_citations: source must not be empty (entry {i})")
        if citation.quote is not None and is_blank(citation.quote):
            raise _Problem(f"{where}: expected_citations: quote must not be empty (entry {i})")
    if options.floor is not None and not 0.0 <= options.floor <= 1.0:
        floor = format_f32(options.floor).removesuffix(".0")
        raise _Problem(f"{where}: options.floor must be 0.0..=1.0, got {floor}")
