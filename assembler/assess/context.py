"""Run contexts in: validate each record once and flatten what U7 reads into columns.

This is the only per-record walk of the assessment (as ``assembler.stages.lanes`` is for lane dumps):
a run context is checked against the fields the U7 rules read (``wire`` shapes: unknown keys are
ignored, every field but ``run_id`` may be absent or null) and reduced to a :class:`ParsedRun`.
:func:`build_frames` turns a batch of them into two Polars frames, one row per run and one row per
law hit of either hit list, on which ``assembler.assess.rules`` decides everything columnar.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import polars as pl

from assembler.contract import wire
from assembler.contract.wire import Field, ListOf, ShapeError
from assembler.errors import InputError, RecordError

__all__ = [
    "RUN_CONTEXT",
    "SELECTOR_FIELDS",
    "ParsedRun",
    "RunRecordError",
    "build_frames",
    "duplicate_run_error",
    "parse_context",
]


@dataclass(frozen=True)
class RunRecordError(RecordError):
    """A :class:`RecordError` of a run context: the record's id is its ``run_id``.

    Printed as ``file:line: run_id 'r7' field F: rule`` and written to the errors file with a
    ``run_id`` key; like every input error it never carries a payload value.
    """

    id_name = "run_id"

    @classmethod
    def of(cls, error: RecordError) -> RunRecordError:
        """The same error, labelled for a run context (reader errors come as plain ``RecordError``)."""
        return error if isinstance(error, cls) else cls(error.file, error.line, error.query_id, error.field, error.rule)


def _optional(name: str, kind: wire.Kind) -> Field:
    return Field(name, kind, required=False, nullable=True)


_ANY_OBJECTS = ListOf(())
"""A list whose elements must be objects; U7 only counts them."""

RAW_HIT: wire.Shape = (
    _optional("citation_path", "str"),
    _optional("rada_nreg", "str"),
    _optional("metadata", (_optional("citation_path", "str"),)),
)
"""The fields of a RawHit that U7 reads; everything else in a hit is passed over."""

RUN_CONTEXT: wire.Shape = (
    Field("run_id", "str"),
    _optional("raw_hits", ListOf(RAW_HIT)),
    _optional(
        "retrieval_trace",
        (_optional("hits", ListOf(RAW_HIT)), _optional("meta", (_optional("coverage_gap", "str"),))),
    ),
    _optional("memory_items", _ANY_OBJECTS),
    _optional("memory_summaries", _ANY_OBJECTS),
    _optional("history", _ANY_OBJECTS),
    _optional("doc_snippets", _ANY_OBJECTS),
    _optional(
        "query_profile",
        (_optional("context_mode", "str"), _optional("routing_flags", (_optional("context_mode", "str"),))),
    ),
    _optional("doclist_trace", (_optional("corpus_gap_status", "str"), _optional("reason_code", "str"))),
    _optional("clarification", (_optional("status", "str"),)),
)
"""The run-context fields U7 reads (spec section 3), as a wire shape."""

SELECTOR_FIELDS = (
    "article_number",
    "article_part_number",
    "point_number",
    "subpoint_number",
    "paragraph_number",
    "note_number",
    "unit_type",
    "unit_number",
)
"""Structural selectors a citation path can be built from (read only with ``build_citation_paths``)."""

Hit = tuple[Any, ...]
"""``(citation_path, metadata.citation_path, rada_nreg, *selectors)``; selectors only when asked for."""


@dataclass(frozen=True)
class ParsedRun:
    """What U7 reads of one valid run context; list fields are ``None`` when absent or null."""

    run_id: str
    raw_hits: list[Hit] | None
    trace_hits: list[Hit] | None
    memory_items: int
    memory_summaries: int
    history: int
    doc_snippets: int
    context_mode: str | None  # query_profile.routing_flags.context_mode
    context_mode_top: str | None  # query_profile.context_mode (the brief's path, a fallback)
    corpus_gap_status: str | None
    meta_coverage_gap: str | None
    reason_code: str | None
    clarification_status: str | None
    file: str = "<memory>"
    line: int = 0


def _get(value: Mapping[str, Any] | None, *path: str) -> Any:
    for key in path:
        if value is None:
            return None
        value = value.get(key)
    return value


def _count(value: list[Any] | None) -> int:
    return 0 if value is None else len(value)


def _selector(value: Any) -> str | None:
    """Selectors are read as the bridge reads them: a string, anything else ignored."""
    return value if isinstance(value, str) else None


def _hits(clean: list[dict[str, Any]] | None, raw: Any, selectors: bool) -> list[Hit] | None:
    if clean is None:
        return None
    hits: list[Hit] = []
    for entry, original in zip(clean, raw, strict=True):
        hit: Hit = (entry.get("citation_path"), _get(entry, "metadata", "citation_path"), entry.get("rada_nreg"))
        if selectors:
            metadata = original.get("metadata")
            metadata = metadata if isinstance(metadata, dict) else {}
            hit += tuple(_selector(original.get(name)) for name in SELECTOR_FIELDS)
            hit += tuple(_selector(metadata.get(name)) for name in SELECTOR_FIELDS)
        hits.append(hit)
    return hits


def parse_context(raw: Any, *, file: str = "<memory>", line: int = 0, selectors: bool = False) -> ParsedRun:
    """Validate one parsed run context; raise :class:`InputError` naming field and rule.

    ``selectors``: also collect the structural selectors of every hit (for built citation paths).
    """
    run_id = raw.get("run_id") if isinstance(raw, dict) else None
    shown_id = run_id.encode("utf-8", "backslashreplace").decode() if isinstance(run_id, str) else None
    try:
        if not isinstance(raw, dict):
            raise ShapeError("", "a run context must be a JSON object")
        clean = wire.validate(RUN_CONTEXT, raw, "")
    except ShapeError as exc:
        raise InputError(RunRecordError(file, line, shown_id, exc.path, exc.rule)) from None
    trace = clean.get("retrieval_trace")
    return ParsedRun(
        run_id=clean["run_id"],
        raw_hits=_hits(clean.get("raw_hits"), raw.get("raw_hits"), selectors),
        trace_hits=_hits(_get(trace, "hits"), _get(raw, "retrieval_trace", "hits"), selectors),
        memory_items=_count(clean.get("memory_items")),
        memory_summaries=_count(clean.get("memory_summaries")),
        history=_count(clean.get("history")),
        doc_snippets=_count(clean.get("doc_snippets")),
        context_mode=_get(clean, "query_profile", "routing_flags", "context_mode"),
        context_mode_top=_get(clean, "query_profile", "context_mode"),
        corpus_gap_status=_get(clean, "doclist_trace", "corpus_gap_status"),
        meta_coverage_gap=_get(trace, "meta", "coverage_gap"),
        reason_code=_get(clean, "doclist_trace", "reason_code"),
        clarification_status=_get(clean, "clarification", "status"),
        file=file,
        line=line,
    )


def duplicate_run_error(run: ParsedRun) -> InputError:
    """The error for a run id seen earlier in the same input (its output line would be ambiguous)."""
    return InputError(
        RunRecordError(run.file, run.line, run.run_id, "run_id", "duplicate run_id (each run may appear once)")
    )


_RUN_SCHEMA = {
    "r": pl.Int64,
    "run_id": pl.String,
    "raw_n": pl.Int64,
    "trace_n": pl.Int64,
    "memory_items": pl.Int64,
    "memory_summaries": pl.Int64,
    "history": pl.Int64,
    "doc_snippets": pl.Int64,
    "context_mode": pl.String,
    "context_mode_top": pl.String,
    "corpus_gap_status": pl.String,
    "meta_coverage_gap": pl.String,
    "reason_code": pl.String,
    "clarification_status": pl.String,
}
_HIT_COLUMNS = (
    "citation_path",
    "meta_citation_path",
    "rada_nreg",
    *SELECTOR_FIELDS,
    *(f"meta_{name}" for name in SELECTOR_FIELDS),
)


def build_frames(runs: Sequence[ParsedRun], *, selectors: bool = False) -> tuple[pl.DataFrame, pl.DataFrame]:
    """``(runs, hits)``: one row per run (``r`` = its index) and one per hit of both hit lists.

    ``hits`` has ``r``, ``from_raw`` (``raw_hits`` or ``retrieval_trace.hits``), ``pos`` (order in
    its list) and the hit's string fields (with the selectors when ``selectors``, as parsed);
    rows are in (run, list, position) order.
    """
    frame = pl.DataFrame(
        {
            "r": range(len(runs)),
            "run_id": [run.run_id for run in runs],
            "raw_n": [None if run.raw_hits is None else len(run.raw_hits) for run in runs],
            "trace_n": [None if run.trace_hits is None else len(run.trace_hits) for run in runs],
            "memory_items": [run.memory_items for run in runs],
            "memory_summaries": [run.memory_summaries for run in runs],
            "history": [run.history for run in runs],
            "doc_snippets": [run.doc_snippets for run in runs],
            "context_mode": [run.context_mode for run in runs],
            "context_mode_top": [run.context_mode_top for run in runs],
            "corpus_gap_status": [run.corpus_gap_status for run in runs],
            "meta_coverage_gap": [run.meta_coverage_gap for run in runs],
            "reason_code": [run.reason_code for run in runs],
            "clarification_status": [run.clarification_status for run in runs],
        },
        schema=_RUN_SCHEMA,
    )
    index: list[int] = []
    from_raw: list[bool] = []
    position: list[int] = []
    rows: list[Hit] = []
    for r, run in enumerate(runs):
        for raw, listed in ((True, run.raw_hits), (False, run.trace_hits)):
            for pos, hit in enumerate(listed or ()):
                index.append(r)
                from_raw.append(raw)
                position.append(pos)
                rows.append(hit)
    names = _HIT_COLUMNS if selectors else _HIT_COLUMNS[:3]
    columns = list(zip(*rows, strict=True)) if rows else [() for _ in names]
    hits = pl.DataFrame(
        {"r": index, "from_raw": from_raw, "pos": position, **dict(zip(names, map(list, columns), strict=True))},
        schema={"r": pl.Int64, "from_raw": pl.Boolean, "pos": pl.Int64, **dict.fromkeys(names, pl.String)},
    )
    return frame, hits
