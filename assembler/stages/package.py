"""Package out: item texts, their measurements, and the package text (contract sections 8.2, 9).

Item texts are concatenated columnar from fragments serialized once in ``lanes``; each item is
measured without its ``bytes``/``estimated_tokens`` keys, then stamped. The package text of a
query is a join of those ready texts in the contract's key order.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

import polars as pl

from assembler.contract.jsontext import escape_string, quarters_expr, utf8_bytes_expr
from assembler.contract.request import Limits
from assembler.stages.groups import CONTRADICTS_KEY

__all__ = ["DUPLICATE_PASSAGE", "MAX_LISTED_OMISSIONS", "QueryOutcome", "build_items", "render_package"]

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
    tail = pl.concat_str(pl.lit('"'), "kind", pl.lit('":'), "payload_json", pl.lit("}"))
    return (
        units.with_columns(_head=head, _tail=tail)
        .with_columns(_unstamped=pl.concat_str("_head", pl.lit(","), "_tail"))
        .with_columns(
            item_bytes=utf8_bytes_expr("_unstamped") + unbuilt_bytes,
            item_quarters=quarters_expr("_unstamped") + unbuilt_quarters,
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
                    pl.lit(","),
                    "_tail",
                )
            )
        )
        .drop("_head", "_tail", "_unstamped")
    )


def omission_text(id_json: str, kind: str, reason: str, duplicate_of_json: str | None = None) -> str:
    """One ``omitted`` entry."""
    extra = "" if duplicate_of_json is None else f',"duplicate_of":{duplicate_of_json}'
    return f'{{"candidate_id":{id_json},"kind":"{kind}","reason":"{reason}"{extra}}}'


@dataclass(frozen=True)
class QueryOutcome:
    """Everything the package text of one query is made of, already serialized or counted."""

    items: Sequence[str]
    citations: Sequence[str]
    items_used: int
    bytes_used: int
    tokens_used: int
    limits: Limits
    omitted: Sequence[tuple[str, str]]  # (reason, entry text) in package order
    lanes_plan: str
    dedup_dropped: int
    contradiction_groups: int
    tier_width: int
    reranker_plan: str


def render_package(outcome: QueryOutcome) -> str:
    """The compact package text in wire key order (section 9.1)."""
    limits = outcome.limits
    by_reason = Counter(reason for reason, _ in outcome.omitted)
    listed = ",".join(text for _, text in outcome.omitted[:MAX_LISTED_OMISSIONS])
    reasons = ",".join(f"{escape_string(reason)}:{count}" for reason, count in sorted(by_reason.items()))
    return (
        f'{{"items":[{",".join(outcome.items)}],"citations":[{",".join(outcome.citations)}],'
        f'"budget":{{"items_used":{outcome.items_used},"bytes_used":{outcome.bytes_used},'
        f'"tokens_used":{outcome.tokens_used},"limits":{{"max_items":{limits.max_items},'
        f'"max_bytes":{limits.max_bytes},"max_tokens":{limits.max_tokens}}}}},'
        f'"omitted":[{listed}],"omitted_total":{len(outcome.omitted)},"omitted_by_reason":{{{reasons}}},'
        f'"plan":{{"lanes":{outcome.lanes_plan},"selection":{{"dedup_dropped":{outcome.dedup_dropped},'
        f'"contradiction_groups":{outcome.contradiction_groups},'
        f'"diversity_tier_width":{outcome.tier_width}}},"reranker":{outcome.reranker_plan}}}}}'
    )
