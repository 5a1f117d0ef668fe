"""Package-level assessment: how well one evidence package supports an answer, from its text alone.

The package text is the one source of truth: it is parsed (Polars ``json_decode``, a batch of
packages at once) and every count, gap and ref is a column expression over the decoded items,
omission counts and plan. The assessment goes *beside* the package on the output line, never inside
it, so the package bytes stay exactly the contract's. The rules (thresholds, gap markers, ref order)
are tabled in the README ("Support assessment").
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import polars as pl

from assembler.contract.jsontext import escape_string
from assembler.stages.lanes import PLAN_LANE_NAMES

__all__ = [
    "ITEM_KINDS",
    "ITEM_LANES",
    "NOT_REQUESTED",
    "PACKAGE_VERSION",
    "STRONG_ITEMS",
    "STRONG_SOURCES",
    "assess_package",
    "assess_packages",
    "assessed_line",
    "assessment_texts",
]

PACKAGE_VERSION = 1
MAX_REFS = 6
STRONG_ITEMS = 3
STRONG_SOURCES = 2
ITEM_KINDS = ("association", "passage", "community")
ITEM_LANES = ("graph_query", "graph_activate", "passage_bm25", "passage_vector", "passage_fused", "community")
BUDGET_REASONS = ("budget_exceeded", "contradiction_group_exceeds_budget")
DUPLICATE = "duplicate_passage"
NO_ANCHORS = "no anchors resolved from 'origins'"
NOT_REQUESTED = frozenset(
    {"origins was empty", "no 'labels' given", "include_communities was false", "the requested limit is 0"}
)
"""Plan reasons of a lane the request did not ask for: listed as gaps, but no degrade of support."""

_LOCATOR = pl.Struct({"source": pl.String, "paragraph": pl.Int64})
_PACKAGE = pl.Struct(
    {
        "items": pl.List(
            pl.Struct(
                {
                    "candidate_id": pl.String,
                    "kind": pl.String,
                    "lane_ranks": pl.List(pl.Struct({"lane": pl.String})),
                    "citation_refs": pl.List(_LOCATOR),
                    "corroboration": pl.Struct({"sources": pl.List(pl.String)}),
                    "contradicts": pl.List(pl.String),
                    "passage": _LOCATOR,
                }
            )
        ),
        "omitted_total": pl.Int64,
        "omitted_by_reason": pl.Struct(dict.fromkeys((*BUDGET_REASONS, DUPLICATE), pl.Int64)),
        "plan": pl.Struct(
            {
                "lanes": pl.Struct(dict.fromkeys(PLAN_LANE_NAMES, pl.Struct({"ran": pl.Boolean, "reason": pl.String}))),
                "selection": pl.Struct({"contradiction_groups": pl.Int64}),
            }
        ),
    }
)
"""The parts of a package (contract section 9) the assessment reads; everything else is skipped."""


def _item_stats(items: pl.DataFrame) -> pl.DataFrame:
    """Per package: admitted items by kind, by lane, independent sources, admitted contradiction groups."""
    lanes = items.select("p", lane=pl.col("lane_ranks").list.eval(pl.element().struct.field("lane"))).explode("lane")
    by_lane = lanes.group_by("p").agg(**{f"lane_{name}": (pl.col("lane") == name).sum() for name in ITEM_LANES})
    sources = pl.concat_list(
        pl.col("corroboration").struct.field("sources").fill_null(pl.lit([], dtype=pl.List(pl.String))),
        pl.col("passage").struct.field("source"),
    ).list.drop_nulls()
    contradicts = pl.col("contradicts").fill_null(pl.lit([], dtype=pl.List(pl.String)))
    group_head = (contradicts.list.len() > 0) & (pl.col("candidate_id") < contradicts.list.min())
    stats = items.group_by("p").agg(
        **{f"kind_{kind}": (pl.col("kind") == kind).sum() for kind in ITEM_KINDS},
        sources=sources.explode().drop_nulls().n_unique(),
        groups_admitted=group_head.sum(),
    )
    return stats.join(by_lane, on="p", how="left")


def _refs(items: pl.DataFrame) -> pl.DataFrame:
    """Per package: the first six distinct locators in admission order (own passage locator, then refs)."""
    refs = pl.concat_list(pl.col("passage"), pl.col("citation_refs").fill_null(pl.lit([], dtype=pl.List(_LOCATOR))))
    return (
        items.select("p", ref=refs)
        .explode("ref")
        .filter(pl.col("ref").is_not_null())
        .unique(subset=["p", "ref"], keep="first", maintain_order=True)
        .group_by("p", maintain_order=True)
        .agg(pl.col("ref").head(MAX_REFS))
    )


def _lane_gap(name: str) -> pl.Expr:
    lane = pl.col("plan").struct.field("lanes").struct.field(name)
    reason = lane.struct.field("reason").fill_null("unspecified")
    return pl.when(lane.struct.field("ran").not_()).then(pl.concat_str(pl.lit(f"lane:{name}:"), reason))


def _degraded() -> pl.Expr:
    """True when a lane the request asked for did not run (see :data:`NOT_REQUESTED`)."""
    lanes = pl.col("plan").struct.field("lanes")
    resolve_ran = lanes.struct.field("resolve").struct.field("ran").fill_null(True)
    flags = []
    for name in PLAN_LANE_NAMES:
        lane = lanes.struct.field(name)
        reason = lane.struct.field("reason")
        by_request = reason.is_in(list(NOT_REQUESTED)).fill_null(False) | ((reason == NO_ANCHORS) & resolve_ran.not_())
        flags.append((lane.struct.field("ran").not_() & by_request.fill_null(False).not_()).fill_null(False))
    return pl.any_horizontal(flags)


def _count_gap(label: str, count: pl.Expr) -> pl.Expr:
    return pl.when(count > 0).then(pl.concat_str(pl.lit(label), count.cast(pl.String)))


def assess_packages(packages: Sequence[str]) -> pl.DataFrame:
    """The assessment of every package text, one row each in input order, columns in wire order."""
    decoded = (
        pl.DataFrame({"text": list(packages)}, schema={"text": pl.String})
        .with_row_index("p")
        .select("p", pkg=pl.col("text").str.json_decode(_PACKAGE))
        .unnest("pkg")
    )
    items = decoded.select("p", "items").explode("items").filter(pl.col("items").is_not_null()).unnest("items")
    frame = decoded.join(_item_stats(items), on="p", how="left").join(_refs(items), on="p", how="left").sort("p")
    reasons = pl.col("omitted_by_reason")
    omitted = {reason: reasons.struct.field(reason).fill_null(0) for reason in (*BUDGET_REASONS, DUPLICATE)}
    unrecognized = pl.col("omitted_total") - sum(omitted.values(), pl.lit(0))
    truncated = sum((omitted[reason] for reason in BUDGET_REASONS), unrecognized) > 0
    items_total = sum((pl.col(f"kind_{kind}").fill_null(0) for kind in ITEM_KINDS), pl.lit(0))
    sources = pl.col("sources").fill_null(0)
    groups_admitted = pl.col("groups_admitted").fill_null(0)
    groups_omitted = pl.col("plan").struct.field("selection").struct.field("contradiction_groups") - groups_admitted
    gaps = pl.concat_list(
        *(_lane_gap(name) for name in PLAN_LANE_NAMES),
        *(_count_gap(f"budget:{reason}:", omitted[reason]) for reason in BUDGET_REASONS),
        _count_gap("omitted:unrecognized_reason:", unrecognized),
        _count_gap("contradiction_groups:admitted:", groups_admitted),
        _count_gap("contradiction_groups:omitted:", groups_omitted),
        _count_gap(f"{DUPLICATE}:", omitted[DUPLICATE]),
    ).list.drop_nulls()
    support = (
        pl.when(items_total == 0)
        .then(pl.lit("none"))
        .when(sources == 0)
        .then(pl.lit("weak"))
        .when((items_total >= STRONG_ITEMS) & (sources >= STRONG_SOURCES) & _degraded().not_() & truncated.not_())
        .then(pl.lit("strong"))
        .otherwise(pl.lit("partial"))
    )
    return frame.select(
        support_level=support,
        items_by_kind=pl.struct([pl.col(f"kind_{kind}").fill_null(0).alias(kind) for kind in ITEM_KINDS]),
        items_by_lane=pl.struct([pl.col(f"lane_{lane}").fill_null(0).alias(lane) for lane in ITEM_LANES]),
        independent_sources=sources.cast(pl.Int64),
        unresolved_gaps=gaps,
        required_citation_refs=pl.col("ref").fill_null(pl.lit([], dtype=pl.List(_LOCATOR))),
        version=pl.lit(PACKAGE_VERSION, dtype=pl.Int64),
    )


def assessment_texts(packages: Sequence[str]) -> list[str]:
    """Each package's assessment as compact JSON text (strings escaped as ``escape_string`` does)."""
    if not packages:
        return []
    frame = assess_packages(packages)
    return frame.select(pl.struct(frame.columns).struct.json_encode()).to_series().to_list()


def assess_package(package: str) -> dict[str, Any]:
    """The assessment of one package text, as a dict in wire key order."""
    value: dict[str, Any] = json.loads(assessment_texts([package])[0])
    return value


def assessed_line(query_id: str, package: str, assessment: str) -> str:
    """One ``assemble --assess`` output line: ``{"query_id":..,"package":<package>,"assessment":{..}}``."""
    return f'{{"query_id":{escape_string(query_id)},"package":{package},"assessment":{assessment}}}\n'
