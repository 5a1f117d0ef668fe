"""The wire key order of every object of a package, written out from the contract (for tests)."""

from __future__ import annotations

# Wire declaration order of every object in the package (§1.3, §9).
PACKAGE_KEYS = (
    "items",
    "citations",
    "budget",
    "omitted",
    "omitted_total",
    "omitted_by_reason",
    "plan",
)
ITEM_KEYS = (
    "candidate_id",
    "kind",
    "fused_rank",
    "lane_ranks",
    "citation_refs",
    "corroboration",
    "contradicts",
    "bytes",
    "estimated_tokens",
    "association",
    "passage",
    "community",
)
ORDERS: dict[str, tuple[str, ...]] = {
    "budget": ("items_used", "bytes_used", "tokens_used", "limits"),
    "limits": ("max_items", "max_bytes", "max_tokens"),
    "plan": ("lanes", "selection", "reranker"),
    "lanes": ("resolve", "query", "activate", "passages", "communities", "citations"),
    "selection": ("dedup_dropped", "contradiction_groups", "diversity_tier_width"),
    "reranker": ("configured", "ran", "model", "reason"),
    "lane_plan": ("ran", "reason", "floor"),
    "association": ("subject", "label", "object", "weight", "count", "attributions"),
    "attribution": ("source", "weight", "count", "paragraph", "section", "locator"),
    "locator": ("kind", "value"),
    "passage": ("source", "paragraph", "score", "text", "lanes"),
    "passage_lanes": ("bm25", "vector"),
    "lane_evidence": ("rank", "score"),
    "community": (
        "community",
        "score",
        "text",
        "paragraph",
        "level",
        "parent",
        "concept_count",
        "members",
        "members_truncated",
    ),
    "member": ("name", "strength"),
    "citation_entry": ("source", "paragraph", "citation"),
    "citation": ("text", "source", "section", "locator"),
    "omitted": ("candidate_id", "kind", "reason", "duplicate_of"),
    "lane_rank": ("lane", "rank"),
    "locator_ref": ("source", "paragraph"),
    "corroboration": ("sources", "attributions"),
}
