"""Contradiction grouping into admission units (contract section 5), columnar.

Associations that survive near-duplicate suppression are bucketed by the exact pair
``(subject, label)``; a bucket of two or more is one contradiction group, admitted or omitted as a
whole and placed at its first member's position. Every other candidate is a unit of its own.
"""

from __future__ import annotations

from typing import Literal

import polars as pl

__all__ = ["group_contradictions"]


def group_contradictions(
    survivors: pl.DataFrame, *, disagreement: Literal["label", "sign"] = "label"
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Assign admission units; return ``(units, contradiction_groups per q)``.

    ``survivors`` needs ``q``, ``position`` (order in the possibly reordered survivor list),
    ``kind``, ``subject``, ``label``, ``weight``, ``candidate_id`` and ``id_json``. The result adds
    ``unit`` (0-based unit index per query, in unit order), ``unit_size`` and ``contradicts_json``
    (the item's ``contradicts`` array text, null when the candidate is in no group), sorted by
    ``(q, unit, position)``.

    ``disagreement="label"`` is the contract: every ``(subject, label)`` bucket of two or more is
    a group. ``"sign"`` (the quality policy) makes a group only of a bucket whose weights have
    opposite signs; the members of any other multi-valued bucket stay units of their own, placed
    together at the first member's position.
    """
    bucket = ["q", "subject", "label"]
    associations = survivors.filter(pl.col("kind") == "association")
    buckets = (
        associations.group_by(bucket)
        .agg(
            pl.len().alias("bucket_size"),
            pl.col("position").min().alias("bucket_start"),
            ((pl.col("weight").min() < 0) & (pl.col("weight").max() > 0)).alias("opposite_signs"),
        )
        .filter(pl.col("bucket_size") >= 2)
        .with_columns(atomic=pl.lit(True) if disagreement == "label" else pl.col("opposite_signs"))
    )
    groups = buckets.filter("atomic")
    members = associations.join(groups, on=bucket).select(*bucket, "candidate_id", "id_json")
    contradicts = (
        members.join(members, on=bucket, suffix="_other")
        .filter(pl.col("candidate_id") != pl.col("candidate_id_other"))
        .sort(["q", "candidate_id", "candidate_id_other"])
        .group_by(["q", "candidate_id"], maintain_order=True)
        .agg(pl.concat_str(pl.lit("["), pl.col("id_json_other").str.join(","), pl.lit("]")).alias("contradicts_json"))
    )
    atomic = pl.col("atomic").fill_null(False)
    units = (
        survivors.join(buckets.drop("opposite_signs"), on=bucket, how="left")
        .join(contradicts, on=["q", "candidate_id"], how="left")
        .with_columns(
            anchor=pl.coalesce("bucket_start", "position"),
            unit_key=pl.when(atomic).then(pl.col("bucket_start")).otherwise(pl.col("position")),
            unit_size=pl.when(atomic).then(pl.col("bucket_size")).otherwise(1),
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
    counts = groups.group_by("q").agg(pl.len().cast(pl.Int64).alias("contradiction_groups"))
    return units, counts
