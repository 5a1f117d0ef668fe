"""Reciprocal rank fusion with exact-key dedup (contract sections 3 and 4), columnar.

One fused row per distinct ``candidate_id`` per query: the group's best rank in each lane, the
RRF score summed over those lanes (k = 60), the representative member (smallest
``(lane_rank, lane)``), the union of all members' origins projected onto the citation lookup
(``citation_refs``), and ``fused_rank``, never renumbered afterwards.
"""

from __future__ import annotations

import polars as pl

from assembler.stages import collect

__all__ = ["RRF_K", "fuse"]

RRF_K = 60.0


def fuse(candidates: pl.DataFrame, origins: pl.DataFrame, citations: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Fuse a batch's lane entries; return ``(fused, dedup_dropped per q)``.

    ``fused`` is sorted by ``(q, fused_rank)`` and carries, besides the representative's columns:
    ``fused_rank``, ``lane_ranks_json`` (the item's ``lane_ranks`` array text),
    ``citation_ids`` (row indices into ``citations`` in ``(source, paragraph)`` order) and
    ``citation_refs_json`` (the item's ``citation_refs`` array text).
    """
    keys = ["q", "candidate_id"]
    lanes = candidates.lazy()
    lane_best = (
        lanes.group_by([*keys, "lane"])
        .agg(pl.col("lane_rank").min())
        .sort([*keys, "lane"])
        .with_columns(
            contribution=1.0 / (RRF_K + pl.col("lane_rank").cast(pl.Float64)),
            lane_json=pl.concat_str(
                pl.lit('{"lane":"'), "lane", pl.lit('","rank":'), pl.col("lane_rank").cast(pl.String), pl.lit("}")
            ),
        )
    )
    scores = (
        lane_best.group_by(keys, maintain_order=True)
        .agg(pl.col("contribution"), pl.col("lane_json"))
        .select(
            *keys,
            score=_sequential_sums(pl.col("contribution")),
            lane_ranks_json=pl.concat_str(pl.lit("["), pl.col("lane_json").list.join(","), pl.lit("]")),
        )
    )
    representatives = lanes.sort([*keys, "lane_rank", "lane"]).unique(subset=keys, keep="first", maintain_order=True)
    refs = _citation_refs(origins, citations)
    fused = (
        representatives.join(scores, on=keys)
        .join(refs, on=keys, how="left")
        .with_columns(
            pl.col("citation_ids").fill_null(pl.lit([], dtype=pl.List(pl.UInt32))),
            pl.col("citation_refs_json").fill_null(pl.lit("[]")),
        )
        .sort(["q", "score", "kind", "canonical_key"], descending=[False, True, False, False])
        .with_columns(fused_rank=(pl.int_range(pl.len()).over("q") + 1).cast(pl.Int64))
    )
    dropped = (
        lanes.group_by("q")
        .agg(pl.len().alias("entries"), pl.col("candidate_id").n_unique().alias("distinct"))
        .select("q", (pl.col("entries") - pl.col("distinct")).cast(pl.Int64).alias("dedup_dropped"))
    )
    fused_frame, dropped_frame = collect(fused, dropped)
    return fused_frame, dropped_frame


# Every lane name there is (graph_query, graph_activate, passage_bm25, passage_vector,
# passage_fused, community): a candidate has at most one best rank in each.
_MAX_LANES = 6


def _sequential_sums(contributions: pl.Expr) -> pl.Expr:
    """Each list's sum added left to right, ((c0 + c1) + c2) + ..., so the float does not depend on
    the engine's summation order (a missing term adds 0.0, which leaves a positive sum unchanged)."""
    total = contributions.list.get(0)
    for index in range(1, _MAX_LANES):
        total = total + contributions.list.get(index, null_on_oob=True).fill_null(0.0)
    return total


def _citation_refs(origins: pl.DataFrame, citations: pl.DataFrame) -> pl.LazyFrame:
    """Association citation refs: merged origins that resolved, in ``(source, paragraph)`` order."""
    lookup = (
        citations.lazy()
        .with_row_index("citation_id")
        .select(
            "q",
            "citation_id",
            "ref_json",
            pl.col("source").alias("ref_source"),
            pl.col("paragraph").alias("ref_paragraph"),
        )
    )
    return (
        origins.lazy()
        .select("q", "candidate_id", pl.col("source").alias("ref_source"), pl.col("paragraph").alias("ref_paragraph"))
        .unique()
        .join(lookup, on=["q", "ref_source", "ref_paragraph"])
        .sort(["q", "candidate_id", "ref_source", "ref_paragraph"])
        .group_by(["q", "candidate_id"], maintain_order=True)
        .agg(pl.col("citation_id").alias("citation_ids"), pl.col("ref_json"))
        .select(
            "q",
            "candidate_id",
            "citation_ids",
            citation_refs_json=pl.concat_str(pl.lit("["), pl.col("ref_json").list.join(","), pl.lit("]")),
        )
    )
