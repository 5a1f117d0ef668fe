"""Near-duplicates opened up: the bigram Dice coefficients behind the verdicts, thresholds, kernel cost.

The verdicts are the pipeline's (:func:`~assembler.stages.neardup.dice_matches`, the survivor walk
:func:`~assembler.stages.neardup.survivor_walk`); this module adds the coefficient itself, so a heat map
can show how close each pair came, and re-runs the walk at other thresholds.

>>> m = dice_matrix(["青嶺酒造は蔵元である。", "青嶺酒造は蔵元である", "杜氏は高瀬"])
>>> bool(m[0, 1] >= 0.9), bool(m[0, 2] >= 0.9)
(True, False)
"""

from __future__ import annotations

import time
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt
import polars as pl

from assembler.contract.text import normalize_entry
from assembler.stages.neardup import bigram_codes, dice_matches, survivor_walk

__all__ = ["dice_matrix", "dice_pairs", "kernel_timings", "passage_pool", "threshold_sweep", "verdicts_at"]


def dice_matrix(texts: Sequence[str]) -> npt.NDArray[np.float64]:
    """Pairwise Dice coefficients of the normalized bigram sets (two empty sets: 1.0; diagonal 1.0).

    ``dice_matrix(texts) >= 0.9`` is exactly the verdict matrix of ``dice_matches``.
    """
    sets = [bigram_codes(normalize_entry(text)) for text in texts]
    n = len(sets)
    shared = np.zeros((n, n), dtype=np.float64)
    for i in range(n):
        for j in range(i + 1, n):
            shared[i, j] = shared[j, i] = np.intersect1d(sets[i], sets[j], assume_unique=True).size
    sizes = np.array([s.size for s in sets], dtype=np.float64)
    denom = sizes[:, None] + sizes[None, :]
    with np.errstate(divide="ignore", invalid="ignore"):
        dice: npt.NDArray[np.float64] = np.where(denom == 0.0, 1.0, 2.0 * shared / denom)
    dice[np.diag_indices(n)] = 1.0
    return dice


def verdicts_at(dice: npt.NDArray[np.float64], threshold: float) -> npt.NDArray[np.bool_]:
    """The near-duplicate verdicts a threshold would give (the contract's is 0.9)."""
    verdicts: npt.NDArray[np.bool_] = dice >= threshold
    return verdicts


def passage_pool(candidates: pl.DataFrame, query_id: str) -> pl.DataFrame:
    """The passages of one query in fused order: the pool the near-duplicate walk compares."""
    return candidates.filter((pl.col("query_id") == query_id) & (pl.col("kind") == "passage")).select(
        "fused_rank", "name", "source", "paragraph", "text", "near_duplicate", "duplicate_of_rank", "reason"
    )


def dice_pairs(candidates: pl.DataFrame) -> pl.DataFrame:
    """Every pair of passages of the same query with its Dice coefficient (``rank_a < rank_b``)."""
    rows = []
    passages = candidates.filter(pl.col("kind") == "passage").sort("q", "fused_rank")
    for (query_id,), pool in passages.group_by("query_id", maintain_order=True):
        dice = dice_matrix(pool["text"].to_list())
        ranks = pool["fused_rank"].to_list()
        for i, j in zip(*np.triu_indices(len(ranks), 1), strict=True):
            rows.append((query_id, ranks[i], ranks[j], float(dice[i, j])))
    schema = {"query_id": pl.String, "rank_a": pl.Int64, "rank_b": pl.Int64, "dice": pl.Float64}
    return pl.DataFrame(rows, schema=schema, orient="row")


def threshold_sweep(candidates: pl.DataFrame, thresholds: Sequence[float]) -> pl.DataFrame:
    """Passages each query would drop as near-duplicates at each threshold (the survivor walk re-run).

    ``pipeline`` is the count the pipeline itself dropped (at the contract's threshold).
    """
    rows = []
    passages = candidates.filter(pl.col("kind") == "passage").sort("q", "fused_rank")
    for (query_id,), pool in passages.group_by("query_id", maintain_order=True):
        dice = dice_matrix(pool["text"].to_list())
        pipeline = int(pool["near_duplicate"].sum())
        for threshold in thresholds:
            dropped = int((survivor_walk(verdicts_at(dice, threshold)) >= 0).sum())
            rows.append((query_id, threshold, pool.height, dropped, pipeline))
    return pl.DataFrame(
        rows,
        schema={
            "query_id": pl.String,
            "threshold": pl.Float64,
            "passages": pl.Int64,
            "dropped": pl.Int64,
            "pipeline": pl.Int64,
        },
        orient="row",
    )


def kernel_timings(texts: Sequence[str], sizes: Sequence[int], *, repeat: int = 3) -> pl.DataFrame:
    """Seconds (best of ``repeat``) of the near-duplicate step on the first ``n`` texts, per ``n``.

    ``prepare`` is normalization and bigram sets, ``matrix`` the all-pairs verdicts
    (:func:`~assembler.stages.neardup.dice_matches`), ``walk`` the survivor walk; ``pairs`` is n(n-1)/2.

    >>> kernel_timings(["a b", "a c", "b c"], [2, 3], repeat=1)["pairs"].to_list()
    [1, 3]
    """
    rows = []
    for n in sizes:
        pool = list(texts[:n])
        best = [float("inf")] * 3
        duplicates = 0
        for _ in range(repeat):
            t0 = time.perf_counter()
            sets = [bigram_codes(normalize_entry(text)) for text in pool]
            t1 = time.perf_counter()
            matches = dice_matches(sets)
            t2 = time.perf_counter()
            walk = survivor_walk(matches)
            t3 = time.perf_counter()
            best = [min(b, t) for b, t in zip(best, (t1 - t0, t2 - t1, t3 - t2), strict=True)]
            duplicates = int((walk >= 0).sum())
        rows.append((len(pool), len(pool) * (len(pool) - 1) // 2, *best, duplicates))
    return pl.DataFrame(
        rows,
        schema={
            "size": pl.Int64,
            "pairs": pl.Int64,
            "prepare": pl.Float64,
            "matrix": pl.Float64,
            "walk": pl.Float64,
            "duplicates": pl.Int64,
        },
        orient="row",
    )
