"""Budgets: what a batch uses and omits as one limit tightens, and which limit binds.

Every number comes from running the pipeline (records are validated once; only the resolved
limits change between runs), never from re-doing the budget arithmetic.

>>> sweep = budget_sweep("data/conformance/lanes.jsonl", "max_items", [1, 40])
>>> sweep.group_by("budget").agg(pl.col("items_used").sum()).sort("budget").rows()
[(1, 4), (40, 11)]
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import polars as pl

from assembler.analysis.frames import Source, load_records, query_frame, with_limits
from assembler.contract.request import DEFAULT_LIMITS, LIMIT_CEILINGS
from assembler.pipeline import BatchResult, assemble_records
from assembler.selection import CONTRACT, SelectionPolicy
from assembler.stages.lanes import LaneRecord

__all__ = ["LIMIT_KEYS", "binding_limits", "budget_sweep", "limit_key"]

LIMIT_KEYS = tuple(vars(DEFAULT_LIMITS))
"""``max_items``, ``max_bytes``, ``max_tokens``."""

_UNBOUNDED = 1 << 62


def limit_key(name: str) -> str:
    """``items``/``bytes``/``tokens`` or the ``max_`` names, as the ``max_`` name.

    >>> limit_key("tokens"), limit_key("max_bytes")
    ('max_tokens', 'max_bytes')
    """
    key = name if name.startswith("max_") else f"max_{name}"
    if key not in LIMIT_KEYS:
        raise ValueError(f"unknown limit {name!r} (expected one of {', '.join(LIMIT_KEYS)})")
    return key


def budget_sweep(
    source: Source,
    key: str,
    values: Sequence[int],
    *,
    policy: SelectionPolicy = CONTRACT,
    fixed: Mapping[str, int] | None = None,
) -> pl.DataFrame:
    """One row per (budget value, query): :func:`~assembler.analysis.query_frame` at each value.

    ``key`` is the limit swept (``items``, ``bytes``, ``tokens`` or the ``max_`` names); ``fixed``
    overrides hold for every run. ``budget`` is the value asked for (the resolved limits, after
    ceilings, are in ``max_items``/``max_bytes``/``max_tokens``).
    """
    swept = limit_key(key)
    base = {limit_key(k): v for k, v in (fixed or {}).items()}
    records = load_records(source)
    result = _assemble_grid(records, [{**base, swept: value} for value in values], policy)
    budgets = pl.Series("budget", [value for value in values for _ in records], dtype=pl.Int64)
    frame = query_frame(result).with_columns(q=pl.col("q") % max(len(records), 1))
    return frame.select(pl.lit(swept).alias("key"), budgets, pl.all())


def _assemble_grid(
    records: Sequence[LaneRecord], settings: Sequence[Mapping[str, int]], policy: SelectionPolicy
) -> BatchResult:
    """Every record under every override setting, assembled as one batch (setting-major order).

    Queries are independent in the pipeline, so this equals one run per setting, without paying
    each run's fixed cost again.
    """
    return assemble_records([with_limits(record, setting) for setting in settings for record in records], policy=policy)


def _admitted(decisions: pl.DataFrame, n_queries: int) -> list[list[int]]:
    """The fused ranks admitted per query."""
    found: list[list[int]] = [[] for _ in range(n_queries)]
    for q, rank in decisions.filter("admitted").sort("q", "fused_rank").select("q", "fused_rank").iter_rows():
        found[q].append(rank)
    return found


def binding_limits(
    source: Source, overrides: Mapping[str, int] | None = None, *, policy: SelectionPolicy = CONTRACT
) -> pl.DataFrame:
    """Which limit binds each query.

    Bytes or tokens bind when lifting that limit alone (to its ceiling; ``max_tokens``: unbounded)
    changes what is admitted; the batch is assembled again for each. Items bind when the package
    is full (``items_used == max_items``) and something was refused: ``max_items`` also sets the
    diversity tier width, so lifting it would reorder admission rather than isolate the limit.
    ``binding`` joins the names that bind (``items+tokens``), is ``joint`` when the budget refused
    something no single limit explains (a unit over two limits at once, or a contradiction group
    larger than ``max_items``), and ``none`` when nothing was refused.

    >>> binding_limits("data/conformance/lanes.jsonl", {"max_tokens": 150})["binding"].to_list()
    ['items', 'none', 'tokens', 'none', 'tokens']
    """
    base = {limit_key(k): v for k, v in (overrides or {}).items()}
    records = load_records(source)
    n = len(records)
    lifts = ("max_bytes", "max_tokens")
    settings = [base] + [{**base, key: LIMIT_CEILINGS[key] or _UNBOUNDED} for key in lifts]
    grid = _assemble_grid(records, settings, policy)
    admitted = _admitted(grid.selection, len(settings) * n)
    refused = pl.col("omitted_budget_exceeded") + pl.col("omitted_contradiction_group_exceeds_budget")
    frame = (
        query_frame(grid)
        .head(n)
        .with_columns(refused=refused, binds_items=(refused > 0) & (pl.col("items_used") == pl.col("max_items")))
    )
    lifted = {
        f"binds_{key.removeprefix('max_')}": [admitted[q] != admitted[(i + 1) * n + q] for q in range(n)]
        for i, key in enumerate(lifts)
    }
    flags = ["binds_items", *lifted]
    names = [pl.when(pl.col(flag)).then(pl.lit(flag.removeprefix("binds_"))) for flag in flags]
    return (
        frame.with_columns(pl.DataFrame(lifted))
        .with_columns(
            binding=pl.when(pl.col("refused") == 0)
            .then(pl.lit("none"))
            .otherwise(pl.concat_str(names, separator="+", ignore_nulls=True).replace("", "joint"))
        )
        .select(
            "query_id",
            "items_used",
            "bytes_used",
            "tokens_used",
            "max_items",
            "max_bytes",
            "max_tokens",
            "refused",
            *flags,
            "binding",
        )
    )
