"""Lanes in, columnar: JSON Lines straight into the frames of :class:`~assembler.stages.lanes.LaneBatch`.

The fast path of lanes-in. Arrow's JSON reader parses a chunk of lines against the Arrow schema
derived from the contract's wire shapes (:func:`arrow_type`), strictly: an unknown or repeated
key, a wrong type, a fraction or a negative number where an integer is required, a lone
surrogate or invalid UTF-8 make it refuse. What it does not enforce is checked on the columns
(:func:`_rule_breaks`): required fields present, no null array elements, finite numbers, list
lengths, a ``-0`` that JSON reads as an integer. Payload texts are written from the columns in
the wire order (:func:`wire_texts`).

A line the reader refuses or a column check flags is *not* an error here: it goes back to the
record path (:func:`assembler.stages.lanes.parse_record`), which accepts it or words its error as
it always has. So the records accepted are exactly the record path's, and an accepted record's
frames are those :func:`~assembler.stages.lanes.build_batch` makes of it
(tests/stages/test_lanes_columnar.py checks both on random valid and invalid records).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.json as pj

from assembler.contract import wire
from assembler.contract.arrow import kept_rows, list_children, numbers, numpy_series, present, series
from assembler.contract.jsontext import json_text, writer_agrees
from assembler.contract.request import (
    MAX_INPUT_ITEMS,
    REQUEST_FIELDS,
    build_request,
    effective_search_limit,
    resolve_limits,
)
from assembler.stages import collect
from assembler.stages.lanes import (
    CANDIDATE_SCHEMA,
    CITATION_SCHEMA,
    LANE_NAMES,
    LANE_PLAN,
    LANE_SHAPES,
    ORIGIN_SCHEMA,
    PLAN_LANE_NAMES,
    SEP,
    LaneBatch,
    QueryRecord,
)

__all__ = [
    "LANE_DUMP_FIELDS",
    "ColumnarLanes",
    "arrow_type",
    "polars_type",
    "read_lane_lines",
    "read_lane_rows",
    "wire_text",
]

LANE_DUMP_FIELDS: wire.Shape = (
    wire.Field("query_id", "str"),
    wire.Field("context", "str"),
    wire.Field("request", REQUEST_FIELDS),
    wire.Field("lanes", tuple(wire.Field(name, wire.ListOf(LANE_SHAPES[name]), required=False) for name in LANE_NAMES)),
    wire.Field(
        "plan_lanes",
        tuple(wire.Field(name, LANE_PLAN, required=False, nullable=True) for name in PLAN_LANE_NAMES),
        required=False,
        nullable=True,
    ),
)
"""A lane-dump record as one wire shape: what the columnar reader's schema is derived from."""

_SCALAR_TYPES = {
    "str": pa.string(),
    "bool": pa.bool_(),
    "f64": pa.float64(),
    "f32": pa.float64(),  # parsed as f64 and rounded to f32 after, as serde does
    "u32": pa.uint32(),
    "u64": pa.uint64(),
}


def arrow_type(kind: wire.Kind) -> pa.DataType:
    """The Arrow type of a wire kind: structs for shapes, lists for arrays.

    >>> arrow_type(wire.LANE_EVIDENCE)
    StructType(struct<rank: uint64, score: double>)
    """
    if isinstance(kind, wire.ListOf):
        return pa.list_(arrow_type(kind.item))
    if isinstance(kind, tuple):
        return pa.struct([(field.name, arrow_type(field.kind)) for field in kind])
    return _SCALAR_TYPES[kind]


LANE_DUMP_ARROW = pa.schema([(field.name, arrow_type(field.kind)) for field in LANE_DUMP_FIELDS])
_PARSE_OPTIONS = pj.ParseOptions(explicit_schema=LANE_DUMP_ARROW, unexpected_field_behavior="error")


@dataclass(frozen=True, eq=False)  # holds frames or arrays: compared by identity
class ColumnarLanes:
    """The lines (or Parquet rows) the columnar reader took, and their lanes.

    ``taken[i]`` says whether line ``i`` was taken; ``batch`` holds the taken lines' records and
    frames, ``q`` numbering them in line order. The other lines are for the record path.
    """

    taken: np.ndarray
    batch: LaneBatch


def read_lane_lines(
    lines: Sequence[bytes],
    *,
    sources: Sequence[str],
    line_numbers: Sequence[int],
    overrides: Mapping[str, int] | None = None,
) -> ColumnarLanes:
    """Parse JSON Lines (one record each, no newline) into lanes, taking every line the reader and
    the column checks accept; ``sources``/``line_numbers`` name each line's record."""
    taken = np.zeros(len(lines), dtype=bool)
    if not writer_agrees():
        return ColumnarLanes(taken, _empty_batch())
    tables: list[pa.Table] = []
    positions: list[int] = []
    for start, table in _parse_runs(lines):
        tables.append(table)
        positions.extend(range(start, start + table.num_rows))
        taken[start : start + table.num_rows] = True
    if not tables:
        return ColumnarLanes(taken, _empty_batch())
    rows = np.asarray(positions)
    return _take(pa.concat_tables(tables), rows, taken, [lines[i] for i in rows], sources, line_numbers, overrides)


def read_lane_rows(
    table: pa.Table,
    *,
    sources: Sequence[str],
    line_numbers: Sequence[int],
    overrides: Mapping[str, int] | None = None,
) -> ColumnarLanes:
    """Rows of the Parquet form (the lane-dump columns, null meaning absent) into lanes: taken when
    the table has exactly the lane-dump schema and the row passes the column checks."""
    taken = np.zeros(table.num_rows, dtype=bool)
    if not writer_agrees() or not table.schema.equals(LANE_DUMP_ARROW) or table.num_rows == 0:
        return ColumnarLanes(taken, _empty_batch())
    try:
        table.validate(full=True)  # strings that are not UTF-8
    except pa.ArrowException:
        return ColumnarLanes(taken, _empty_batch())
    rows = np.arange(table.num_rows)
    taken[:] = True
    return _take(table, rows, taken, None, sources, line_numbers, overrides)


def _take(
    table: pa.Table,
    rows: np.ndarray,
    taken: np.ndarray,
    lines: Sequence[bytes] | None,
    sources: Sequence[str],
    line_numbers: Sequence[int],
    overrides: Mapping[str, int] | None,
) -> ColumnarLanes:
    """The rows of ``table`` (input positions ``rows``) that pass the column checks, as lanes."""
    table = table.combine_chunks()
    ok = ~_rule_breaks(table, lines)
    if not ok.all():
        taken[rows[~ok]] = False
        table, rows = kept_rows(table, ok), rows[ok]
    return ColumnarLanes(taken, _lane_batch(table, rows, sources, line_numbers, dict(overrides or {})))


# --- parsing: runs of lines the reader accepts ------------------------------------------------------


def _parse(lines: Sequence[bytes]) -> pa.Table | None:
    """The lines as one table, or None if the reader refuses any of them, reads a line as two, or
    passes invalid UTF-8 (it does not check strings: the full validation does)."""
    data = b"\n".join(lines)
    try:
        table = pj.read_json(
            pa.py_buffer(data),
            read_options=pj.ReadOptions(use_threads=False, block_size=max(len(data) + 1, 1 << 16)),
            parse_options=_PARSE_OPTIONS,
        )
        table.validate(full=True)
    except MemoryError:  # Arrow's allocation failed (ArrowMemoryError): the run's, not the lines'
        raise
    except Exception:
        return None  # any refusal sends the lines to the record path
    return table if table.num_rows == len(lines) else None


def _object_line(line: bytes) -> bool:
    """Whether a line may go to the reader: text that starts with ``{`` and ends with ``}``.

    Anything else is not a record anyway, and the reader must not see it: it skips a byte-order
    mark that JSON refuses, and it crashes the process on input that begins with ``null``
    (pyarrow 21-26). So it never sees a piece that does not begin with an object.
    """
    first, last = line[:1], line[-1:]
    if first != b"{":
        first = line.lstrip()[:1]
    if last != b"}":
        last = line.rstrip()[-1:]
    return first == b"{" and last == b"}"


def _parse_runs(lines: Sequence[bytes]) -> list[tuple[int, pa.Table]]:
    """``(first line, table)`` of the runs of lines the reader accepts.

    A refused run is halved until the refused lines are alone; a chunk where most lines are
    refused (a dump with extra fields, say) stops halving after a few tries and goes to the
    record path whole, so the search never costs more than a few parses of the chunk.
    """
    tries = [8 + len(lines) // 16]
    runs: list[tuple[int, pa.Table]] = []

    def read(start: int, stop: int) -> None:
        part = lines[start:stop]
        table = _parse(part) if all(map(_object_line, part)) else None
        if table is not None:
            runs.append((start, table))
            return
        tries[0] -= 1
        if stop - start > 1 and tries[0] > 0:
            middle = (start + stop) // 2
            read(start, middle)
            read(middle, stop)

    if lines:
        read(0, len(lines))
    return runs


# --- the rules the reader does not enforce -----------------------------------------------------------


def _rule_breaks(table: pa.Table, lines: Sequence[bytes] | None) -> np.ndarray:
    """Per row: does the record break a rule the reader does not check (so the record path decides)?
    ``lines``: the JSON text of each row (None for the Parquet form, where null means absent)."""
    records = pa.StructArray.from_arrays(
        [column.combine_chunks() for column in table.columns], names=table.column_names
    )
    bad = _kind_breaks(LANE_DUMP_FIELDS, records)
    request = records.field("request")
    for name in ("origins", "labels"):
        bad |= list_children(request.field(name)).lengths > MAX_INPUT_ITEMS
    # include_communities: absent is false, null is refused; the reader shows both as null.
    unset = ~present(request.field("include_communities"))
    if lines is not None and unset.any():
        bad |= unset & np.array([b'"include_communities"' in line for line in lines])
    return bad


@functools.cache
def _checked(kind: wire.Kind) -> bool:
    """Whether a value of this kind can break a rule :func:`_kind_breaks` checks (a string or an
    integer alone cannot: the reader checks those)."""
    if isinstance(kind, wire.ListOf):
        return True  # null elements
    if isinstance(kind, tuple):
        return any(field.required or _checked(field.kind) for field in kind)
    return kind in ("f64", "f32")


def _kind_breaks(kind: wire.Kind, values: pa.Array) -> np.ndarray:
    """Per element of ``values`` (null elements never break): a rule the reader does not check.

    Null counts are known without a pass over the data, so the null checks run only on arrays that
    have nulls (a chunk walks some hundred arrays here; the checks were a fixed cost of a few
    milliseconds a chunk)."""
    n = len(values)
    if not _checked(kind):
        return np.zeros(n, dtype=bool)
    if isinstance(kind, wire.ListOf):
        children = list_children(values)
        if len(children.values) == 0:
            return np.zeros(n, dtype=bool)
        inner = _kind_breaks(kind.item, children.values)
        if children.values.null_count:
            inner |= ~present(children.values)
        if not inner.any():
            return np.zeros(n, dtype=bool)
        return np.bincount(children.rows, weights=inner, minlength=n) > 0
    if isinstance(kind, tuple):
        bad = np.zeros(n, dtype=bool)
        for field in kind:
            child = values.field(field.name)
            if field.required and child.null_count:
                bad |= ~present(child)
            bad |= _kind_breaks(field.kind, child)
    elif kind in ("f64", "f32"):
        floats = numbers(values, 0.0)
        # NaN and the infinities are refused; "-0" is the integer 0 to JSON but -0.0 to the reader.
        bad = ~np.isfinite(floats) | ((floats == 0) & np.signbit(floats))
        if kind == "f32":
            with np.errstate(over="ignore"):
                bad |= ~np.isfinite(floats.astype(np.float32))
    else:
        return np.zeros(n, dtype=bool)
    if values.null_count:
        bad &= present(values)
    return bad


# --- wire texts from columns --------------------------------------------------------------------------


def polars_type(kind: wire.Kind) -> pl.DataType:
    """The Polars type a wire kind is written from (f32 fields as ``Float32``, so that they are
    written in f32's shortest form)."""
    if isinstance(kind, wire.ListOf):
        return pl.List(polars_type(kind.item))
    if isinstance(kind, tuple):
        return pl.Struct({field.name: polars_type(field.kind) for field in kind})
    return _POLARS_SCALARS[kind]


_POLARS_SCALARS: dict[str, pl.DataType] = {
    "str": pl.String(),
    "bool": pl.Boolean(),
    "f64": pl.Float64(),
    "f32": pl.Float32(),
    "u32": pl.UInt32(),
    "u64": pl.UInt64(),
}


def _conditional(kind: wire.Kind) -> bool:
    """Whether a kind holds a field written only when present, non-empty or true."""
    if isinstance(kind, wire.ListOf):
        return _conditional(kind.item)
    if isinstance(kind, tuple):
        return any(field.emit != "always" or _conditional(field.kind) for field in kind)
    return False


def wire_text(kind: wire.Kind, value: pl.Expr) -> pl.Expr:
    """The wire text of a value cast to :func:`polars_type` of its kind (null: null), as
    :func:`assembler.contract.wire.emit` writes it: fields in declaration order, presence rules applied."""
    if not _conditional(kind):
        return pl.when(value.is_not_null()).then(json_text(value))
    if isinstance(kind, wire.ListOf):
        items = value.list.eval(wire_text(kind.item, pl.element()).fill_null("null")).list.join(",")
        return pl.concat_str(pl.lit("["), items, pl.lit("]"))
    assert isinstance(kind, tuple)
    # Runs of fields always written as they are go through one JSON writer call each, so that a
    # long text is copied as few times as possible; a leading run keeps its "{", the others
    # start with a comma (an object whose first field may be left out loses that comma at the end).
    parts: list[pl.Expr] = []
    plain: list[pl.Expr] = []
    for field in kind:
        child = value.struct.field(field.name)
        if field.emit == "always" and not _conditional(field.kind):
            plain.append(child.alias(field.name))
            continue
        if plain:
            parts.append(_members(plain, first=not parts))
            plain = []
        keyed = pl.lit(f',"{field.name}":') + wire_text(field.kind, child).fill_null("null")
        if field.emit == "always":
            parts.append(keyed)
        elif field.emit == "if_present":
            parts.append(pl.when(child.is_not_null()).then(keyed).otherwise(pl.lit("")))
        elif field.emit == "if_nonempty":
            parts.append(pl.when(child.list.len() > 0).then(keyed).otherwise(pl.lit("")))
        else:  # if_true
            parts.append(pl.when(child.fill_null(False)).then(pl.lit(f',"{field.name}":true')).otherwise(pl.lit("")))
    if plain:
        parts.append(_members(plain, first=not parts))
    opened = kind[0].emit == "always" and not _conditional(kind[0].kind)
    text = (
        pl.concat_str(*parts, pl.lit("}"))
        if opened
        else pl.concat_str(pl.lit("{"), pl.concat_str(parts).str.slice(1), pl.lit("}"))
    )
    return pl.when(value.is_not_null()).then(text)


@functools.cache
def _entry_text(kind: wire.Kind) -> pl.Expr:
    """:func:`wire_text` of the ``entry`` column, built once per kind (a hit's expression takes
    a fraction of a millisecond to build, and a chunk needs it again)."""
    return wire_text(kind, pl.col("entry"))


def _members(fields: list[pl.Expr], *, first: bool) -> pl.Expr:
    """The members of an object of these fields as the JSON writer writes them, without the
    closing brace: ``{"a":..,"b":..`` for the object's first fields, else ``,"a":..,"b":..``."""
    members = pl.struct(fields).struct.json_encode().str.head(-1)
    return members if first else pl.lit(",") + members.str.slice(1)


# --- the frames ----------------------------------------------------------------------------------


def _empty_batch() -> LaneBatch:
    return LaneBatch(
        records=[],
        candidates=pl.DataFrame(schema=CANDIDATE_SCHEMA),
        origins=pl.DataFrame(schema=ORIGIN_SCHEMA),
        citations=pl.DataFrame(schema=CITATION_SCHEMA),
    )


def _entries(lists: pa.Array, kind: wire.Kind, limits: np.ndarray | None = None) -> tuple[pl.DataFrame, np.ndarray]:
    """The entries of a list column: each entry's row ``q``, its 1-based rank in its list, and
    the entry itself (``entry``, cast to :func:`polars_type` of ``kind``); with ``limits`` (per
    row), only the entries ranked within their row's limit, and how many were cut per row."""
    flat, parents, _, firsts = list_children(lists)
    ranks = np.arange(len(flat), dtype=np.int64) - firsts[parents] + 1
    cuts = np.zeros(len(lists), dtype=np.int64)
    entries = pl.DataFrame(
        [numpy_series(parents, "q"), numpy_series(ranks, "lane_rank"), series(flat, "entry").cast(polars_type(kind))]
    )
    if limits is not None:
        over = ranks > limits[parents]
        if over.any():
            cuts = np.bincount(parents[over], minlength=len(lists))
            entries = entries.filter(numpy_series(~over))
    return entries, cuts


def _lane_batch(
    table: pa.Table,
    rows: np.ndarray,
    sources: Sequence[str],
    line_numbers: Sequence[int],
    overrides: dict[str, int],
) -> LaneBatch:
    lanes = table.column("lanes").combine_chunks()
    request = table.column("request").combine_chunks()
    limits = np.array([effective_search_limit(v) for v in request.field("search_limit").to_pylist()], dtype=np.int64)
    contexts = series(table.column("context").combine_chunks(), "context").cast(pl.String)
    queried, _ = _entries(lanes.field("graph_query"), wire.ASSOCIATION)
    activated, _ = _entries(lanes.field("graph_activate"), wire.ACTIVATION)
    associations = pl.concat(
        [
            queried.lazy().with_columns(lane_order=pl.lit(0), lane=pl.lit("graph_query")),
            activated.lazy().with_columns(
                pl.col("entry").struct.field("association").alias("entry"),
                lane_order=pl.lit(1),
                lane=pl.lit("graph_activate"),
            ),
        ]
    )
    candidates, origins = _associations(associations)
    frames = [candidates]
    cuts = np.zeros(table.num_rows, dtype=np.int64)
    for order, name in ((2, "passages"), (3, "communities")):
        hits, cut = _entries(lanes.field(name), LANE_SHAPES[name], limits)
        cuts += cut
        if len(hits):
            placed = hits.lazy().with_columns(lane_order=pl.lit(order), context=contexts.gather(hits["q"]))
            frames.append(_hits(placed, name))
    citations, _ = _entries(lanes.field("citations"), wire.CITATION_ENTRY)
    candidate_frame, origin_frame, citation_frame = collect(
        _in_order(frames, CANDIDATE_SCHEMA), _in_order([origins], ORIGIN_SCHEMA), _citations(citations.lazy())
    )
    return LaneBatch(
        records=_records(table, lanes, request, rows, sources, line_numbers, overrides, cuts),
        candidates=candidate_frame,
        origins=origin_frame,
        citations=citation_frame,
    )


def _in_order(frames: list[pl.LazyFrame], schema: Mapping[str, pl.DataType | type[pl.DataType]]) -> pl.LazyFrame:
    """The lanes' rows in the record path's order: by query, then lane, then rank."""
    joined = pl.concat(frames).sort("q", "lane_order", "lane_rank", maintain_order=True)
    return joined.select(list(schema)).cast(dict(schema))  # type: ignore[arg-type]


def _associations(entries: pl.LazyFrame) -> tuple[pl.LazyFrame, pl.LazyFrame]:
    """Candidate rows of association entries, and their ``(source, paragraph)`` origins."""
    entries = entries.with_row_index("i")
    attribution = pl.col("attribution")
    atts = (
        entries.select("i", pl.col("entry").struct.field("attributions").alias("attribution"))
        .explode("attribution")
        .filter(attribution.is_not_null())
        .select(
            "i",
            source=attribution.struct.field("source"),
            weight=attribution.struct.field("weight"),
            paragraph=attribution.struct.field("paragraph").cast(pl.Int64),
        )
        .with_row_index("position")
    )
    # The primary attribution (contract 2.3): the last maximum of (|weight|, source reversed,
    # paragraph present, paragraph reversed).
    primary = (
        atts.sort(
            ["i", pl.col("weight").abs(), "source", pl.col("paragraph").is_not_null(), "paragraph", "position"],
            descending=[False, False, True, False, True, False],
            nulls_last=False,
            maintain_order=True,
        )
        .group_by("i", maintain_order=True)
        .last()
        .select("i", primary_source="source", primary_paragraph="paragraph")
    )
    sources = (
        atts.select("i", "source")
        .unique()
        .sort("i", "source")
        .with_columns(quoted=json_text(pl.col("source")))
        .group_by("i", maintain_order=True)
        .agg(pl.col("quoted"))
        .with_columns(pl.col("quoted").list.join(","))
    )
    entry = pl.col("entry")
    subject, label, obj = (entry.struct.field(name) for name in ("subject", "label", "object"))
    key = pl.concat_str(subject, label, obj, separator=SEP)
    candidates = (
        entries.join(primary, on="i", how="left", maintain_order="left")
        .join(sources, on="i", how="left", maintain_order="left")
        .select(
            "i",
            "q",
            "lane_order",
            kind=pl.lit("association"),
            lane="lane",
            lane_rank="lane_rank",
            canonical_key=key,
            candidate_id=pl.lit("association" + SEP) + key,
            id_json=json_text(pl.lit("association" + SEP) + key),
            source="primary_source",
            paragraph="primary_paragraph",
            weight=entry.struct.field("weight"),
            subject=subject,
            label=label,
            text=pl.concat_str(subject, label, obj, separator=" "),
            payload_json=_entry_text(wire.ASSOCIATION),
            corroboration_sources_json=pl.when(pl.col("quoted").is_not_null()).then("[" + pl.col("quoted") + "]"),
        )
    )
    found = (
        atts.filter(pl.col("paragraph").is_not_null())
        .select("i", "source", "paragraph")
        .unique()
        .sort("i", "source", "paragraph")
        .join(candidates.select("i", "q", "lane_order", "lane_rank", "candidate_id"), on="i", maintain_order="left")
    )
    return candidates.drop("i"), found


def _hits(entries: pl.LazyFrame, lane: str) -> pl.LazyFrame:
    """Candidate rows of passage or community hits."""
    entry = pl.col("entry")
    paragraph = entry.struct.field("paragraph").cast(pl.Int64)
    if lane == "passages":
        kind, shape, source = "passage", wire.PASSAGE_HIT, entry.struct.field("source")
        evidence = entry.struct.field("lanes")
        bm25 = evidence.struct.field("bm25").is_not_null()
        vector = evidence.struct.field("vector").is_not_null()
        lane_name = (
            pl.when(bm25 & vector)
            .then(pl.lit("passage_fused"))
            .when(vector)
            .then(pl.lit("passage_vector"))
            .otherwise(pl.lit("passage_bm25"))
        )
    else:
        kind, shape, lane_name = "community", wire.COMMUNITY_HIT, pl.lit("community")
        source = pl.lit("community:") + entry.struct.field("community")
    key = pl.concat_str("context", source, paragraph.cast(pl.String), separator=SEP)
    return entries.select(
        "q",
        "lane_order",
        kind=pl.lit(kind),
        lane=lane_name,
        lane_rank="lane_rank",
        canonical_key=key,
        candidate_id=pl.lit(kind + SEP) + key,
        id_json=json_text(pl.lit(kind + SEP) + key),
        source=source,
        paragraph=paragraph,
        weight=pl.lit(None, dtype=pl.Float64),
        subject=pl.lit(None, dtype=pl.String),
        label=pl.lit(None, dtype=pl.String),
        text=entry.struct.field("text"),
        payload_json=_entry_text(shape),
        corroboration_sources_json=pl.lit(None, dtype=pl.String),
    )


def _citations(entries: pl.LazyFrame) -> pl.LazyFrame:
    """One row per resolved locator per query: the first entry of a repeated locator wins."""
    entry = pl.col("entry")
    source = entry.struct.field("source")
    paragraph = entry.struct.field("paragraph").cast(pl.Int64)
    ref = pl.concat_str(pl.lit('{"source":'), json_text(source), pl.lit(',"paragraph":'), paragraph.cast(pl.String))
    frame = entries.select(
        "q",
        source=source,
        paragraph=paragraph,
        ref_json=ref + pl.lit("}"),
        entry_json=_entry_text(wire.CITATION_ENTRY),
    )
    unique = frame.unique(["q", "source", "paragraph"], keep="first", maintain_order=True)
    return unique.cast(dict(CITATION_SCHEMA))  # type: ignore[arg-type]


def _records(
    table: pa.Table,
    lanes: pa.StructArray,
    request: pa.StructArray,
    rows: np.ndarray,
    sources: Sequence[str],
    line_numbers: Sequence[int],
    overrides: dict[str, int],
    cuts: np.ndarray,
) -> list[QueryRecord]:
    """The per-query part of each record (its request, limits and plan)."""
    listed = [present(lanes.field(name)) for name in LANE_NAMES]
    plans = table.column("plan_lanes").to_pylist()
    records = []
    for i, (query_id, context, fields) in enumerate(
        zip(table.column("query_id").to_pylist(), table.column("context").to_pylist(), request.to_pylist(), strict=True)
    ):
        budget = {key: value for key, value in (fields["budget"] or {}).items() if value is not None}
        rerank = fields["rerank"]
        row = int(rows[i])
        records.append(
            QueryRecord(
                query_id=query_id,
                context=context,
                request=build_request(
                    origins=tuple(fields["origins"]),
                    labels=tuple(fields["labels"] or ()),
                    text_fallback_query=fields["text_fallback_query"],
                    search_limit=fields["search_limit"],
                    include_communities=bool(fields["include_communities"]),
                    budget=budget,
                    rerank=rerank is not None,
                    rerank_model=None if rerank is None else rerank["model"],
                ),
                limits=resolve_limits(budget, overrides),
                plan_lanes=_plan(plans[i]),
                present_lanes=frozenset(name for name, has in zip(LANE_NAMES, listed, strict=True) if has[i]),
                search_limit_cuts=int(cuts[i]),
                source=sources[row],
                line=line_numbers[row],
            )
        )
    return records


def _plan(plan: dict[str, Any] | None) -> dict[str, dict[str, Any]] | None:
    """``plan_lanes`` as the record path keeps it: the lanes given, ``floor`` rounded to f32."""
    if plan is None:
        return None
    kept: dict[str, dict[str, Any]] = {}
    for name in PLAN_LANE_NAMES:
        lane = plan.get(name)
        if lane is None:
            continue
        entry: dict[str, Any] = {"ran": lane["ran"]}
        if lane["reason"] is not None:
            entry["reason"] = lane["reason"]
        if lane["floor"] is not None:
            entry["floor"] = float(np.float32(lane["floor"]))
        kept[name] = entry
    return kept
