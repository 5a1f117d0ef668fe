"""The Parquet schemas: lane dumps in (one row per query, nested columns) and packages out."""

from __future__ import annotations

import pyarrow as pa

__all__ = ["LANE_DUMP_SCHEMA", "PACKAGE_SCHEMA"]

_LOCATOR = pa.struct([("kind", pa.string()), ("value", pa.string())])
_ATTRIBUTION = pa.struct(
    [
        ("source", pa.string()),
        ("weight", pa.float64()),
        ("count", pa.uint64()),
        ("paragraph", pa.uint32()),
        ("section", pa.string()),
        ("locator", _LOCATOR),
    ]
)
_ASSOCIATION = pa.struct(
    [
        ("subject", pa.string()),
        ("label", pa.string()),
        ("object", pa.string()),
        ("weight", pa.float64()),
        ("count", pa.uint64()),
        ("attributions", pa.list_(_ATTRIBUTION)),
    ]
)
_ACTIVATION = pa.struct([("strength", pa.float64()), ("path", pa.list_(pa.string())), ("association", _ASSOCIATION)])
_LANE_EVIDENCE = pa.struct([("rank", pa.uint64()), ("score", pa.float64())])
_PASSAGE = pa.struct(
    [
        ("source", pa.string()),
        ("paragraph", pa.uint32()),
        ("score", pa.float64()),
        ("text", pa.string()),
        ("lanes", pa.struct([("bm25", _LANE_EVIDENCE), ("vector", _LANE_EVIDENCE)])),
    ]
)
_COMMUNITY = pa.struct(
    [
        ("community", pa.string()),
        ("score", pa.float64()),
        ("text", pa.string()),
        ("paragraph", pa.uint32()),
        ("level", pa.uint64()),
        ("parent", pa.string()),
        ("concept_count", pa.uint64()),
        ("members", pa.list_(pa.struct([("name", pa.string()), ("strength", pa.float64())]))),
        ("members_truncated", pa.bool_()),
    ]
)
_CITATION_ENTRY = pa.struct(
    [
        ("source", pa.string()),
        ("paragraph", pa.uint32()),
        (
            "citation",
            pa.struct(
                [("text", pa.string()), ("source", pa.string()), ("section", pa.string()), ("locator", _LOCATOR)]
            ),
        ),
    ]
)
_LANE_PLAN = pa.struct([("ran", pa.bool_()), ("reason", pa.string()), ("floor", pa.float64())])
LANE_DUMP_SCHEMA = pa.schema(
    [
        ("query_id", pa.string()),
        ("context", pa.string()),
        (
            "request",
            pa.struct(
                [
                    ("origins", pa.list_(pa.string())),
                    ("labels", pa.list_(pa.string())),
                    ("text_fallback_query", pa.string()),
                    ("search_limit", pa.uint64()),
                    ("include_communities", pa.bool_()),
                    (
                        "budget",
                        pa.struct(
                            [("max_items", pa.uint64()), ("max_bytes", pa.uint64()), ("max_tokens", pa.uint64())]
                        ),
                    ),
                    ("rerank", pa.struct([("model", pa.string())])),
                    ("dice_floor", pa.float64()),
                    ("semantic_floor", pa.float64()),
                    ("resolve_limit", pa.uint64()),
                    ("activate_decay", pa.float64()),
                    ("activate_limit", pa.uint64()),
                ]
            ),
        ),
        (
            "lanes",
            pa.struct(
                [
                    ("graph_query", pa.list_(_ASSOCIATION)),
                    ("graph_activate", pa.list_(_ACTIVATION)),
                    ("passages", pa.list_(_PASSAGE)),
                    ("communities", pa.list_(_COMMUNITY)),
                    ("citations", pa.list_(_CITATION_ENTRY)),
                ]
            ),
        ),
        (
            "plan_lanes",
            pa.struct(
                [
                    (name, _LANE_PLAN)
                    for name in ("resolve", "query", "activate", "passages", "communities", "citations")
                ]
            ),
        ),
    ]
)
"""The Parquet form of a lane dump: one row per query, nested columns (see docs/lane-dump.md).

``null`` anywhere means absent; ``origins``/``labels`` are always lists; every ``score`` is stored
as the f64 it was parsed as (rounded to f32 on reading, as from JSON)."""

PACKAGE_SCHEMA = pa.schema(
    [
        ("query_id", pa.string()),
        ("package", pa.string()),
        ("items_used", pa.int64()),
        ("bytes_used", pa.int64()),
        ("tokens_used", pa.int64()),
        ("omitted_total", pa.int64()),
        ("omitted_budget_exceeded", pa.int64()),
        ("omitted_contradiction_group_exceeds_budget", pa.int64()),
        ("omitted_duplicate_passage", pa.int64()),
        ("omitted_evidence_in_passage", pa.int64()),
        ("search_limit_cuts", pa.int64()),
    ]
)
"""The Parquet form of the package stream: the package text plus summary columns."""
