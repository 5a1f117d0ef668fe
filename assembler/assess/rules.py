"""The U7 rules (spec R1-R8) as Polars expressions over a batch of run contexts.

Every decision is a column expression over the frames of ``assembler.assess.context``: which hit
list is "law" (R1), the source counts (R2), the mode with the mixed correction (R3), the coverage
gap (R4), the unresolved-gap markers (R5), the support level (R6) and the first six unique citation
paths in hit order (R7). ``version`` and ``assembled_at`` (R8) are one literal per batch, the time
taken once from an injectable clock so that tests and reruns are deterministic.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal

import polars as pl

from assembler.assess.context import ParsedRun, build_frames, duplicate_run_error, parse_context
from assembler.errors import UsageError, shown

__all__ = [
    "JS_WHITESPACE",
    "MAX_CITATION_REFS",
    "STRONG_LAW_HITS",
    "VERSION",
    "AssessOptions",
    "Clock",
    "assess_batch",
    "assess_parsed",
    "assess_run",
    "fixed_clock",
    "format_timestamp",
    "result_lines",
    "utc_now",
]

VERSION = 1
STRONG_LAW_HITS = 3
MAX_CITATION_REFS = 6
JS_WHITESPACE = (
    "\t\n\v\f\r \u00a0\u1680" + "".join(map(chr, range(0x2000, 0x200B))) + "\u2028\u2029\u202f\u205f\u3000\ufeff"
)
"""What JavaScript's ``String.prototype.trim`` and ``\\s`` strip (the source of U7 is TypeScript)."""

_WS_RUN = "[" + JS_WHITESPACE.replace("\\", "\\\\") + "]+"

Clock = Callable[[], datetime]
ModeRule = Literal["counts", "law_first"]


def utc_now() -> datetime:
    """The default clock: the current time in UTC."""
    return datetime.now(UTC)


def format_timestamp(moment: datetime) -> str:
    """ISO-8601 in UTC with milliseconds and ``Z`` (JavaScript's ``toISOString``); naive = UTC."""
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    moment = moment.astimezone(UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def fixed_clock(now: str | None) -> Clock:
    """A clock that always reads ``now`` (ISO 8601; a naive time is UTC); ``None`` gives :func:`utc_now`."""
    if now is None:
        return utc_now
    try:
        moment = datetime.fromisoformat(now)
    except ValueError:
        raise UsageError(f"now must be an ISO-8601 time such as 2026-04-09T12:00:00Z, got '{shown(now)}'") from None
    return lambda: moment


@dataclass(frozen=True)
class AssessOptions:
    """The spec's OPEN choices; the defaults are its recommendations (see the README table).

    * ``empty_raw_hits_fall_through`` (E9): an empty ``raw_hits`` list gives way to
      ``retrieval_trace.hits`` (default: present-but-empty wins, law = 0).
    * ``history_is_evidence`` (E22): chat history counts as "any evidence" for ``partial``.
    * ``mode_rule``: ``counts`` (the spec's table: law with memory or docs is ``mixed``) or
      ``law_first`` (any law hit is ``law``; without law, memory and docs together are ``mixed``).
    * ``build_citation_paths``: a hit without a citation path gets one built from its structural
      selectors (``ст. 36 ч. 1 ...``), as the bridge code does.
    * ``normalize_citation_refs``: two paths are the same ref when their normalized keys match
      (NFC, lower case, dashes, whitespace); the first spelling is kept.
    * ``qualify_citation_refs``: refs are prefixed with the hit's ``rada_nreg`` (act-qualified).
    """

    empty_raw_hits_fall_through: bool = False
    history_is_evidence: bool = False
    mode_rule: ModeRule = "counts"
    build_citation_paths: bool = False
    normalize_citation_refs: bool = False
    qualify_citation_refs: bool = False


DEFAULTS = AssessOptions()


def _text(column: str) -> pl.Expr:
    """A string column trimmed (JS ``trim``), blank or null -> null."""
    trimmed = pl.col(column).str.strip_chars(JS_WHITESPACE)
    return pl.when(trimmed.str.len_chars() > 0).then(trimmed)


def _present(column: str) -> pl.Expr:
    """Not missing, not null, not blank (R4's "present"); the value itself is used verbatim."""
    return pl.col(column).str.strip_chars(JS_WHITESPACE).str.len_chars().fill_null(0) > 0


def _selector(name: str) -> pl.Expr:
    """A selector as the bridge reads it: the hit's own field, else the metadata's (NFC, trimmed)."""
    return pl.coalesce(_text(name), _text(f"meta_{name}")).str.normalize("NFC")


def _built_path() -> pl.Expr:
    """The bridge's ``buildCitationPathFromSelectors``: ст. / ч. / п. / пп. / абз. / примітка."""
    unit_type = pl.coalesce(_text("unit_type"), _text("meta_unit_type"))
    article = _selector("article_number")
    point = pl.coalesce(
        _text("point_number").str.normalize("NFC"),
        pl.when(unit_type == "point").then(_text("unit_number").str.normalize("NFC")),
        _text("meta_point_number").str.normalize("NFC"),
        pl.when(unit_type == "point").then(_text("meta_unit_number").str.normalize("NFC")),
    )
    subpoint = pl.coalesce(
        _text("subpoint_number").str.normalize("NFC"),
        pl.when(unit_type == "subpoint").then(_text("unit_number").str.normalize("NFC")),
        _text("meta_subpoint_number").str.normalize("NFC"),
    )
    under_article = article.is_not_null()
    under_point = under_article | point.is_not_null()

    def piece(label: str, value: pl.Expr, allowed: pl.Expr) -> pl.Expr:
        return pl.when(allowed & value.is_not_null()).then(pl.concat_str(pl.lit(label), value))

    parts = [
        piece("ст. ", article, under_article),
        piece("ч. ", _selector("article_part_number"), under_article),
        piece("п. ", point, under_point),
        piece("пп. ", subpoint, under_point),
        piece("абз. ", _selector("paragraph_number"), under_point),
        piece("примітка ", _selector("note_number"), pl.lit(True)),
    ]
    joined = pl.concat_str(parts, separator=" ", ignore_nulls=True)
    return pl.when(joined.str.len_chars() > 0).then(joined)


def normalized_path(expr: pl.Expr) -> pl.Expr:
    """The bridge's ``normalizeCitationPath``: NFC, lower case, en/em dash -> ``-``, one space, trim."""
    return (
        expr.str.normalize("NFC")
        .str.to_lowercase()
        .str.replace_all("[\u2013\u2014]", "-")
        .str.replace_all(_WS_RUN, " ")
        .str.strip_chars(JS_WHITESPACE)
    )


def _citation_refs(runs: pl.DataFrame, hits: pl.DataFrame, options: AssessOptions) -> pl.DataFrame:
    """R7: per run, the first six distinct citation paths of its law hits, in hit order."""
    path = pl.coalesce(_text("citation_path"), _text("meta_citation_path"))
    if options.build_citation_paths:
        path = pl.coalesce(path, _built_path())
    if options.qualify_citation_refs:
        path = pl.when(_present("rada_nreg")).then(pl.concat_str(_text("rada_nreg"), pl.lit(" "), path)).otherwise(path)
    key = normalized_path(pl.col("ref")) if options.normalize_citation_refs else pl.col("ref")
    law = hits.join(runs.select("r", "law_from_raw"), on="r", how="inner", maintain_order="left").filter(
        pl.col("from_raw") == pl.col("law_from_raw")
    )
    return (
        law.select("r", ref=path)
        .filter(pl.col("ref").is_not_null())
        .with_columns(key=key)
        .unique(subset=["r", "key"], keep="first", maintain_order=True)
        .group_by("r", maintain_order=True)
        .agg(pl.col("ref").head(MAX_CITATION_REFS))
    )


def _mode(law: pl.Expr, memory: pl.Expr, docs: pl.Expr, context_mode: pl.Expr, rule: ModeRule) -> pl.Expr:
    """R3: the base mode from the counts, then the mixed correction (law present, mode ``mixed``)."""
    if rule == "counts":
        base = (
            pl.when((law > 0) & ((memory > 0) | (docs > 0)))
            .then(pl.lit("mixed"))
            .when(law > 0)
            .then(pl.lit("law"))
            .when((docs > 0) & (memory == 0))
            .then(pl.lit("docs_only"))
            .otherwise(pl.lit("memory_only"))
        )
    else:
        base = (
            pl.when(law > 0)
            .then(pl.lit("law"))
            .when((memory > 0) & (docs > 0))
            .then(pl.lit("mixed"))
            .when(docs > 0)
            .then(pl.lit("docs_only"))
            .otherwise(pl.lit("memory_only"))
        )
    return pl.when((context_mode == "mixed").fill_null(False) & (law > 0)).then(pl.lit("mixed")).otherwise(base)


def assess_parsed(runs: list[ParsedRun], assembled_at: str, options: AssessOptions = DEFAULTS) -> pl.DataFrame:
    """The ``EvidenceAssemblyResult`` of every parsed run, one row each, in input order.

    Columns: ``run_id``, then the result's fields in wire order (``source_counts`` a struct).
    """
    frame, hits = build_frames(runs, selectors=options.build_citation_paths)
    raw_n, trace_n = pl.col("raw_n"), pl.col("trace_n")
    use_raw = raw_n.is_not_null() & ((raw_n > 0) if options.empty_raw_hits_fall_through else pl.lit(True))
    frame = frame.with_columns(
        law_from_raw=use_raw,
        law=pl.when(use_raw).then(raw_n).otherwise(trace_n.fill_null(0)),
        memory=pl.col("memory_items") + pl.col("memory_summaries"),
        gap=pl.when(_present("corpus_gap_status"))
        .then(pl.col("corpus_gap_status"))
        .when(_present("meta_coverage_gap"))
        .then(pl.col("meta_coverage_gap"))
        .otherwise(pl.lit("none")),
    )
    law, memory, docs, history = pl.col("law"), pl.col("memory"), pl.col("doc_snippets"), pl.col("history")
    evidence = law + memory + docs + (history if options.history_is_evidence else pl.lit(0))
    gaps = pl.concat_list(
        pl.when(pl.col("gap") != "none").then(pl.concat_str(pl.lit("coverage_gap:"), pl.col("gap"))),
        pl.when(_present("reason_code")).then(pl.concat_str(pl.lit("doclist:"), pl.col("reason_code"))),
        pl.when(pl.col("clarification_status") == "pending").then(pl.lit("clarification_pending")),
    ).list.drop_nulls()
    refs = _citation_refs(frame, hits, options)
    return (
        frame.join(refs, on="r", how="left", maintain_order="left")
        .sort("r")
        .select(
            "run_id",
            mode=_mode(law, memory, docs, pl.coalesce("context_mode", "context_mode_top"), options.mode_rule),
            source_counts=pl.struct(law=law, memory=memory, history=history, doc=docs),
            coverage_gap_status=pl.col("gap"),
            unresolved_gaps=gaps,
            support_level=pl.when((law >= STRONG_LAW_HITS) & (pl.col("gap") == "none"))
            .then(pl.lit("strong"))
            .when(evidence > 0)
            .then(pl.lit("partial"))
            .otherwise(pl.lit("weak")),
            required_citation_refs=pl.col("ref").fill_null(pl.lit([], dtype=pl.List(pl.String))),
            version=pl.lit(VERSION, dtype=pl.Int64),
            assembled_at=pl.lit(assembled_at, dtype=pl.String),
        )
    )


def result_lines(results: pl.DataFrame) -> list[str]:
    """One JSON Lines text per result: ``{"run_id":..,"evidence_assembly":{...}}`` (no newline).

    Polars writes JSON strings exactly as ``assembler.contract.jsontext.escape_string`` does (pinned by a test).
    """
    fields = [name for name in results.columns if name != "run_id"]
    line = pl.struct(pl.col("run_id"), evidence_assembly=pl.struct(fields)).struct.json_encode()
    return results.select(line).to_series().to_list()


def assess_batch(
    contexts: Iterable[Mapping[str, Any]], *, clock: Clock = utc_now, options: AssessOptions = DEFAULTS
) -> pl.DataFrame:
    """Validate and assess parsed run contexts; raise ``InputError`` on a bad one or a repeated run id.

    One row per context in input order (see :func:`assess_parsed`); ``clock`` is read once.
    """
    runs: list[ParsedRun] = []
    seen: set[str] = set()
    for line, raw in enumerate(contexts, start=1):
        run = parse_context(raw, line=line, selectors=options.build_citation_paths)
        if run.run_id in seen:
            raise duplicate_run_error(run)
        seen.add(run.run_id)
        runs.append(run)
    return assess_parsed(runs, format_timestamp(clock()), options)


def assess_run(
    context: Mapping[str, Any], *, clock: Clock = utc_now, options: AssessOptions = DEFAULTS
) -> dict[str, Any]:
    """The ``EvidenceAssemblyResult`` of one run context, as a dict in wire key order.

    >>> from datetime import datetime, UTC
    >>> result = assess_run(
    ...     {"run_id": "r1", "raw_hits": [{"citation_path": "ст. 36"}, {"citation_path": "ст. 36"},
    ...      {"citation_path": "ст. 40 ч. 1"}], "query_profile": {"routing_flags": {"context_mode": "mixed"}}},
    ...     clock=lambda: datetime(2026, 4, 9, 12, 0, tzinfo=UTC))
    >>> result["mode"], result["support_level"], result["required_citation_refs"], result["assembled_at"]
    ('mixed', 'strong', ['ст. 36', 'ст. 40 ч. 1'], '2026-04-09T12:00:00.000Z')
    """
    row = assess_batch([context], clock=clock, options=options).drop("run_id").row(0, named=True)
    return dict(row)
