"""Contradiction grouping into admission units (contract section 5), columnar.

Associations that survive near-duplicate suppression are bucketed by the exact pair
``(subject, label)``; a bucket of two or more is one contradiction group, admitted or omitted as a
whole and placed at its first member's position. Every other candidate is a unit of its own.
"""

from __future__ import annotations

import polars as pl

__all__ = ["group_contradictions"]


def group_contradictions(survivors: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Assign admission units; return ``(units, contradiction_groups per q)``.

    ``survivors`` needs ``q``, ``position`` (order in the possibly reordered survivor list),
    ``kind``, ``subject``, ``label``, ``candidate_id`` and ``id_json``. The result adds ``unit``
    (0-based unit index per query, in unit order), ``unit_size`` and ``contradicts_json`` (the
    item's ``contradicts`` array text, null when the candidate is in no group), sorted by
    ``(q, unit, position)``.
    """
    bucket = ["q", "subject", "label"]
    associations = survivors.filter(pl.col("kind") == "association")
    buckets = (
        associations.group_by(bucket)
        .agg(pl.len().alias("bucket_size"), pl.col("position").min().alias("bucket_start"))
        .filter(pl.col("bucket_size") >= 2)
    )
    members = associations.join(buckets, on=bucket).select(*bucket, "candidate_id", "id_json")
    contradicts = (
        members.join(members, on=bucket, suffix="_other")
        .filter(pl.col("candidate_id") != pl.col("candidate_id_other"))
        .sort(["q", "candidate_id", "candidate_id_other"])
        .group_by(["q", "candidate_id"], maintain_order=True)
        .agg(pl.concat_str(pl.lit("["), pl.col("id_json_other").str.join(","), pl.lit("]")).alias("contradicts_json"))
    )
    units = (
        survivors.join(buckets, on=bucket, how="left")
        .join(contradicts, on=["q", "candidate_id"], how="left")
        .with_columns(unit_key=pl.coalesce("bucket_start", "position"), unit_size=pl.col("bucket_size").fill_null(1))
        .sort(["q", "unit_key", "position"])
        .with_columns(unit=(pl.col("unit_key").rank("dense").over("q") - 1).cast(pl.Int64))
        .drop("bucket_start", "bucket_size", "unit_key")
    )
    counts = buckets.group_by("q").agg(pl.len().cast(pl.Int64).alias("contradiction_groups"))
    return units, counts
