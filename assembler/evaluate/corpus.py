"""The corpus snapshot (spec Appendix D): the source listing and the citation endpoint, offline.

Two optional JSON Lines files stand in for the live server's read endpoints:

* ``--sources FILE``: ``{"context", "source", "paragraphs"}`` per line (the context's source list
  with each source's paragraph count). It enables the source preflight (every
  ``expected_sources[].source`` must be a source of the case's context) and ``sources_count``, and
  lets an unresolved citation say ``no_source`` or ``no_paragraph``.
* ``--citations FILE``: ``{"context", "source", "paragraph", "citation": Citation}`` per line, the
  answer ``POST /contexts/{ctx}/citations`` gives for each locator that resolves. It enables the
  citation checks: resolution, the section check and the quote check.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from assembler.contract import wire
from assembler.contract.jsoninput import check_strict
from assembler.contract.text import normalize_entry, trim
from assembler.contract.wire import ShapeError, check_string, check_uint
from assembler.errors import InputError, RecordError, shown, shown_path
from assembler.evaluate.dump import CaseLanes
from assembler.evaluate.errors import EvaluateError
from assembler.evaluate.loader import EvalSet, ExpectedCitation
from assembler.run.io import read_raw

__all__ = ["CitationCheck", "Corpus", "check_citation", "load_corpus", "preflight"]

_U32_MAX = 2**32 - 1


@dataclass(frozen=True)
class Corpus:
    """What the snapshot files hold; ``None`` = that file was not given."""

    sources: dict[str, dict[str, int]] | None = None
    citations: dict[tuple[str, str, int], dict[str, Any]] | None = None

    def sources_count(self, contexts: Sequence[str]) -> int | None:
        """Distinct sources of the given contexts, when the source list is known."""
        if self.sources is None:
            return None
        return len({source for context in contexts for source in self.sources.get(context, {})})


def _records(path: str) -> Iterator[tuple[int, dict[str, Any]]]:
    if not Path(path).is_file():
        raise EvaluateError(f"cannot read {shown_path(path)}: no such file")
    for raw in read_raw([path]):
        if raw.error is not None:
            raise InputError(raw.error)
        if not isinstance(raw.value, dict):
            raise InputError(RecordError(raw.file, raw.line, None, "", "a line must be a JSON object"))
        try:
            check_strict(raw.value)  # not a lane dump: no repeated key, no lone surrogate, anywhere
        except ShapeError as exc:
            raise InputError(RecordError(raw.file, raw.line, None, exc.path, exc.rule)) from None
        yield raw.line, raw.value


def _fail(path: str, line: int, exc: ShapeError) -> InputError:
    return InputError(RecordError(path, line, None, exc.path, exc.rule))


def _load_sources(path: str) -> dict[str, dict[str, int]]:
    sources: dict[str, dict[str, int]] = {}
    for line, value in _records(path):
        try:
            context = check_string(value.get("context"), "context")
            source = check_string(value.get("source"), "source")
            count = check_uint(value.get("paragraphs"), "paragraphs", _U32_MAX)
            if source in sources.setdefault(context, {}):
                raise ShapeError("source", f"duplicate source '{shown(source)}' in context '{shown(context)}'")
        except ShapeError as exc:
            raise _fail(path, line, exc) from None
        sources[context][source] = count
    return sources


def _load_citations(path: str) -> dict[tuple[str, str, int], dict[str, Any]]:
    citations: dict[tuple[str, str, int], dict[str, Any]] = {}
    for line, value in _records(path):
        try:
            context = check_string(value.get("context"), "context")
            source = check_string(value.get("source"), "source")
            paragraph = check_uint(value.get("paragraph"), "paragraph", _U32_MAX)
            citation = wire.validate(wire.CITATION, value.get("citation"), "citation")
            key = (context, source, paragraph)
            if key in citations:
                raise ShapeError(
                    "paragraph", f"duplicate locator ({shown(source)}, {paragraph}) in context '{shown(context)}'"
                )
        except ShapeError as exc:
            raise _fail(path, line, exc) from None
        citations[key] = citation
    return citations


def load_corpus(sources: str | None, citations: str | None) -> Corpus:
    """Read whichever snapshot files were given."""
    return Corpus(
        sources=None if sources is None else _load_sources(sources),
        citations=None if citations is None else _load_citations(citations),
    )


def preflight(evalset: EvalSet, lanes: CaseLanes, corpus: Corpus, sources_path: str) -> None:
    """Every expected source must be a source of the case's context (relevance 0 included)."""
    if corpus.sources is None:
        return
    problems = []
    for case, dump in zip(evalset.cases, lanes.records, strict=True):
        context = dump.record.context
        known = corpus.sources.get(context, {})
        for entry in case.expected_sources:
            if entry.source not in known:
                problems.append(
                    f"{shown_path(evalset.path)}: line {case.line}: case '{shown(case.case_id)}': expected_sources "
                    f"names '{shown(entry.source)}', which '{shown(context)}' does not carry "
                    f"(per {shown_path(sources_path)})"
                )
    if problems:
        raise EvaluateError(problems)


@dataclass(frozen=True)
class CitationCheck:
    """One expected citation checked against the snapshot (``code`` only when unresolved)."""

    expected: ExpectedCitation
    served: bool
    resolved: bool
    code: str | None = None
    message: str | None = None
    section_matched: bool | None = None  # None: not checked
    quote_matched: bool | None = None  # None: no quote declared

    @property
    def valid(self) -> bool:
        """Resolved, no section mismatch, and the quote (if any) matched."""
        return self.resolved and self.section_matched is not False and self.quote_matched is not False

    def block(self) -> dict[str, Any]:
        """The artifact's CitationCheck (never the served text or the stored section)."""
        out: dict[str, Any] = {
            "source": self.expected.source,
            "paragraph": self.expected.paragraph,
            "served": self.served,
        }
        if self.resolved:
            out["outcome"] = "resolved"
            if self.section_matched is None:
                out["section"] = {"check": "not_checked"}
            else:
                out["section"] = {
                    "check": "matched" if self.section_matched else "mismatched",
                    "expected": self.expected.section,
                }
            if self.quote_matched is not None:
                out["quote"] = {"declared": True, "matched": self.quote_matched}
        else:
            out["outcome"] = "unresolved"
            out["code"] = self.code
            out["message"] = self.message
        out["latency_ms"] = None
        return out


def quote_matches(quote: str, text: str) -> bool:
    """``N(trim(quote))`` is a substring of ``N(trim(text))``."""
    return normalize_entry(trim(quote)) in normalize_entry(trim(text))


def check_citation(expected: ExpectedCitation, context: str, served: bool, corpus: Corpus) -> CitationCheck:
    """Resolve one expected citation against the snapshot (``corpus.citations`` must be loaded)."""
    assert corpus.citations is not None
    citation = corpus.citations.get((context, expected.source, expected.paragraph))
    if citation is None:
        known = None if corpus.sources is None else corpus.sources.get(context, {})
        if known is not None and expected.source not in known:
            code, message = "no_source", f"no source '{expected.source}' in context '{context}'"
        elif known is not None and expected.paragraph >= known[expected.source]:
            code = "no_paragraph"
            message = (
                f"'{expected.source}' has {known[expected.source]} paragraph(s), no paragraph {expected.paragraph}"
            )
        else:
            code, message = None, "the citations file has no entry for this locator"
        return CitationCheck(expected, served, False, code, message)
    section = None
    if expected.section_declared:
        section = expected.section == citation.get("section")
    quote = None if expected.quote is None else quote_matches(expected.quote, citation["text"])
    return CitationCheck(expected, served, True, section_matched=section, quote_matched=quote)
