"""Frames that explain a batch: one row per fused candidate, per (candidate, lane), per group, per query.

Everything is read off the pipeline's own outputs (``BatchResult.decisions``, ``summaries`` and the
package texts) and its stages (:func:`~assembler.stages.lanes.build_batch`, :func:`~assembler.stages.fuse.fuse`);
no selection rule is written a second time here.

>>> analysis = analyze("data/conformance/lanes.jsonl")
>>> analysis.query("evidence_duplicate_passage").select("fused_rank", "decision", "reason").rows()
[(1, 'admitted', None), (2, 'omitted', 'duplicate_passage')]
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl

from assembler.contract.request import resolve_limits
from assembler.pipeline import REASONS, BatchResult, assemble_records
from assembler.run.io import RawRecord, read_raw
from assembler.run.records import iter_records, stop_at_first
from assembler.selection import CONTRACT, SelectionPolicy
from assembler.stages.fuse import fuse
from assembler.stages.lanes import LANE_NAMES, LaneBatch, LaneRecord, build_batch, drop_nulls

__all__ = [
    "BatchAnalysis",
    "Source",
    "analyze",
    "candidate_frame",
    "decision_diff",
    "group_frame",
    "lane_frame",
    "load_records",
    "position_wins",
    "query_frame",
    "with_limits",
    "without_lane",
]

Source = str | Path | pl.DataFrame | Iterable[Mapping[str, Any] | LaneRecord]
"""A lane dump: a JSON Lines or Parquet path, a frame of lane-dump rows, parsed objects or records."""


def with_limits(record: LaneRecord, overrides: Mapping[str, int] | None) -> LaneRecord:
    """``record`` with its budget resolved again under ``overrides`` (as ``--max-*`` would)."""
    return dataclasses.replace(record, limits=resolve_limits(record.request.budget, dict(overrides or {})))


def load_records(source: Source, overrides: Mapping[str, int] | None = None) -> list[LaneRecord]:
    """Validated records of a lane dump; raise ``InputError`` on a bad or repeated record.

    >>> [r.limits.max_items for r in load_records("data/conformance/lanes.jsonl", {"max_items": 3})][:2]
    [3, 3]
    """
    options = dict(overrides or {})
    if isinstance(source, str | Path):
        raws: Iterable[RawRecord] = read_raw([str(source)])
    elif isinstance(source, pl.DataFrame):
        raws = (RawRecord("<frame>", i, drop_nulls(row), "") for i, row in enumerate(source.iter_rows(named=True), 1))
    else:
        items = list(source)
        if all(isinstance(item, LaneRecord) for item in items):
            return [with_limits(item, options) if options else item for item in items if isinstance(item, LaneRecord)]
        raws = (RawRecord("<memory>", i, item, "") for i, item in enumerate(items, 1))
    return [record for _, record in iter_records(raws, stop_at_first, options)]


def without_lane(records: Iterable[Mapping[str, Any]], lane: str) -> list[dict[str, Any]]:
    """Parsed lane-dump objects with one dump lane removed (``null``: it contributed nothing).

    >>> without_lane([{"query_id": "q", "lanes": {"passages": [], "citations": []}}], "passages")
    [{'query_id': 'q', 'lanes': {'passages': None, 'citations': []}}]
    """
    if lane not in LANE_NAMES:
        raise ValueError(f"unknown lane {lane!r} (expected one of {', '.join(LANE_NAMES)})")
    return [{**record, "lanes": {**record["lanes"], lane: None}} for record in records]


def query_frame(result: BatchResult) -> pl.DataFrame:
    """One row per query: ``summaries`` plus the limits and selection plan of its package."""
    counts = result.selection.group_by("q").agg(pl.len().cast(pl.Int64).alias("candidates"))
    return (
        result.summaries.with_columns(q=pl.int_range(pl.len(), dtype=pl.UInt32))
        .join(result.plans, on="q")
        .join(counts, on="q", how="left")
        .with_columns(pl.col("candidates").fill_null(0))
        .select("query_id", "q", pl.exclude("query_id", "q"))
    )


def candidate_frame(result: BatchResult, lanes: pl.DataFrame | None = None) -> pl.DataFrame:
    """``result.decisions`` (one row per fused candidate, every decision made), and with ``lanes``
    (a :func:`lane_frame`) also ``lane_entries`` (lane entries folded into the candidate by exact
    dedup), ``dedup_merged`` (``lane_entries - 1``) and ``contributions`` (each lane's RRF term, in
    the order of ``lanes``), placed after ``score``."""
    frame = result.decisions
    if lanes is None:
        return frame
    per_candidate = (
        lanes.sort("q", "fused_rank", "lane")
        .group_by("q", "fused_rank", maintain_order=True)
        .agg(pl.col("lane_entries").sum(), pl.col("contribution").alias("contributions"))
        .with_columns(dedup_merged=pl.col("lane_entries") - 1)
    )
    columns = frame.columns
    at = columns.index("score") + 1
    order = [*columns[:at], "lane_entries", "dedup_merged", "contributions", *columns[at:]]
    return frame.join(per_candidate, on=["q", "fused_rank"], how="left").select(order)


def lane_frame(result: BatchResult, batch: LaneBatch) -> pl.DataFrame:
    """One row per (fused candidate, lane): the lane's best rank, its entries, its RRF contribution.

    ``contribution`` is the score :func:`~assembler.stages.fuse.fuse` gives the candidate from that lane's
    entries alone, so the contributions of a candidate add up (in lane-name order) to its fused score.
    """
    candidates = batch.candidates
    per_lane = candidates.group_by("q", "candidate_id", "lane").agg(
        pl.col("lane_rank").min(), pl.len().cast(pl.Int64).alias("lane_entries")
    )
    scores = []
    for lane in sorted(set(candidates["lane"].to_list())):
        fused, _ = fuse(candidates.filter(pl.col("lane") == lane), batch.origins.clear(), batch.citations.clear())
        scores.append(
            fused.select("q", "candidate_id", pl.lit(lane).alias("lane"), pl.col("score").alias("contribution"))
        )
    contributions = (
        pl.concat(scores)
        if scores
        else pl.DataFrame(
            schema={"q": pl.UInt32, "candidate_id": pl.String, "lane": pl.String, "contribution": pl.Float64}
        )
    )
    ids = pl.DataFrame(
        {"q": range(len(result.query_ids)), "query_id": result.query_ids}, schema_overrides={"q": pl.UInt32}
    )
    outcome = result.selection.select(
        "q", "candidate_id", "fused_rank", "kind", "score", "admitted", "reason", "walk_step"
    )
    return (
        per_lane.join(contributions, on=["q", "candidate_id", "lane"])
        .join(outcome, on=["q", "candidate_id"])
        .join(ids, on="q")
        .select(
            "query_id",
            "q",
            "fused_rank",
            "candidate_id",
            "kind",
            "lane",
            "lane_rank",
            "lane_entries",
            "contribution",
            "score",
            "admitted",
            "reason",
            "walk_step",
        )
        .sort("q", "fused_rank", "lane")
    )


def group_frame(candidates: pl.DataFrame) -> pl.DataFrame:
    """One row per contradiction group (an atomic admission unit of two or more associations)."""
    return (
        candidates.filter(pl.col("group").is_not_null())
        .sort("q", "fused_rank")
        .group_by("query_id", "q", "group", maintain_order=True)
        .agg(
            pl.len().cast(pl.Int64).alias("members"),
            pl.col("subject").first(),
            pl.col("label").first(),
            pl.col("fused_rank").alias("fused_ranks"),
            pl.col("walk_step").min().alias("walk_step"),
            pl.col("tier").first(),
            pl.col("admitted").all().alias("admitted"),
            pl.col("admitted").any().alias("any_admitted"),
            pl.col("reason").first(),
            pl.col("item_bytes").sum().alias("bytes"),
            pl.col("item_tokens").sum().alias("tokens"),
        )
    )


def position_wins(candidates: pl.DataFrame, top: int = 10, by: str = "lead_lane") -> pl.DataFrame:
    """How often each value of ``by`` holds each of the first ``top`` fused positions.

    ``lead_lane`` is the lane of the candidate's representative entry (its best lane rank);
    ``lane_set`` tells single-lane from multi-lane candidates.
    """
    return (
        candidates.filter(pl.col("fused_rank") <= top)
        .group_by("fused_rank", by)
        .agg(pl.len().cast(pl.Int64).alias("count"))
        .with_columns(share=pl.col("count") / pl.col("count").sum().over("fused_rank"))
        .sort("fused_rank", "count", by, descending=[False, True, False])
    )


def decision_diff(before: pl.DataFrame, after: pl.DataFrame) -> pl.DataFrame:
    """Join two candidate frames of the same queries: rank and decision before and after.

    ``change`` is ``kept``/``lost``/``gained`` for admitted candidates and ``neither`` otherwise
    (a candidate missing on one side counts as not admitted there).
    """
    keys = ["query_id", "candidate_id"]
    columns = ["fused_rank", "admitted", "reason", "walk_step"]
    left = before.select(*keys, "kind", *columns)
    right = after.select(*keys, pl.col("kind").alias("kind_after"), *columns)
    joined = left.join(right, on=keys, how="full", coalesce=True, suffix="_after")
    was = pl.col("admitted").fill_null(False)
    now = pl.col("admitted_after").fill_null(False)
    return (
        joined.with_columns(
            kind=pl.coalesce("kind", "kind_after"),
            change=pl.when(was & now)
            .then(pl.lit("kept"))
            .when(was)
            .then(pl.lit("lost"))
            .when(now)
            .then(pl.lit("gained"))
            .otherwise(pl.lit("neither")),
        )
        .drop("kind_after")
        .sort("query_id", pl.coalesce("fused_rank", "fused_rank_after"))
    )


@dataclass(frozen=True)
class BatchAnalysis:
    """A batch assembled once, with the frames that explain it.

    ``candidates``: :func:`candidate_frame` (with lane contributions); ``lanes``: :func:`lane_frame`;
    ``queries``: :func:`query_frame`; ``result``: the pipeline's own :class:`BatchResult`.
    """

    records: Sequence[LaneRecord]
    result: BatchResult
    candidates: pl.DataFrame
    lanes: pl.DataFrame
    queries: pl.DataFrame

    def query(self, query_id: str) -> pl.DataFrame:
        """The candidates of one query in fused order; ``KeyError`` if it is not in the batch."""
        if query_id not in self.result.query_ids:
            raise KeyError(query_id)
        return self.candidates.filter(pl.col("query_id") == query_id)

    @property
    def groups(self) -> pl.DataFrame:
        """:func:`group_frame` of the batch."""
        return group_frame(self.candidates)

    def omitted_by_reason(self) -> pl.DataFrame:
        """Omissions per query and reason (every reason of the pipeline, zeros included)."""
        return self.queries.select("query_id", *(pl.col(f"omitted_{reason}").alias(reason) for reason in REASONS))


def analyze(
    source: Source, *, policy: SelectionPolicy = CONTRACT, overrides: Mapping[str, int] | None = None
) -> BatchAnalysis:
    """Assemble ``source`` once and explain it (``overrides`` replace every request's budget).

    >>> a = analyze("data/conformance/lanes.jsonl", overrides={"max_items": 1})
    >>> a.queries["items_used"].to_list()  # the two-member contradiction group cannot fit one slot
    [1, 1, 0, 1, 1]
    """
    records = load_records(source, overrides)
    result = assemble_records(records, policy=policy)
    lanes = lane_frame(result, build_batch(records))
    return BatchAnalysis(records, result, candidate_frame(result, lanes), lanes, query_frame(result))
