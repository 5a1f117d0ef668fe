"""Diversity tiering (contract section 7), columnar.

Units are cut into consecutive tiers of ``tier_width`` units; inside a tier, units whose primary
source is novel come first, repeats after, each in their original order. A source is novel in a
unit exactly when that unit is the source's first occurrence in the whole unit order (an unsourced
unit is always novel): a source seen in an earlier tier is in ``seen``, and one seen earlier in the
same tier was recorded there. So the contract's sequential rule needs no loop.
"""

from __future__ import annotations

import polars as pl

from assembler.stages import collect

__all__ = ["tier_units", "tier_width", "tiered"]


def tier_width(max_items: int) -> int:
    """``max(1, max_items // 4)`` on the resolved ``max_items``."""
    return max(1, max_items // 4)


def tier_units(units: pl.DataFrame) -> pl.DataFrame:
    """Add ``admission_order`` (0-based per query) to every row of ``units``.

    ``units`` needs ``q``, ``unit``, ``position``, ``source`` (primary source, null if
    unsourced) and ``tier_width``; a unit's source is that of its first member.
    """
    return collect(tiered(units.lazy()))[0]


def tiered(units: pl.LazyFrame) -> pl.LazyFrame:
    """:func:`tier_units` as a lazy query, for a stage that goes on with the result."""
    heads = (
        units.sort(["q", "unit", "position"])
        .unique(subset=["q", "unit"], keep="first", maintain_order=True)
        .select("q", "unit", "source", "tier_width")
    )
    first_unit = heads.drop_nulls("source").group_by(["q", "source"]).agg(pl.col("unit").min().alias("first_unit"))
    ordered = (
        heads.join(first_unit, on=["q", "source"], how="left")
        .with_columns(
            tier=pl.col("unit") // pl.col("tier_width"),
            repeat=pl.col("first_unit").is_not_null() & (pl.col("first_unit") != pl.col("unit")),
        )
        .sort(["q", "tier", "repeat", "unit"])
        .with_columns(admission_order=pl.int_range(pl.len()).over("q").cast(pl.Int64))
        .select("q", "unit", "tier", "repeat", "admission_order")
    )
    return units.join(ordered, on=["q", "unit"], maintain_order="left")
