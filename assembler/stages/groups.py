"""Contradiction grouping into admission units (contract section 5), columnar and near-linear.

Associations that survive near-duplicate suppression are bucketed by the exact pair
``(subject, label)``; a bucket of two or more is one contradiction group, admitted or omitted as a
whole and placed at its first member's position. Every other candidate is a unit of its own.

Each member of a group carries ``contradicts``: the candidate ids of all the *other* members,
sorted ascending by string. That text is quadratic in the group's size (a group of 20,000 carries
20,000 x 19,999 ids), so it is never built by a pairwise join. Instead:

* :func:`group_contradictions` groups by key and measures each member's ``contradicts`` array by
  arithmetic from per-group sums (``contradicts_bytes``/``contradicts_quarters``), in time and
  memory linear in the number of survivors.
* A group of at most :data:`EAGER_GROUP_SIZE` members gets its texts at once, in the same query:
  each holds fewer ids than that bound, so building them is linear in the survivors (and a chunk
  of typical pools, whose groups are a few members each, needs no second pass).
* The budget walk needs only the measurements (it admits or refuses a group whole), so the
  admission policy runs it first and :func:`materialize_contradicts` then builds the texts of the
  larger groups it admitted, whose size is bounded by the query's ``max_bytes``. A large group
  that is never admitted (one of 20,000 members cannot fit 40 items) never has its text built.
"""

from __future__ import annotations

from typing import Literal

import polars as pl

from assembler.contract.jsontext import quarters_of, utf8_bytes_expr
from assembler.stages import collect

__all__ = ["CONTRADICTS_KEY", "EAGER_GROUP_SIZE", "group_contradictions", "materialize_contradicts"]

CONTRADICTS_KEY = ',"contradicts":'
"""What precedes the array in the item text; measured once here (ASCII: bytes = quarters)."""

EAGER_GROUP_SIZE = 32
"""The largest group whose ``contradicts`` texts :func:`group_contradictions` builds itself (at
most 31 ids each); a larger group's texts wait until the walk admits it."""


def group_contradictions(
    survivors: pl.DataFrame, *, disagreement: Literal["label", "sign"] = "label"
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Assign admission units and measure ``contradicts``; return ``(units, contradiction_groups per q)``.

    ``survivors`` needs ``q``, ``position`` (order in the possibly reordered survivor list),
    ``kind``, ``subject``, ``label``, ``weight``, ``candidate_id`` and ``id_json``. The result adds
    ``unit`` (0-based unit index per query, in unit order), ``unit_size``, ``contradicts_bytes``
    and ``contradicts_quarters`` (UTF-8 bytes and quarter-tokens of the item's ``contradicts``
    array text, null when the candidate is in no group) and ``contradicts_json`` (that text, for
    the members of groups of at most :data:`EAGER_GROUP_SIZE`; null for larger groups, whose
    texts :func:`materialize_contradicts` builds once they are admitted), sorted by
    ``(q, unit, position)``.

    A member's array is ``[`` + the other members' ``id_json`` joined by ``,`` + ``]``: with ``g``
    members whose ``id_json`` add up to ``S`` bytes, member ``i`` (``b_i`` bytes) has
    ``S - b_i + (g - 2) + 2`` bytes; quarters alike (brackets and commas are one quarter each).

    ``disagreement="label"`` is the contract: every ``(subject, label)`` bucket of two or more is
    a group. ``"sign"`` (the quality policy) makes a group only of a bucket whose weights have
    opposite signs; the members of any other multi-valued bucket stay units of their own, placed
    together at the first member's position.

    Everything is a group-by on the bucket key and joins on it: linear in the survivors.
    """
    bucket = ["q", "subject", "label"]
    associations = (
        survivors.lazy()
        .with_columns(_id_bytes=utf8_bytes_expr("id_json"), _id_quarters=quarters_of(survivors["id_json"]))
        .filter(pl.col("kind") == "association")
    )
    buckets = (
        associations.group_by(bucket)
        .agg(
            pl.len().cast(pl.Int64).alias("bucket_size"),
            pl.col("position").min().alias("bucket_start"),
            ((pl.col("weight").min() < 0) & (pl.col("weight").max() > 0)).alias("opposite_signs"),
            pl.col("_id_bytes").sum().alias("_sum_bytes"),
            pl.col("_id_quarters").sum().alias("_sum_quarters"),
        )
        .filter(pl.col("bucket_size") >= 2)
        .with_columns(atomic=pl.lit(True) if disagreement == "label" else pl.col("opposite_signs"))
    )
    groups = buckets.filter("atomic")
    measured = associations.join(groups, on=bucket).select(
        "q",
        "candidate_id",
        contradicts_bytes=pl.col("_sum_bytes") - pl.col("_id_bytes") + pl.col("bucket_size"),
        contradicts_quarters=pl.col("_sum_quarters") - pl.col("_id_quarters") + pl.col("bucket_size"),
    )
    atomic = pl.col("atomic").fill_null(False)
    units = (
        survivors.lazy()
        .join(buckets.drop("opposite_signs", "_sum_bytes", "_sum_quarters"), on=bucket, how="left")
        .join(measured, on=["q", "candidate_id"], how="left")
        .with_columns(
            anchor=pl.coalesce("bucket_start", "position"),
            unit_key=pl.when(atomic).then(pl.col("bucket_start")).otherwise(pl.col("position")),
            unit_size=pl.when(atomic).then(pl.col("bucket_size")).otherwise(1),
            contradicts_json=pl.lit(None, dtype=pl.String),
        )
        .sort(["q", "anchor", "unit_key", "position"])
        .with_columns(
            unit=(
                ((pl.col("anchor") != pl.col("anchor").shift(1)) | (pl.col("unit_key") != pl.col("unit_key").shift(1)))
                .fill_null(True)
                .cum_sum()
                .over("q")
                - 1
            ).cast(pl.Int64)
        )
        .drop("bucket_start", "bucket_size", "atomic", "anchor", "unit_key")
    )
    small = pl.col("contradicts_bytes").is_not_null() & (pl.col("unit_size") <= EAGER_GROUP_SIZE)
    units = _with_texts(units, units.filter(small))
    counts = groups.group_by("q").agg(pl.len().cast(pl.Int64).alias("contradiction_groups"))
    units_frame, counts_frame = collect(units, counts)
    return units_frame, counts_frame


def materialize_contradicts(units: pl.DataFrame) -> pl.DataFrame:
    """Fill ``contradicts_json`` for every group member in ``units`` that has none yet.

    ``units`` holds rows of :func:`group_contradictions`' result (the admission policy passes only
    the members of the groups the budget walk admitted: whole groups, bounded by the budget).
    """
    unbuilt = units.lazy().filter(pl.col("contradicts_bytes").is_not_null() & pl.col("contradicts_json").is_null())
    return collect(_with_texts(units.lazy(), unbuilt))[0]


def _with_texts(units: pl.LazyFrame, members: pl.LazyFrame) -> pl.LazyFrame:
    """``units`` with ``contradicts_json`` built for the rows of ``members`` (whole groups).

    The members' ``id_json`` are joined once per group, sorted by ``candidate_id`` (string order),
    and each member's array is that list with its own entry cut out (two slices at character
    offsets from a running sum), so the work is the size of the output: no pairwise join.
    """
    texts = (
        members.select("q", "unit", "candidate_id", "id_json")
        .sort("q", "unit", "candidate_id")
        .with_columns(_chars=pl.col("id_json").str.len_chars().cast(pl.Int64))
        .with_columns(
            # Character offset of the member's entry in the joined list: earlier entries and their commas.
            _start=(pl.col("_chars") + 1).cum_sum().over("q", "unit") - pl.col("_chars") - 1,
            _joined=pl.col("id_json").str.join(",").over("q", "unit"),
        )
        .select(
            "q",
            "candidate_id",
            _built=pl.concat_str(
                pl.lit("["),
                # Entries before this one, without the comma that led into it ...
                pl.col("_joined").str.slice(0, (pl.col("_start") - 1).clip(lower_bound=0)),
                # ... and the ones after it, with their leading comma unless this one was first.
                pl.col("_joined").str.slice(
                    pl.col("_start") + pl.col("_chars") + (pl.col("_start") == 0).cast(pl.Int64)
                ),
                pl.lit("]"),
            ),
        )
    )
    return (
        units.join(texts, on=["q", "candidate_id"], how="left", maintain_order="left")
        .with_columns(contradicts_json=pl.coalesce("_built", "contradicts_json"))
        .drop("_built")
    )
