"""Lanes in: the record rules of lane dumps, and the candidate frames every later stage reads.

:func:`parse_record` validates one parsed record and words every error (contract sections 1-2);
:func:`build_batch` writes the candidate, origin and citation frames of validated records, each
payload serialized once in the contract's field order. Most records skip both: the columnar
reader (:mod:`assembler.stages.lanes_columnar`) takes whole chunks as columns and hands back only
the records these rules must decide. Everything after this module works on the three Polars
frames of :class:`LaneBatch` and on :class:`QueryRecord`.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import polars as pl

from assembler.contract import wire
from assembler.contract.jsontext import escape_string, json_array
from assembler.contract.request import Limits, Request, parse_request, resolve_limits
from assembler.contract.wire import ShapeError, check_string
from assembler.errors import InputError, RecordError

__all__ = [
    "DUPLICATE_RULE",
    "LANE_NAMES",
    "PLAN_LANE_NAMES",
    "LaneBatch",
    "LaneRecord",
    "QueryRecord",
    "build_batch",
    "concat_batches",
    "drop_nulls",
    "parse_record",
    "record_id",
    "repeated_query_id",
]

SEP = "\x00"
LANE_NAMES = ("graph_query", "graph_activate", "passages", "communities", "citations")
PLAN_LANE_NAMES = ("resolve", "query", "activate", "passages", "communities", "citations")
LANE_SHAPES: dict[str, wire.Shape] = {
    "graph_query": wire.ASSOCIATION,
    "graph_activate": wire.ACTIVATION,
    "passages": wire.PASSAGE_HIT,
    "communities": wire.COMMUNITY_HIT,
    "citations": wire.CITATION_ENTRY,
}
# Path strings are escaped, so the first `,"association":` of an activation's text is the field.
_ASSOCIATION_KEY = ',"association":'
_LANE_COMPILED = {name: wire.compile_kind(shape) for name, shape in LANE_SHAPES.items()}
LANE_PLAN: wire.Shape = (
    wire.Field("ran", "bool"),
    wire.Field("reason", "str", required=False, nullable=True, emit="if_present"),
    wire.Field("floor", "f32", required=False, nullable=True, emit="if_present"),
)


@dataclass(frozen=True, kw_only=True)
class QueryRecord:
    """What every stage after lanes-in reads of one validated query (its candidates are in the
    frames of :class:`LaneBatch`). ``present_lanes``: the lanes the dump carried (null = absent)."""

    query_id: str
    context: str
    request: Request
    limits: Limits
    plan_lanes: dict[str, dict[str, Any]] | None
    present_lanes: frozenset[str] = frozenset()
    search_limit_cuts: int = 0
    source: str = "<memory>"
    line: int = 0


@dataclass(frozen=True, kw_only=True)
class LaneRecord(QueryRecord):
    """One validated query of a lane dump with its lanes. ``lanes`` holds clean wire dicts
    (None = absent), ``payloads`` their wire texts."""

    lanes: dict[str, list[dict[str, Any]] | None]
    payloads: dict[str, list[str]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        present = frozenset(name for name, entries in self.lanes.items() if entries is not None)
        object.__setattr__(self, "present_lanes", present)


DUPLICATE_RULE = "duplicate query_id (each query may appear once in the input)"


def drop_nulls(value: Any) -> Any:
    """Parquet cannot tell absent from null; in a lane dump the two mean the same."""
    if isinstance(value, dict):
        return {key: drop_nulls(item) for key, item in value.items() if item is not None}
    if isinstance(value, list):
        return [drop_nulls(item) for item in value]
    return value


def repeated_query_id(record: QueryRecord, seen: set[str]) -> RecordError | None:
    """The error of a query id met before (in ``seen``); else ``None``, and the id joins ``seen``."""
    if record.query_id in seen:
        return RecordError(record.source, record.line, record.query_id, "query_id", DUPLICATE_RULE)
    seen.add(record.query_id)
    return None


def parse_record(
    raw: Any,
    *,
    file: str = "<memory>",
    line: int = 0,
    overrides: dict[str, int] | None = None,
) -> LaneRecord:
    """Validate one parsed lane-dump object; raise :class:`InputError` naming field and rule."""
    try:
        return _parse(raw, file, line, overrides)
    except ShapeError as exc:
        # RecordError escapes a lone surrogate of the id (it could not be written as UTF-8).
        raise InputError(RecordError(file, line, record_id(raw), exc.path, exc.rule)) from None


def record_id(raw: Any) -> str | None:
    """The ``query_id`` of a parsed record when it is a string (to name the record in an error)."""
    query_id = raw.get("query_id") if isinstance(raw, dict) else None
    return query_id if isinstance(query_id, str) else None


def _parse(raw: Any, file: str, line: int, overrides: dict[str, int] | None) -> LaneRecord:
    if not isinstance(raw, dict):
        raise ShapeError("", "a lane-dump record must be a JSON object")
    wire.check_duplicates(raw, ("query_id", "context", "request", "lanes", "plan_lanes"), "")
    for key in ("query_id", "context", "request", "lanes"):
        if raw.get(key) is None:
            raise ShapeError(key, "is required but missing")
    query_id = check_string(raw["query_id"], "query_id")
    context = check_string(raw["context"], "context")
    request = parse_request(raw["request"])
    lanes_raw = _lane_map(raw["lanes"], LANE_NAMES, "lanes")
    lanes: dict[str, list[dict[str, Any]] | None] = {}
    payloads: dict[str, list[str]] = {}
    cuts = 0
    for name in LANE_NAMES:
        entries = lanes_raw.get(name)
        if entries is None:
            lanes[name] = None
            continue
        if not isinstance(entries, list):
            raise ShapeError(f"lanes.{name}", "must be an array or null")
        compiled = _LANE_COMPILED[name]
        clean, texts = [], []
        for i, entry in enumerate(entries):
            try:
                entry_clean, entry_text = compiled(entry)
            except ShapeError as exc:
                raise ShapeError(wire.join_path(f"lanes.{name}[{i}]", exc.path), exc.rule) from None
            clean.append(entry_clean)
            texts.append(entry_text)
        if name in ("passages", "communities") and len(clean) > request.search_limit:
            cuts += len(clean) - request.search_limit
            clean, texts = clean[: request.search_limit], texts[: request.search_limit]
        payloads[name] = texts
        lanes[name] = clean
    plan_lanes = None
    if raw.get("plan_lanes") is not None:
        plan_raw = _lane_map(raw["plan_lanes"], PLAN_LANE_NAMES, "plan_lanes")
        plan_lanes = {
            name: wire.validate(LANE_PLAN, plan_raw[name], f"plan_lanes.{name}")
            for name in PLAN_LANE_NAMES
            if plan_raw.get(name) is not None
        }
    return LaneRecord(
        query_id=query_id,
        context=context,
        request=request,
        limits=resolve_limits(request.budget, overrides),
        lanes=lanes,
        plan_lanes=plan_lanes,
        payloads=payloads,
        search_limit_cuts=cuts,
        source=file,
        line=line,
    )


def _lane_map(value: Any, names: tuple[str, ...], path: str) -> dict[str, Any]:
    """An object keyed by lane names: unknown names are an error (a typo would lose a lane)."""
    if not isinstance(value, dict):
        raise ShapeError(path, "must be an object")
    wire.check_duplicates(value, names, path)
    unknown = sorted(set(value) - set(names))
    if unknown:
        raise ShapeError(wire.key_path(path, unknown[0]), f"unknown lane (expected one of {', '.join(names)})")
    return value


def lane_plan_text(plan: dict[str, Any]) -> str:
    """A ``LanePlan`` as wire text (``ran``, then ``reason`` / ``floor`` when present)."""
    return wire.emit(LANE_PLAN, plan)


@dataclass
class _Columns:
    """Row-wise accumulation of the candidate and citation columns of one batch."""

    candidates: dict[str, list[Any]] = field(default_factory=lambda: {name: [] for name in CANDIDATE_SCHEMA})
    citations: dict[str, list[Any]] = field(default_factory=lambda: {name: [] for name in CITATION_SCHEMA})
    origins: dict[str, list[Any]] = field(default_factory=lambda: {name: [] for name in ORIGIN_SCHEMA})


CANDIDATE_SCHEMA: dict[str, pl.DataType | type[pl.DataType]] = {
    "q": pl.UInt32,
    "kind": pl.String,
    "lane": pl.String,
    "lane_rank": pl.Int64,
    "canonical_key": pl.String,
    "candidate_id": pl.String,
    "id_json": pl.String,
    "source": pl.String,
    "paragraph": pl.Int64,
    "weight": pl.Float64,
    "subject": pl.String,
    "label": pl.String,
    "text": pl.String,
    "payload_json": pl.String,
    "corroboration_sources_json": pl.String,
}
ORIGIN_SCHEMA: dict[str, pl.DataType | type[pl.DataType]] = {
    "q": pl.UInt32,
    "candidate_id": pl.String,
    "source": pl.String,
    "paragraph": pl.Int64,
}
CITATION_SCHEMA: dict[str, pl.DataType | type[pl.DataType]] = {
    "q": pl.UInt32,
    "source": pl.String,
    "paragraph": pl.Int64,
    "ref_json": pl.String,
    "entry_json": pl.String,
}


@dataclass(frozen=True, eq=False)  # holds frames or arrays: compared by identity
class LaneBatch:
    """A batch of queries as frames.

    ``candidates``: one row per lane entry (before fusion), with the serialized payload.
    ``origins``: one row per ``(source, paragraph)`` origin of each association lane entry.
    ``citations``: one row per resolved locator per query, with its serialized entry.
    ``records``: the validated records, indexed by ``q``.
    """

    records: Sequence[QueryRecord]
    candidates: pl.DataFrame
    origins: pl.DataFrame
    citations: pl.DataFrame


def _primary_attribution(attributions: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The contract's primary attribution (section 2.3): the last maximum of its order."""
    best: dict[str, Any] | None = None
    for att in attributions:
        if best is None or not _ranks_below(att, best):
            best = att
    return best


def _ranks_below(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """Whether ``a`` is strictly smaller than ``b`` in the primary-attribution order."""
    wa: float = abs(a["weight"])
    wb: float = abs(b["weight"])
    if wa != wb:
        return wa < wb
    sa: str = a["source"]
    sb: str = b["source"]
    if sa != sb:
        return sa > sb
    pa, pb = a.get("paragraph"), b.get("paragraph")
    if (pa is None) != (pb is None):
        return pa is None
    if pa is not None and pb is not None and pa != pb:
        return bool(pa > pb)
    return False


def _add_association(
    cols: dict[str, list[Any]],
    origin_cols: dict[str, list[Any]],
    q: int,
    lane: str,
    rank: int,
    assoc: dict[str, Any],
    payload: str,
) -> None:
    key = SEP.join((assoc["subject"], assoc["label"], assoc["object"]))
    candidate_id = "association" + SEP + key
    attributions = assoc["attributions"]
    primary = _primary_attribution(attributions)
    origins = sorted({(a["source"], a["paragraph"]) for a in attributions if a.get("paragraph") is not None})
    sources = sorted({a["source"] for a in attributions})
    _append(
        cols,
        q=q,
        kind="association",
        lane=lane,
        lane_rank=rank,
        canonical_key=key,
        candidate_id=candidate_id,
        id_json=escape_string(candidate_id),
        source=None if primary is None else primary["source"],
        paragraph=None if primary is None else primary.get("paragraph"),
        weight=assoc["weight"],
        subject=assoc["subject"],
        label=assoc["label"],
        text=f"{assoc['subject']} {assoc['label']} {assoc['object']}",
        payload_json=payload,
        corroboration_sources_json=json_array(map(escape_string, sources)) if attributions else None,
    )
    for source, paragraph in origins:
        _append(origin_cols, q=q, candidate_id=candidate_id, source=source, paragraph=paragraph)


def _append(cols: dict[str, list[Any]], **values: Any) -> None:
    for name, value in values.items():
        cols[name].append(value)


def passage_lane(hit: dict[str, Any]) -> str:
    """The lane name of a passage hit: ``passage_fused``, ``passage_vector`` or ``passage_bm25``."""
    lanes = hit["lanes"]
    has_bm25, has_vector = lanes.get("bm25") is not None, lanes.get("vector") is not None
    if has_bm25 and has_vector:
        return "passage_fused"
    return "passage_vector" if has_vector else "passage_bm25"


def _with_text(record: LaneRecord, lane: str) -> Iterator[tuple[dict[str, Any], str]]:
    """A lane's clean entries with their wire texts."""
    return zip(record.lanes[lane] or (), record.payloads.get(lane, ()), strict=True)


def _add_hit(
    cols: dict[str, list[Any]],
    q: int,
    kind: str,
    lane: str,
    rank: int,
    context: str,
    source: str,
    hit: dict[str, Any],
    payload: str,
) -> None:
    """A passage or community hit as a candidate row, keyed by ``(context, source, paragraph)``."""
    key = SEP.join((context, source, str(hit["paragraph"])))
    candidate_id = kind + SEP + key
    _append(
        cols,
        q=q,
        kind=kind,
        lane=lane,
        lane_rank=rank,
        canonical_key=key,
        candidate_id=candidate_id,
        id_json=escape_string(candidate_id),
        source=source,
        paragraph=hit["paragraph"],
        weight=None,
        subject=None,
        label=None,
        text=hit["text"],
        payload_json=payload,
        corroboration_sources_json=None,
    )


def _add_record(columns: _Columns, q: int, record: LaneRecord) -> None:
    cols = columns.candidates
    for rank, (assoc, text) in enumerate(_with_text(record, "graph_query"), start=1):
        _add_association(cols, columns.origins, q, "graph_query", rank, assoc, text)
    for rank, (activation, text) in enumerate(_with_text(record, "graph_activate"), start=1):
        # The payload is the inner association: the last field of the activation's own text.
        inner = text[text.index(_ASSOCIATION_KEY) + len(_ASSOCIATION_KEY) : -1]
        _add_association(cols, columns.origins, q, "graph_activate", rank, activation["association"], inner)
    for rank, (hit, payload) in enumerate(_with_text(record, "passages"), start=1):
        _add_hit(cols, q, "passage", passage_lane(hit), rank, record.context, hit["source"], hit, payload)
    for rank, (hit, payload) in enumerate(_with_text(record, "communities"), start=1):
        source = "community:" + hit["community"]
        _add_hit(cols, q, "community", "community", rank, record.context, source, hit, payload)
    seen: set[tuple[str, int]] = set()
    for entry, text in _with_text(record, "citations"):
        locator = (entry["source"], entry["paragraph"])
        if locator in seen:  # a repeated locator: the first entry wins (a lookup map keeps one)
            continue
        seen.add(locator)
        _append(
            columns.citations,
            q=q,
            source=entry["source"],
            paragraph=entry["paragraph"],
            ref_json=f'{{"source":{escape_string(entry["source"])},"paragraph":{entry["paragraph"]}}}',
            entry_json=text,
        )


def build_batch(records: Sequence[LaneRecord]) -> LaneBatch:
    """Normalize validated records into the candidate and citation frames of one batch."""
    columns = _Columns()
    for q, record in enumerate(records):
        _add_record(columns, q, record)
    return LaneBatch(
        records=records,
        candidates=pl.DataFrame(columns.candidates, schema=CANDIDATE_SCHEMA),
        origins=pl.DataFrame(columns.origins, schema=ORIGIN_SCHEMA),
        citations=pl.DataFrame(columns.citations, schema=CITATION_SCHEMA),
    )


def concat_batches(
    parts: Sequence[tuple[LaneBatch, Sequence[int | None]]], records: Sequence[QueryRecord]
) -> LaneBatch:
    """One batch of ``records`` from parts whose queries are renumbered: ``(batch, targets)`` moves
    the part's query ``q`` to ``targets[q]`` (``None``: dropped). Rows keep their order within a query."""

    def renumbered(frame: pl.DataFrame, targets: Sequence[int | None]) -> pl.DataFrame:
        lookup = pl.Series("target", list(targets), dtype=pl.UInt32)
        return frame.with_columns(q=lookup.gather(frame["q"])).filter(pl.col("q").is_not_null())

    def joined(name: str, schema: dict[str, Any]) -> pl.DataFrame:
        frames = [renumbered(getattr(batch, name), targets) for batch, targets in parts if len(getattr(batch, name))]
        if not frames:
            return pl.DataFrame(schema=schema)
        return pl.concat(frames).sort("q", maintain_order=True)

    return LaneBatch(
        records=records,
        candidates=joined("candidates", CANDIDATE_SCHEMA),
        origins=joined("origins", ORIGIN_SCHEMA),
        citations=joined("citations", CITATION_SCHEMA),
    )
