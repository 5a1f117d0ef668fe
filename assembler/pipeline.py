"""The pipeline: lanes in, fuse, select (a policy), package out — for a whole batch at once."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import polars as pl

from assembler.contract.jsontext import quarters_of
from assembler.contract.request import check_overrides
from assembler.errors import InputError
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


@dataclass(frozen=True)
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


@dataclass(frozen=True)
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
    rerank (section 11). ``reorders`` maps a query id to a fixed permutation of its survivors
    (replaying a reranker's answer); an invalid one leaves the deterministic order.
    """
    records = batch.records
    index = {record.query_id: q for q, record in enumerate(records)}
    rerank = RerankStage(
        records, reranker, {index[qid]: order for qid, order in (reorders or {}).items() if qid in index}
    )
    fused = fuse_batch(batch, rerank)
    dedup, inputs = fused.dedup, fused.inputs
    selection = get_policy(policy).select(fused.candidates, inputs)
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
    checked = check_overrides(overrides)
    parsed: list[LaneRecord] = []
    seen: set[str] = set()
    for line, value in enumerate(records, start=1):
        record = parse_record(value, line=line, overrides=checked)
        repeated = repeated_query_id(record, seen)
        if repeated is not None:
            raise InputError(repeated)
        parsed.append(record)
    return assemble_records(parsed, policy=get_policy(policy), reorders=reorders, reranker=reranker)


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
