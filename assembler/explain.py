"""A readable view of one query's selection, built from the pipeline's own decisions frame."""

from __future__ import annotations

import json

import polars as pl

from assembler.pipeline import BatchResult

__all__ = ["explain_frame", "render_explanation"]

_SEP = "\x00"


def explain_frame(result: BatchResult, query_id: str) -> pl.DataFrame:
    """One row per fused candidate of ``query_id``, in fused order, with every decision made.

    Raises ``KeyError`` when the query is not in the batch.
    """
    q = result.query_ids.index(query_id) if query_id in result.query_ids else None
    if q is None:
        raise KeyError(query_id)
    return (
        result.decisions.filter(pl.col("q") == q)
        .sort("fused_rank")
        .select(
            "fused_rank",
            "candidate_id",
            "kind",
            "lane_ranks_json",
            "source",
            "duplicate_of",
            "unit",
            "unit_size",
            "tier",
            "repeat",
            "walk_step",
            "admitted",
            "reason",
            "item_bytes",
            "bytes_after",
            "tokens_after",
        )
    )


def _short(candidate_id: str | None) -> str:
    return "" if candidate_id is None else candidate_id.replace(_SEP, " | ")


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
        lanes = ", ".join(f"{e['lane']}#{e['rank']}" for e in json.loads(row["lane_ranks_json"]))
        lines.append(f"  {row['fused_rank']:>4}  {row['kind']:<11} {_short(row['candidate_id'])}  [{lanes}]")
    duplicates = frame.filter(pl.col("duplicate_of").is_not_null())
    lines += ["", f"near-duplicate drops: {duplicates.height}"]
    for row in duplicates.iter_rows(named=True):
        lines.append(f"  #{row['fused_rank']} {_short(row['candidate_id'])}  -> kept {_short(row['duplicate_of'])}")
    groups = frame.filter(pl.col("unit_size") > 1).group_by("unit", maintain_order=True).agg("fused_rank")
    lines += ["", f"contradiction groups: {groups.height}"]
    for unit, ranks in groups.iter_rows():
        lines.append(f"  unit {unit}: fused ranks {', '.join(map(str, ranks))}")
    lines += ["", "admission walk (tier, novel/repeat source, decision, running usage):"]
    walked = frame.filter(pl.col("walk_step").is_not_null()).sort("walk_step")
    for row in walked.iter_rows(named=True):
        verdict = "admitted" if row["admitted"] else f"omitted {row['reason']}"
        novelty = "repeat" if row["repeat"] else "novel"
        lines.append(
            f"  step {row['walk_step']:>3}  tier {row['tier']:>2} {novelty:<6} #{row['fused_rank']:<4} "
            f"{verdict:<44} {row['item_bytes']:>6} B  used {row['bytes_after']} B / {row['tokens_after']} tok"
        )
    budget = package["budget"]
    lines += [
        "",
        f"package: {budget['items_used']} items, {budget['bytes_used']} bytes, {budget['tokens_used']} tokens; "
        f"omitted {package['omitted_total']} {package['omitted_by_reason']}",
    ]
    return "\n".join(lines)
