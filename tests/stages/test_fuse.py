"""Fusion: the RRF score is the lanes' contributions added left to right in lane-name order."""

from __future__ import annotations

import polars as pl
import pytest

from assembler.stages.fuse import RRF_K, fuse
from assembler.stages.lanes import CANDIDATE_SCHEMA, CITATION_SCHEMA, ORIGIN_SCHEMA

LANES = ["community", "graph_activate", "graph_query", "passage_bm25", "passage_fused", "passage_vector"]


def _candidates(rows: list[tuple[str, int]]) -> pl.DataFrame:
    """One query's entries of one candidate, as ``(lane, lane_rank)`` pairs."""
    base = {name: None for name in CANDIDATE_SCHEMA}
    entries = [
        {**base, "q": 0, "kind": "passage", "lane": lane, "lane_rank": rank, "canonical_key": "k", "candidate_id": "c"}
        for lane, rank in rows
    ]
    return pl.DataFrame(entries, schema=CANDIDATE_SCHEMA)


@pytest.mark.parametrize("count", range(1, len(LANES) + 1))
def test_a_candidate_in_every_lane_sums_its_contributions_left_to_right(count: int) -> None:
    ranks = [7, 1, 3, 11, 2, 5][:count]
    fused, _ = fuse(
        _candidates(list(zip(LANES, ranks, strict=False))),
        pl.DataFrame(schema=ORIGIN_SCHEMA),
        pl.DataFrame(schema=CITATION_SCHEMA),
    )
    expected = 0.0
    for rank in ranks:  # LANES is in lane-name order
        expected += 1.0 / (RRF_K + rank)
    assert fused["score"].to_list() == [expected]
    assert fused["lane_ranks_json"].item().count('"lane"') == count


def test_a_lane_repeated_keeps_its_best_rank_once() -> None:
    fused, dropped = fuse(
        _candidates([("passage_bm25", 4), ("passage_bm25", 2), ("passage_vector", 9)]),
        pl.DataFrame(schema=ORIGIN_SCHEMA),
        pl.DataFrame(schema=CITATION_SCHEMA),
    )
    assert fused["score"].to_list() == [1.0 / (RRF_K + 2) + 1.0 / (RRF_K + 9)]
    assert fused["lane_ranks_json"].item() == '[{"lane":"passage_bm25","rank":2},{"lane":"passage_vector","rank":9}]'
    assert dropped["dedup_dropped"].to_list() == [2]
