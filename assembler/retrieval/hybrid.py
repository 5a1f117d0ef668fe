"""Rank a lane, fuse BM25 and vector lanes into the contract's ``PassageHit`` list.

A lane is ranked by score descending, ties by document position; ranks are 1-based within the
lane's own pool (its top ``depth``; BM25 keeps only positive scores). A document's fused score is
``1/(60 + bm25_rank) + 1/(60 + vector_rank)`` over the lanes it appears in (f64, bm25 first),
rounded to f32 - the value written as ``PassageHit.score``; the list is ordered by that f32 score
descending, ties by (source, paragraph).

>>> import numpy as np
>>> rank_lane(np.array([0.0, 2.0, 1.0, 2.0], dtype=np.float32), depth=10, positive=True)
[(1, 2.0), (3, 2.0), (2, 1.0)]
>>> hits = fuse_hits([(0, 3.0), (1, 2.0)], [(1, 0.9), (2, 0.8)], keys=[("a", 0), ("b", 0), ("c", 0)])
>>> [(h.doc, h.bm25, h.vector) for h in hits]
[(1, (2, 2.0), (1, 0.9)), (0, (1, 3.0), None), (2, None, (2, 0.8))]
>>> hits[0].score == to_f32(1 / 62 + 1 / 61)
True

Lanes whose ranks are given (a run file's rank column) are fused by the same rule:

>>> [(h.doc, h.score == to_f32(1 / 63)) for h in fuse_ranked([(0, 3, 1.5)], [], keys={0: ("a", 0)})]
[(0, True)]
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from assembler.contract.jsontext import to_f32
from assembler.stages.fuse import RRF_K

__all__ = ["FusedHit", "fuse_hits", "fuse_ranked", "rank_lane"]

LaneEntry = tuple[int, float]
RankedEntry = tuple[int, int, float]
"""(document, rank, f32 score): one entry of a lane whose ranks are given."""


@dataclass(frozen=True)
class FusedHit:
    """One fused document: index, f32 fused score, and each lane's (rank, f32 score) if present."""

    doc: int
    score: float
    bm25: tuple[int, float] | None
    vector: tuple[int, float] | None


def rank_lane(scores: npt.NDArray[np.float32], depth: int, *, positive: bool = False) -> list[LaneEntry]:
    """The lane's top ``depth`` as (document, f32 score), score descending, ties by document index."""
    order = np.lexsort((np.arange(len(scores)), -scores.astype(np.float64)))
    out: list[LaneEntry] = []
    for doc in order[:depth] if not positive else order:
        value = float(scores[doc])
        if positive and not value > 0.0:
            break
        out.append((int(doc), to_f32(value)))
        if len(out) == depth:
            break
    return out


def fuse_hits(
    bm25: Sequence[LaneEntry], vector: Sequence[LaneEntry], keys: Sequence[tuple[str, int]]
) -> list[FusedHit]:
    """Reciprocal-rank fusion (k = 60) of two ranked lanes; ``keys[doc]`` = (source, paragraph) for ties."""
    return fuse_ranked(
        [(doc, rank, score) for rank, (doc, score) in enumerate(bm25, start=1)],
        [(doc, rank, score) for rank, (doc, score) in enumerate(vector, start=1)],
        keys,
    )


def fuse_ranked(
    bm25: Sequence[RankedEntry],
    vector: Sequence[RankedEntry],
    keys: Sequence[tuple[str, int]] | Mapping[int, tuple[str, int]],
) -> list[FusedHit]:
    """:func:`fuse_hits` for lanes that carry their own ranks: ``(doc, rank, score)`` entries, each
    document at most once per lane. ``1/(60 + rank)`` summed over the lanes (bm25 first, f64),
    rounded to f32; ordered by that score descending, ties by ``keys[doc]``."""
    lanes: dict[int, dict[str, tuple[int, float]]] = {}
    for name, lane in (("bm25", bm25), ("vector", vector)):
        for doc, rank, score in lane:
            lanes.setdefault(doc, {})[name] = (rank, score)
    hits = []
    for doc, evidence in lanes.items():
        total = 0.0
        for name in ("bm25", "vector"):
            if name in evidence:
                total += 1.0 / (RRF_K + evidence[name][0])
        hits.append(FusedHit(doc, to_f32(total), evidence.get("bm25"), evidence.get("vector")))
    hits.sort(key=lambda hit: (-hit.score, keys[hit.doc]))
    return hits
