"""A readable view of one query's selection, built on the analysis frames (:mod:`assembler.analysis`)."""

from __future__ import annotations

import json

import polars as pl

from assembler.analysis.frames import candidate_frame, group_frame
from assembler.errors import counted
from assembler.pipeline import BatchResult

__all__ = ["WALK_LEGEND", "explain_frame", "render_explanation"]

WALK_LEGEND = (
    "admission walk (tier, novel/repeat source, decision, the item's own bytes, then the package's usage after it):",
    "  usage is the package's bytes_used / tokens_used so far: the items, the citation entries they bring",
    "  (each locator paid once) and the arrays' brackets and commas, so it can grow by more than the item",
)
"""The lines that head the walk in :func:`render_explanation`."""


def explain_frame(result: BatchResult, query_id: str) -> pl.DataFrame:
    """One row per fused candidate of ``query_id``, in fused order, with every decision made.

    The rows of :func:`~assembler.analysis.candidate_frame` for that query. Raises ``KeyError``
    when the query is not in the batch.
    """
    if query_id not in result.query_ids:
        raise KeyError(query_id)
    return candidate_frame(result).filter(pl.col("query_id") == query_id)


def render_explanation(result: BatchResult, query_id: str) -> str:
    """The terminal view: fused order, near-duplicate drops, groups, tiers, the walk and budget."""
    frame = explain_frame(result, query_id)
    package = json.loads(result.packages[result.query_ids.index(query_id)])
    limits = package["budget"]["limits"]
    lines = [
        f"query {query_id}: {frame.height} fused candidates, limits items {limits['max_items']} "
        f"bytes {limits['max_bytes']} tokens {limits['max_tokens']}, "
        f"tier width {package['plan']['selection']['diversity_tier_width']}",
        "",
        "fused order (lane ranks):",
    ]
    for row in frame.iter_rows(named=True):
        lanes = ", ".join(f"{lane}#{rank}" for lane, rank in zip(row["lanes"], row["lane_ranks"], strict=True))
        lines.append(f"  {row['fused_rank']:>4}  {row['name']}  [{lanes}]")  # the name starts with the kind
    duplicates = frame.filter(pl.col("duplicate_of").is_not_null())
    lines += ["", f"near-duplicate drops: {duplicates.height}"]
    for row in duplicates.iter_rows(named=True):
        lines.append(f"  #{row['fused_rank']} {row['name']}  -> kept {row['duplicate_of_name']}")
    groups = group_frame(frame)
    lines += ["", f"contradiction groups: {groups.height}"]
    for unit, ranks in groups.select("group", "fused_ranks").iter_rows():
        lines.append(f"  unit {unit}: fused ranks {', '.join(map(str, ranks))}")
    lines += ["", *WALK_LEGEND]
    walked = frame.filter(pl.col("walk_step").is_not_null()).sort("walk_step")
    for row in walked.iter_rows(named=True):
        verdict = "admitted" if row["admitted"] else f"omitted {row['reason']}"
        novelty = "novel" if row["novel"] else "repeat"
        lines.append(
            f"  step {row['walk_step']:>3}  tier {row['tier']:>2} {novelty:<6} #{row['fused_rank']:<4} "
            f"{verdict:<44} {row['item_bytes']:>6} B  used {row['bytes_after']} B / {row['tokens_after']} tok"
        )
    budget = package["budget"]
    reasons = ", ".join(f"{reason} {count}" for reason, count in package["omitted_by_reason"].items())
    lines += [
        "",
        f"package: {counted(budget['items_used'], 'item')}, {counted(budget['bytes_used'], 'byte')}, "
        f"{counted(budget['tokens_used'], 'token')}; "
        f"omitted {package['omitted_total']}" + (f" ({reasons})" if reasons else ""),
    ]
    return "\n".join(lines)
