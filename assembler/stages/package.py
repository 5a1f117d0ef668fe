"""Package out: item texts, their measurements, and the package text (contract sections 8.2, 9).

Item texts are concatenated columnar from fragments serialized once in ``lanes``; each item is
measured without its ``bytes``/``estimated_tokens`` keys, then stamped. The package texts of a
batch are one columnar query over those ready texts: per query, the admitted items, cited entries
and omission entries are joined in package order and concatenated in the contract's key order.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import chain
from typing import TypeVar

import numpy as np
import polars as pl

from assembler.contract.arrow import numpy_series
from assembler.contract.jsontext import escape_string, quarters_of, utf8_bytes_expr
from assembler.stages import collect
from assembler.stages.groups import CONTRADICTS_KEY

__all__ = [
    "DUPLICATE_PASSAGE",
    "MAX_LISTED_OMISSIONS",
    "OMISSION_ENTRY",
    "QUERY_SCHEMA",
    "admitted_items",
    "build_items",
    "cited_entries",
    "omission_order",
    "omitted_entries",
    "package_texts",
]

FrameT = TypeVar("FrameT", pl.DataFrame, pl.LazyFrame)

MAX_LISTED_OMISSIONS = 20
DUPLICATE_PASSAGE = "duplicate_passage"


def build_items(units: pl.DataFrame) -> pl.DataFrame:
    """Add ``item_json`` (stamped item text), ``item_bytes`` and ``item_quarters`` to each row.

    Needs ``id_json``, ``kind``, ``fused_rank``, ``lane_ranks_json``, ``citation_refs_json``,
    ``corroboration_sources_json`` (null: no corroboration), ``contradicts_json``,
    ``contradicts_bytes``, ``contradicts_quarters`` and ``payload_json``.

    ``contradicts_bytes`` null means no ``contradicts`` key. Otherwise the key is in the item and
    its array text is ``contradicts_json``, unless that is null: a contradiction group member
    whose text is not built (:mod:`assembler.stages.groups`; only admitted groups get theirs, after the
    walk), as it would be quadratic in the group's size. Such a row is measured by adding the
    array's measurements to those of the rest of the item (both counts are sums over characters),
    and its ``item_json`` is null.
    """
    corroboration = (
        pl.when(pl.col("corroboration_sources_json").is_not_null())
        .then(
            pl.concat_str(
                pl.lit(',"corroboration":{"sources":'),
                "corroboration_sources_json",
                pl.lit(',"attributions":'),
                "citation_refs_json",
                pl.lit("}"),
            )
        )
        .otherwise(pl.lit(""))
    )
    contradicts = (
        pl.when(pl.col("contradicts_json").is_not_null())
        .then(pl.concat_str(pl.lit(CONTRADICTS_KEY), "contradicts_json"))
        .otherwise(pl.lit(""))
    )
    unbuilt = pl.col("contradicts_json").is_null() & pl.col("contradicts_bytes").is_not_null()
    unbuilt_bytes = pl.when(unbuilt).then(len(CONTRADICTS_KEY) + pl.col("contradicts_bytes")).otherwise(0)
    unbuilt_quarters = pl.when(unbuilt).then(len(CONTRADICTS_KEY) + pl.col("contradicts_quarters")).otherwise(0)
    head = pl.concat_str(
        pl.lit('{"candidate_id":'),
        "id_json",
        pl.lit(',"kind":"'),
        "kind",
        pl.lit('","fused_rank":'),
        pl.col("fused_rank").cast(pl.String),
        pl.lit(',"lane_ranks":'),
        "lane_ranks_json",
        pl.lit(',"citation_refs":'),
        "citation_refs_json",
        corroboration,
        contradicts,
    )
    # The unstamped item is head + ',"' + kind + '":' + payload + '}': both measurements are sums
    # over characters, so it is measured by parts and the long payload is copied once, into the text.
    literals = pl.lit(len(',"') + len('":') + len("}")) + pl.col("kind").str.len_bytes().cast(pl.Int64)
    head_text = units.select(head.alias("_head")).to_series()
    items = (
        units.lazy()
        .with_columns(head_text, _head_quarters=quarters_of(head_text))
        .with_columns(
            item_bytes=utf8_bytes_expr("_head") + literals + utf8_bytes_expr("payload_json") + unbuilt_bytes,
            item_quarters=pl.col("_head_quarters") + literals + quarters_of(units["payload_json"]) + unbuilt_quarters,
        )
        .with_columns(
            item_json=pl.when(unbuilt)
            .then(pl.lit(None, dtype=pl.String))
            .otherwise(
                pl.concat_str(
                    "_head",
                    pl.lit(',"bytes":'),
                    pl.col("item_bytes").cast(pl.String),
                    pl.lit(',"estimated_tokens":'),
                    ((pl.col("item_quarters") + 3) // 4).cast(pl.String),
                    pl.lit(',"'),
                    "kind",
                    pl.lit('":'),
                    "payload_json",
                    pl.lit("}"),
                )
            )
        )
        .drop("_head", "_head_quarters")
    )
    return collect(items)[0]


OMISSION_ENTRY = pl.concat_str(
    pl.lit('{"candidate_id":'),
    "id_json",
    pl.lit(',"kind":"'),
    "kind",
    pl.lit('","reason":"'),
    "reason",
    pl.lit('"'),
    # Only a candidate dropped before the walk names what it duplicates (or was folded into).
    pl.when(pl.col("walk_step").is_null() & pl.col("duplicate_of_json").is_not_null())
    .then(pl.concat_str(pl.lit(',"duplicate_of":'), "duplicate_of_json"))
    .otherwise(pl.lit("")),
    pl.lit("}"),
)
"""One ``omitted`` entry, from ``id_json``, ``kind``, ``reason``, ``walk_step`` and ``duplicate_of_json``."""


def omission_order(decisions: FrameT) -> FrameT:
    """The omitted (not admitted) rows in package order per ``q``: those dropped before the walk
    (duplicates) in fused order, then those the walk refused, in walk order."""
    # A null walk step (dropped before the walk) sorts first; walk steps are distinct within a query.
    return decisions.filter(~pl.col("admitted")).sort("q", "walk_step", "fused_rank", nulls_last=False)


def omitted_entries(decisions: pl.DataFrame) -> pl.DataFrame:
    """``q``, ``reason`` and ``entry_json`` (:data:`OMISSION_ENTRY`) of every omission, in package order."""
    needed = decisions.lazy().select(
        "q", "admitted", "walk_step", "fused_rank", "id_json", "kind", "reason", "duplicate_of_json"
    )
    return collect(omission_order(needed).select("q", "reason", OMISSION_ENTRY.alias("entry_json")))[0]


def admitted_items(decisions: pl.DataFrame) -> pl.LazyFrame:
    """``q`` and ``item_json`` of every admitted item, in package (walk) order."""
    return (
        decisions.lazy()
        .filter("admitted")
        .select("q", "walk_step", "item_json")
        .sort("q", "walk_step")
        .drop("walk_step")
    )


def cited_entries(citations: pl.DataFrame, citation_ids: Sequence[Sequence[int]]) -> pl.LazyFrame:
    """``q`` and ``entry_json`` of every committed citation, in package order: by source, then
    paragraph (ties in commit order). ``citation_ids[q]`` are row numbers of ``citations``, which
    has ``source``, ``paragraph`` and ``entry_json``."""
    rows = pl.Series("citation_id", list(chain.from_iterable(citation_ids)), dtype=pl.Int64)
    owners = np.repeat(np.arange(len(citation_ids), dtype=np.uint32), [len(ids) for ids in citation_ids])
    return (
        citations.lazy()
        .select(pl.col("source", "paragraph", "entry_json").gather(rows))
        .with_columns(q=numpy_series(owners))
        .sort("q", "source", "paragraph", maintain_order=True)
        .select("q", "entry_json")
    )


QUERY_SCHEMA: dict[str, pl.DataType] = {
    "q": pl.UInt32(),
    "items_used": pl.Int64(),
    "bytes_used": pl.Int64(),
    "tokens_used": pl.Int64(),
    "max_items": pl.UInt64(),
    "max_bytes": pl.UInt64(),
    "max_tokens": pl.UInt64(),
    "lanes_plan": pl.String(),
    "dedup_dropped": pl.Int64(),
    "contradiction_groups": pl.Int64(),
    "tier_width": pl.Int64(),
    "reranker_plan": pl.String(),
}
"""The per-query columns :func:`package_texts` reads: usage, limits, and ``plan`` texts and numbers."""


def package_texts(
    queries: pl.LazyFrame, items: pl.LazyFrame, citations: pl.LazyFrame, omitted: pl.DataFrame
) -> pl.LazyFrame:
    """The compact package text (``package``) of every row of ``queries``, in its order (section 9.1).

    ``queries`` has the :data:`QUERY_SCHEMA` columns (others are ignored); ``items`` and
    ``citations`` are ``q``, ``item_json``/``entry_json`` rows and ``omitted`` ``q``, ``reason``,
    ``entry_json`` rows, each in package order (:func:`admitted_items`, :func:`cited_entries`,
    :func:`omitted_entries`). The first :data:`MAX_LISTED_OMISSIONS` omissions are listed;
    ``omitted_total`` and ``omitted_by_reason`` (reasons ascending) count them all.
    """
    escaped = {reason: escape_string(reason) for reason in omitted["reason"].unique().to_list()}
    lists = (
        items.group_by("q").agg(items=pl.col("item_json").str.join(",")),
        citations.group_by("q").agg(citations=pl.col("entry_json").str.join(",")),
        omitted.lazy()
        .group_by("q")
        .agg(omitted=pl.col("entry_json").head(MAX_LISTED_OMISSIONS).str.join(","), omitted_total=pl.len()),
        omitted.lazy()
        .group_by("q", "reason")
        .len()
        .group_by("q")
        .agg(
            by_reason=pl.concat_str(
                pl.col("reason").replace_strict(escaped, return_dtype=pl.String),
                pl.lit(":"),
                pl.col("len").cast(pl.String),
            )
            .sort_by("reason")
            .str.join(",")
        ),
    )
    frame = queries
    for listed in lists:
        frame = frame.join(listed, on="q", how="left", maintain_order="left")

    def number(name: str) -> pl.Expr:
        return pl.col(name).cast(pl.String)

    def joined(name: str) -> pl.Expr:
        return pl.col(name).fill_null("")

    text = pl.concat_str(
        pl.lit('{"items":['),
        joined("items"),
        pl.lit('],"citations":['),
        joined("citations"),
        pl.lit('],"budget":{"items_used":'),
        number("items_used"),
        pl.lit(',"bytes_used":'),
        number("bytes_used"),
        pl.lit(',"tokens_used":'),
        number("tokens_used"),
        pl.lit(',"limits":{"max_items":'),
        number("max_items"),
        pl.lit(',"max_bytes":'),
        number("max_bytes"),
        pl.lit(',"max_tokens":'),
        number("max_tokens"),
        pl.lit('}},"omitted":['),
        joined("omitted"),
        pl.lit('],"omitted_total":'),
        pl.col("omitted_total").fill_null(0).cast(pl.String),
        pl.lit(',"omitted_by_reason":{'),
        joined("by_reason"),
        pl.lit('},"plan":{"lanes":'),
        "lanes_plan",
        pl.lit(',"selection":{"dedup_dropped":'),
        number("dedup_dropped"),
        pl.lit(',"contradiction_groups":'),
        number("contradiction_groups"),
        pl.lit(',"diversity_tier_width":'),
        number("tier_width"),
        pl.lit('},"reranker":'),
        "reranker_plan",
        pl.lit("}}"),
    )
    return frame.select(text.alias("package"))
