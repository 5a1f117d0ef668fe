"""One module per pipeline stage, in pipeline order: lanes in, fuse, neardup, reorder, groups,
diversity, admission, package (with plan). Each is columnar over a whole batch of queries."""

from __future__ import annotations

import polars as pl

__all__ = ["collect"]


def collect(*queries: pl.LazyFrame) -> list[pl.DataFrame]:
    """Run a stage's lazy queries, together, on Polars' in-memory engine.

    A stage is one lazy query rather than a chain of eager calls: each eager call plans and runs a
    query of its own, 0.1 to 0.3 ms whatever the rows, and on chunks of a few hundred queries those
    fixed costs were a third of a run (docs/performance.md, "Columnar end to end"). The in-memory
    engine: the default one costs about three times as much to start on frames this small.

    >>> ranked = pl.LazyFrame({"q": [1, 0, 1], "rank": [2, 1, 1]}).sort("q", "rank")
    >>> [frame] = collect(ranked)
    >>> frame.rows()
    [(0, 1), (1, 1), (1, 2)]
    """
    return pl.collect_all(queries, engine="in-memory")
