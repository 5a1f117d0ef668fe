"""Lane-dump records for the reranker tests, and package comparisons."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from assembler.pipeline import assemble_records
from assembler.stages.lanes import LaneRecord, parse_record

NOT_CONFIGURED = '{"configured":false,"ran":false,"reason":"not_configured"}'
NOT_REQUESTED = '{"configured":false,"ran":false}'
CONFIGURED_NOT_REQUESTED = '{"configured":true,"ran":false}'
MODEL = "bge-reranker-v2-m3"


def association(subject: str, label: str = "likes", obj: str = "sushi") -> dict[str, Any]:
    return {"subject": subject, "label": label, "object": obj, "weight": 1.0, "count": 1, "attributions": []}


def record(
    query_id: str = "q1",
    *,
    n: int = 4,
    rerank: dict[str, Any] | None = None,
    fallback: str | None = "what do they like",
    passages: Sequence[str] = (),
    communities: Sequence[str] = (),
    budget: dict[str, int] | None = None,
) -> dict[str, Any]:
    """``n`` associations s1..sn (graph_query ranks 1..n), then passages and communities."""
    request: dict[str, Any] = {"origins": ["s1", "s2"]}
    if fallback is not None:
        request["text_fallback_query"] = fallback
    if rerank is not None:
        request["rerank"] = rerank
    if budget is not None:
        request["budget"] = budget
    return {
        "query_id": query_id,
        "context": "ctx",
        "request": request,
        "lanes": {
            "graph_query": [association(f"s{i}") for i in range(1, n + 1)],
            "passages": [
                {
                    "source": f"p{i}.md",
                    "paragraph": i,
                    "score": 1.0,
                    "text": text,
                    "lanes": {"bm25": {"rank": i + 1, "score": 1.0}},
                }
                for i, text in enumerate(passages)
            ],
            "communities": [
                {"community": f"L0-{i}", "score": 0.5, "text": text, "paragraph": 0}
                for i, text in enumerate(communities)
            ]
            or None,
        },
    }


def parsed(*raw: dict[str, Any]) -> list[LaneRecord]:
    return [parse_record(r, line=i) for i, r in enumerate(raw, start=1)]


def baseline(records: Sequence[LaneRecord]) -> list[str]:
    """The packages without a reranker."""
    return assemble_records(records).packages


def reranker_plan(package: str) -> Any:
    return json.loads(package)["plan"]["reranker"]


def fused_ranks(package: str) -> list[int]:
    return [item["fused_rank"] for item in json.loads(package)["items"]]


def same_but_plan(package: str, base: str, plan: str) -> bool:
    """``package`` is byte-identical to the unconfigured ``base`` apart from ``plan.reranker`` = ``plan``."""
    for unconfigured in (NOT_CONFIGURED, NOT_REQUESTED):
        tail = f'"reranker":{unconfigured}}}}}'
        if base.endswith(tail):
            return package == base[: -len(tail)] + f'"reranker":{plan}}}}}'
    raise AssertionError("not an unconfigured package")
