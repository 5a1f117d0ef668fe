"""The pipeline: lanes in, fuse, select (a policy), package out — for a whole batch at once."""

from __future__ import annotations

import json
import operator
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Any

import polars as pl

from assembler.contract.jsontext import quarters_of
from assembler.contract.request import check_overrides
from assembler.contract.wire import MAX_DEPTH, join_path, key_path
from assembler.errors import AssemblerError, InputError, RecordError, UsageError, shown, unexpected_rule
from assembler.selection import CONTRACT, Selection, SelectionInputs, SelectionPolicy, get_policy
from assembler.stages import collect
from assembler.stages.diversity import tier_width
from assembler.stages.fuse import fuse
from assembler.stages.lanes import (
    LaneBatch,
    LaneRecord,
    QueryRecord,
    build_batch,
    drop_nulls,
    parse_record,
    repeated_query_id,
)
from assembler.stages.package import (
    QUERY_SCHEMA,
    admitted_items,
    cited_entries,
    omission_order,
    omitted_entries,
    package_texts,
)
from assembler.stages.plan import lanes_plan_text
from assembler.stages.reorder import Reorderer, Reranker, RerankStage

__all__ = [
    "REASONS",
    "BatchResult",
    "FusedBatch",
    "assemble",
    "assemble_batch",
    "assemble_lanes",
    "assemble_records",
    "decision_frame",
    "fuse_batch",
    "package_plans",
]

REASONS = ("budget_exceeded", "contradiction_group_exceeds_budget", "duplicate_passage", "evidence_in_passage")


@dataclass(frozen=True, eq=False)  # holds frames or arrays: compared by identity
class BatchResult:
    """The packages of a batch, in input order, with what explains them.

    ``summaries`` has one row per query: usage, omissions by reason, search-limit cuts.
    :attr:`decisions` has one row per fused candidate: lanes, fused rank, near-duplicate verdict,
    group, tier, walk step, decision and reason, running usage. ``selection`` is the selection
    stage's own frame behind it (``q``-indexed, serialized fragments; internal: its columns may
    change between versions).
    """

    query_ids: list[str]
    package_column: pl.Series = field(repr=False)
    summaries: pl.DataFrame
    selection: pl.DataFrame = field(repr=False)

    @cached_property
    def packages(self) -> list[str]:
        """The package texts as Python strings, in input order (``package_column`` is the same
        texts as a Polars column: the output is written from it without making these)."""
        return self.package_column.to_list()

    @cached_property
    def plans(self) -> pl.DataFrame:
        """One row per query: its limits and ``plan.selection`` numbers (:func:`package_plans`)."""
        return package_plans(self)

    @cached_property
    def decisions(self) -> pl.DataFrame:
        """One row per fused candidate with every decision made (:func:`decision_frame`)."""
        return decision_frame(self)


@dataclass(frozen=True, eq=False)  # holds frames or arrays: compared by identity
class FusedBatch:
    """Everything before selection: the lanes as frames, the fused candidates, exact-dedup counts
    per query, and what a policy reads besides the candidates. Selection is a pure function of
    ``candidates`` and ``inputs``, so one fused batch can be selected under many policies."""

    batch: LaneBatch
    candidates: pl.DataFrame
    dedup: pl.DataFrame
    inputs: SelectionInputs


def fuse_batch(batch: LaneBatch, reorder: Reorderer | None = None) -> FusedBatch:
    """Fusion for a batch of lanes, and the selection inputs (limits, tier widths, citation
    locators and their measurements)."""
    records = batch.records
    fused, dedup = fuse(batch.candidates, batch.origins, batch.citations)
    entries = batch.citations["entry_json"]
    inputs = SelectionInputs(
        citations=batch.citations.select("q", "source", "paragraph").with_row_index("citation_id"),
        limits=[record.limits for record in records],
        tier_widths=[tier_width(record.limits.max_items) for record in records],
        citation_bytes=entries.str.len_bytes().cast(pl.Int64).to_list(),
        citation_quarters=quarters_of(entries).to_list(),
        reorder=reorder,
    )
    return FusedBatch(batch, fused, dedup, inputs)


def assemble_records(
    records: Sequence[LaneRecord],
    *,
    policy: str | SelectionPolicy = CONTRACT,
    reorders: Mapping[str, Sequence[int]] | None = None,
    reranker: Reranker | None = None,
) -> BatchResult:
    """Assemble the package of every validated record (:func:`assemble_lanes` of their frames)."""
    return assemble_lanes(build_batch(records), policy=policy, reorders=reorders, reranker=reranker)


def assemble_lanes(
    batch: LaneBatch,
    *,
    policy: str | SelectionPolicy = CONTRACT,
    reorders: Mapping[str, Sequence[int]] | None = None,
    reranker: Reranker | None = None,
) -> BatchResult:
    """Assemble the package of every query of a batch of lanes.

    ``reranker`` is asked to reorder the survivors of every query whose request asked for a
    rerank (section 11). ``reorders`` maps a query id of the batch to a fixed permutation of its
    survivors (replaying a recorded reranker's answer): a list of the indices 0..N-1 of the N
    survivors of near-duplicate suppression, each once. Anything else is the caller's error, a
    :class:`~assembler.errors.UsageError` naming the query and the rule: a mapping of another
    shape, an id not in the batch, an order of the wrong length, an index out of range or
    repeated. (The HTTP reranker's invalid answer falls back instead, with the plan reason
    ``invalid_permutation``: that is the service's failure, not the caller's.)
    """
    records = batch.records
    index = {record.query_id: q for q, record in enumerate(records)}
    rerank = RerankStage(records, reranker, _static_orders(reorders, index))
    fused = fuse_batch(batch, rerank)
    dedup, inputs = fused.dedup, fused.inputs
    selection = get_policy(_policy_argument(policy)).select(fused.candidates, inputs)
    queries = _query_frame(records, selection, dedup, rerank.plans)
    omitted = omitted_entries(selection.decisions)
    packages = package_texts(
        queries,
        admitted_items(selection.decisions),
        cited_entries(batch.citations, selection.citation_ids),
        omitted,
    )
    texts, ids, summaries = collect(packages, queries.select("query_id"), _summaries(queries, omitted))
    return BatchResult(
        query_ids=ids["query_id"].to_list(),
        package_column=texts["package"],
        selection=selection.decisions,
        summaries=summaries,
    )


_REORDERS_SHAPE = "a mapping of query ids to lists of survivor indices (a permutation of each query's survivors)"


def _static_orders(reorders: Any, index: Mapping[str, int]) -> dict[int, tuple[int, ...]]:
    """The ``reorders`` argument checked for shape, by ``q``: every key a query id of the batch,
    every value a sequence of integers. Whether each is a permutation of its query's survivors is
    checked when the survivors are known (:class:`~assembler.stages.reorder.RerankStage`)."""
    if reorders is None:
        return {}
    if not isinstance(reorders, Mapping):
        raise UsageError(f"reorders must be {_REORDERS_SHAPE}, got {type(reorders).__name__}")
    try:
        items = list(reorders.items())
    except Exception as exc:  # the caller's mapping raised: its argument is unreadable
        raise UsageError(f"reorders cannot be read: its items() raised {type(exc).__name__}") from None
    orders: dict[int, tuple[int, ...]] = {}
    for key, order in items:
        if not isinstance(key, str):
            raise UsageError(f"reorders must be {_REORDERS_SHAPE}: a key is {type(key).__name__}, not a query id")
        query_id = str.__str__(key)  # a str subclass's characters, whatever it overrides
        where = f"reorders['{shown(query_id)}']"
        if query_id not in index:
            raise UsageError(f"{where}: no query of the batch has this id")
        if isinstance(order, str | bytes | bytearray | Mapping) or not isinstance(order, Iterable):
            raise UsageError(f"{where}: must be a list of survivor indices (integers), got {type(order).__name__}")
        try:
            values = list(order)
        except Exception as exc:
            raise UsageError(f"{where}: cannot be read: iterating it raised {type(exc).__name__}") from None
        indices: list[int] = []
        for position, value in enumerate(values):
            try:
                if isinstance(value, bool):
                    raise TypeError
                indices.append(operator.index(value))  # int, an int subclass's number, a NumPy integer
            except Exception:
                raise UsageError(
                    f"{where}[{position}]: must be an integer (a survivor index), got {type(value).__name__}"
                ) from None
        orders[index[query_id]] = tuple(indices)
    return orders


def _policy_argument(policy: str | SelectionPolicy) -> str | SelectionPolicy:
    """A policy name as its characters (a str subclass's own methods are not called)."""
    return str.__str__(policy) if isinstance(policy, str) else policy


def _query_frame(
    records: Sequence[QueryRecord], selection: Selection, dedup: pl.DataFrame, reranker_plans: Sequence[str]
) -> pl.LazyFrame:
    """One row per query: its id and search-limit cuts, and the :data:`QUERY_SCHEMA` columns.

    The one per-query Python step of the package texts: a record's limits, ids and ``plan.lanes``
    text (cached per distinct derived plan) are read off the record objects.
    """
    from_records = pl.DataFrame(
        [
            (
                record.query_id,
                record.search_limit_cuts,
                record.limits.max_items,
                record.limits.max_bytes,
                record.limits.max_tokens,
                lanes_plan_text(record),
            )
            for record in records
        ],
        schema={
            "query_id": pl.String,
            "search_limit_cuts": pl.Int64,
            "max_items": QUERY_SCHEMA["max_items"],
            "max_bytes": QUERY_SCHEMA["max_bytes"],
            "max_tokens": QUERY_SCHEMA["max_tokens"],
            "lanes_plan": QUERY_SCHEMA["lanes_plan"],
        },
        orient="row",
    )
    from_selection = pl.DataFrame(
        {
            "q": range(len(records)),
            "items_used": selection.items_used,
            "bytes_used": selection.bytes_used,
            "tokens_used": selection.tokens_used,
            "contradiction_groups": selection.contradiction_groups,
            "tier_width": selection.tier_widths,
            "reranker_plan": reranker_plans,
        },
        schema={
            name: QUERY_SCHEMA[name]
            for name in (
                "q",
                "items_used",
                "bytes_used",
                "tokens_used",
                "contradiction_groups",
                "tier_width",
                "reranker_plan",
            )
        },
    )
    return (
        pl.concat([from_selection.lazy(), from_records.lazy()], how="horizontal")
        .join(dedup.lazy(), on="q", how="left", maintain_order="left")
        .with_columns(pl.col("dedup_dropped").fill_null(0))
    )


def _summaries(queries: pl.LazyFrame, omitted: pl.DataFrame) -> pl.LazyFrame:
    """Per query: usage, omissions in total and by reason, search-limit cuts."""
    counts = (
        omitted.lazy()
        .group_by("q")
        .agg(omitted_total=pl.len(), **{f"omitted_{reason}": pl.col("reason").eq(reason).sum() for reason in REASONS})
    )
    return queries.join(counts, on="q", how="left", maintain_order="left").select(
        "query_id",
        "items_used",
        "bytes_used",
        "tokens_used",
        pl.col("omitted_total", *(f"omitted_{reason}" for reason in REASONS)).fill_null(0).cast(pl.Int64),
        "search_limit_cuts",
    )


def assemble_batch(
    records: Iterable[Mapping[str, Any]] | pl.DataFrame,
    *,
    overrides: Mapping[str, int] | None = None,
    policy: str | SelectionPolicy = CONTRACT,
    reorders: Mapping[str, Sequence[int]] | None = None,
    reranker: Reranker | None = None,
) -> BatchResult:
    """Validate and assemble lane-dump records; raise ``InputError`` on the first bad one.

    ``records`` are parsed JSON objects, or a Polars frame of lane-dump rows (as read from the
    Parquet form, where null means absent); a query id may appear once. ``overrides``
    (``max_items``/``max_bytes``/``max_tokens``, non-negative integers) replace every request's
    budget. ``policy`` is a policy or a registered name.
    """
    if isinstance(records, pl.DataFrame):
        records = [drop_nulls(row) for row in records.iter_rows(named=True)]
    elif isinstance(records, str | bytes | Mapping) or not isinstance(records, Iterable):
        raise UsageError(
            f"records must be an iterable of lane-dump objects or a Polars frame, got {type(records).__name__}"
        )
    checked = check_overrides(overrides)
    parsed: list[LaneRecord] = []
    seen: set[str] = set()
    for line, value in enumerate(records, start=1):
        record = _parse_argument_record(value, line, checked)
        repeated = repeated_query_id(record, seen)
        if repeated is not None:
            raise InputError(repeated)
        parsed.append(record)
    return assemble_records(parsed, policy=get_policy(_policy_argument(policy)), reorders=reorders, reranker=reranker)


_MEMORY = "<memory>"


def _parse_argument_record(value: Any, line: int, overrides: dict[str, int]) -> LaneRecord:
    """:func:`parse_record` of one in-memory record; whatever else fails while it is read (a dict,
    list or str subclass whose methods raise) is that record's :class:`InputError` too, naming
    the field whose value raised (found by reading the record again, node by node)."""
    try:
        record = parse_record(value, file=_MEMORY, line=line, overrides=overrides)
    except (AssemblerError, MemoryError):
        raise
    except Exception as exc:
        found = _unreadable(value, "", 0, set())
        if found is None:
            error = RecordError(_MEMORY, line, _plain_id(value), "", unexpected_rule(exc, "validating"))
        else:
            field, owner, raised = found
            error = RecordError(_MEMORY, line, _plain_id(value), field, f"cannot be read: its {owner} raised {raised}")
        raise InputError(error) from None
    if type(record.query_id) is not str or type(record.context) is not str:  # hashed and compared later
        for name in ("query_id", "context"):
            found = _unreadable(getattr(record, name), name, 0, set())
            if found is not None:
                rule = f"cannot be read: its {found[1]} raised {found[2]}"
                raise InputError(RecordError(_MEMORY, line, _plain_id(value), name, rule))
        record = replace(record, query_id=str.__str__(record.query_id), context=str.__str__(record.context))
    return record


def _plain_id(value: Any) -> str | None:
    """The record's ``query_id`` as plain characters, read without calling the record's methods."""
    try:
        query_id = dict.get(value, "query_id") if isinstance(value, dict) else None
        return str.__str__(query_id) if isinstance(query_id, str) else None
    except Exception:
        return None


_EXACT = (str, int, float, bool, type(None))


def _read_scalar(value: str | int | float) -> None:
    """What reading a string or number of a record may call on a subclass."""
    hash(value)
    str(value)
    repr(value)
    _ = value == value
    if isinstance(value, str):
        value.encode("utf-8")
        value.strip()
        len(value)


def _read_mapping(value: dict[Any, Any]) -> list[tuple[Any, Any]]:
    """A dict subclass's pairs, read through every method validation may call on it."""
    pairs = list(value.items())
    len(value)
    list(value)
    list(value.keys())
    for key, _ in pairs:
        _ = value[key], value.get(key), key in value
    return pairs


def _read_sequence(value: list[Any]) -> list[Any]:
    """A list subclass's elements, read through every method validation may call on it."""
    elements = list(value)
    len(value)
    for position in range(len(elements)):
        _ = value[position]
    return elements


def _unreadable(value: Any, path: str, depth: int, seen: set[int]) -> tuple[str, str, str] | None:
    """``(field, type name, exception name)`` of the first value (in document order) whose own
    methods raise when read the way validation reads JSON data; exact built-in types never do."""
    kind = type(value)
    if kind in _EXACT or depth > MAX_DEPTH or id(value) in seen:
        return None
    base = kind.__mro__[-2].__name__  # the built-in type it derives from
    owner = f"{shown(kind.__name__)} ({'an' if base == 'int' else 'a'} {base} subclass)"  # BadDict (a dict subclass)
    items: list[tuple[str, Any]] = []
    try:
        if isinstance(value, str | int | float):
            _read_scalar(value)
            return None
        if isinstance(value, dict):
            seen.add(id(value))
            pairs = list(dict.items(value)) if kind is dict else _read_mapping(value)
            for key, item in pairs:
                name = str.__str__(key) if isinstance(key, str) else f"<{type(key).__name__} key>"
                items += [(key_path(path, name), key), (key_path(path, name), item)]
        elif isinstance(value, list):
            seen.add(id(value))
            elements = list.copy(value) if kind is list else _read_sequence(value)
            items = [(join_path(path, f"[{i}]"), item) for i, item in enumerate(elements)]
        else:
            return None
    except Exception as exc:
        return path, owner, type(exc).__name__
    for item_path, item in items:
        found = _unreadable(item, item_path, depth + 1, seen)
        if found is not None:
            return found
    return None


def assemble(
    record: Mapping[str, Any], *, overrides: Mapping[str, int] | None = None, policy: str | SelectionPolicy = CONTRACT
) -> str:
    """The package text of one parsed lane-dump object.

    >>> import json
    >>> text = assemble({"query_id": "q", "context": "c", "request": {"origins": []},
    ...                  "lanes": {"passages": []}})
    >>> json.loads(text)["budget"]["bytes_used"]
    4
    """
    return assemble_batch([record], overrides=overrides, policy=policy).packages[0]


# --- the public decisions frame ---------------------------------------------------------------------

_SEP = "\x00"
_LANE_RANKS = pl.List(pl.Struct({"lane": pl.String, "rank": pl.Int64}))


def package_plans(result: BatchResult) -> pl.DataFrame:
    """Per ``q``: the resolved limits and the ``plan.selection`` numbers, as each package reports them."""
    plans = [json.loads(text) for text in result.packages]
    return pl.DataFrame(
        {
            "q": range(len(plans)),
            "max_items": [p["budget"]["limits"]["max_items"] for p in plans],
            "max_bytes": [p["budget"]["limits"]["max_bytes"] for p in plans],
            "max_tokens": [p["budget"]["limits"]["max_tokens"] for p in plans],
            "dedup_dropped": [p["plan"]["selection"]["dedup_dropped"] for p in plans],
            "contradiction_groups": [p["plan"]["selection"]["contradiction_groups"] for p in plans],
            "tier_width": [p["plan"]["selection"]["diversity_tier_width"] for p in plans],
        },
        schema_overrides={"q": pl.UInt32},
    ).with_columns(pl.exclude("q").cast(pl.Int64))


def _walk_columns(frame: pl.DataFrame) -> pl.DataFrame:
    """Items admitted so far (per unit, like ``bytes_after``), package and omission positions."""
    walked = frame.filter(pl.col("walk_step").is_not_null()).sort("q", "walk_step")
    walked = walked.with_columns(
        items_after=pl.col("admitted").cast(pl.Int64).cum_sum().over("q"),
        package_position=pl.when("admitted").then(pl.col("admitted").cast(pl.Int64).cum_sum().over("q") - 1),
    ).with_columns(items_after=pl.col("items_after").max().over("q", "unit"))
    # Omissions in the order the package lists them (one rule: package.omission_order).
    omitted = omission_order(frame).with_columns(omitted_position=pl.int_range(pl.len(), dtype=pl.Int64).over("q"))
    return frame.join(
        walked.select("q", "fused_rank", "items_after", "package_position"), on=["q", "fused_rank"], how="left"
    ).join(omitted.select("q", "fused_rank", "omitted_position"), on=["q", "fused_rank"], how="left")


def decision_frame(result: BatchResult) -> pl.DataFrame:
    """One row per fused candidate, sorted by query then fused rank, with every decision made:
    the public shape of :attr:`BatchResult.decisions` (docs/analysis.md lists the columns).
    ``duplicate_of`` names the candidate that made this one a near-duplicate (or, under the
    quality policy, the passage it was folded into)."""
    decisions = result.selection
    ids = pl.DataFrame(
        {"q": range(len(result.query_ids)), "query_id": result.query_ids}, schema_overrides={"q": pl.UInt32}
    )
    queries = result.plans.select("q", "max_items", "max_bytes", "max_tokens", "tier_width")
    survivors = decisions.select(
        "q", pl.col("candidate_id").alias("duplicate_of"), pl.col("fused_rank").alias("duplicate_of_rank")
    )
    lane_ranks = pl.col("lane_ranks_json").str.json_decode(_LANE_RANKS)
    frame = (
        decisions.join(ids, on="q")
        .join(survivors, on=["q", "duplicate_of"], how="left")
        .join(queries, on="q")
        .with_columns(
            name=pl.col("candidate_id").str.replace_all(_SEP, " | ", literal=True),
            duplicate_of_name=pl.col("duplicate_of").str.replace_all(_SEP, " | ", literal=True),
            lead_lane=pl.col("lane"),
            lead_rank=pl.col("lane_rank"),
            lanes=lane_ranks.list.eval(pl.element().struct.field("lane")),
            lane_ranks=lane_ranks.list.eval(pl.element().struct.field("rank")),
            near_duplicate=pl.col("reason").eq("duplicate_passage").fill_null(False),
            group=pl.when(pl.col("unit_size") > 1).then("unit"),
            novel=~pl.col("repeat"),
            decision=pl.when("admitted").then(pl.lit("admitted")).otherwise(pl.lit("omitted")),
            # From the measurement, not the text: a never-admissible group member has no item text.
            item_tokens=((pl.col("item_quarters") + 3) // 4).cast(pl.Int64),
        )
        .with_columns(lane_set=pl.col("lanes").list.join("+"), unit_size=pl.col("unit_size").cast(pl.Int64))
    )
    frame = _walk_columns(frame)
    columns: list[str | pl.Expr] = [
        "query_id",
        "q",
        "fused_rank",
        "candidate_id",
        "name",
        "kind",
        "source",
        "paragraph",
        "subject",
        "label",
        "weight",
        "text",
        "lead_lane",
        "lead_rank",
        "lanes",
        "lane_ranks",
        "lane_set",
        "score",
    ]
    columns += [
        "duplicate_of",
        "duplicate_of_name",
        "duplicate_of_rank",
        "near_duplicate",
        pl.col("position").alias("survivor_position"),
        "unit",
        "unit_size",
        "group",
        "tier",
        "tier_width",
        "novel",
        "admission_order",
        "walk_step",
        "admitted",
        "decision",
        "reason",
        "item_bytes",
        "item_tokens",
        "items_after",
        "bytes_after",
        "tokens_after",
        "package_position",
        "omitted_position",
        "max_items",
        "max_bytes",
        "max_tokens",
    ]
    return frame.select(columns).sort("q", "fused_rank")
