"""The reorder seam: what a reranker is shown, and how its answer and plan are used."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from assembler import assemble_batch
from assembler.pipeline import assemble_records
from assembler.stages.lanes import parse_record
from assembler.stages.reorder import RerankDecision, RerankRequest


class Reversing:
    """An in-process reranker that reverses every pool and records what it was shown."""

    def __init__(self) -> None:
        self.seen: list[RerankRequest] = []

    def decide(self, requests: Sequence[RerankRequest]) -> Sequence[RerankDecision]:
        self.seen.extend(requests)
        return [
            RerankDecision(list(reversed(range(len(r.candidates)))), '{"configured":true,"ran":true,"model":"rev"}')
            for r in requests
        ]


def record(query_id: str, rerank: bool) -> dict[str, Any]:
    edges = [{"subject": s, "label": "l", "object": "o", "weight": 1.0, "count": 1, "attributions": []} for s in "abc"]
    request: dict[str, Any] = {"origins": ["a"], "text_fallback_query": "what is a"}
    if rerank:
        request["rerank"] = {"model": "rev"}
    return {
        "query_id": query_id,
        "context": "ctx",
        "request": request,
        "lanes": {
            "graph_activate": [{"strength": 0.5, "path": ["a"], "association": e} for e in edges],
            "passages": [{"source": "p.md", "paragraph": 0, "score": 1.0, "text": "passage text", "lanes": {}}],
        },
    }


def test_a_reranker_sees_requested_queries_only_and_its_order_and_plan_are_used() -> None:
    reranker = Reversing()
    records = [parse_record(record("asked", True)), parse_record(record("not-asked", False))]
    result = assemble_records(records, reranker=reranker)
    assert [r.query_id for r in reranker.seen] == ["asked"]
    [request] = reranker.seen
    assert request.query == "what is a" and request.model == "rev"
    assert [(c.kind, c.lane_rank, c.text) for c in request.candidates] == [
        ("association", 1, "a l o"),
        ("passage", 1, "passage text"),  # ties with a at 1/61; kind breaks the tie
        ("association", 2, "b l o"),
        ("association", 3, "c l o"),
    ]
    asked, not_asked = (json.loads(p) for p in result.packages)
    assert [i["fused_rank"] for i in asked["items"]] == [4, 3, 2, 1]
    assert asked["plan"]["reranker"] == {"configured": True, "ran": True, "model": "rev"}
    assert [i["fused_rank"] for i in not_asked["items"]] == [1, 2, 3, 4]
    assert not_asked["plan"]["reranker"] == {"configured": True, "ran": False}


def test_without_a_reranker_a_requested_rerank_reports_not_configured() -> None:
    package = json.loads(assemble_batch([record("q", True)]).packages[0])
    assert package["plan"]["reranker"] == {"configured": False, "ran": False, "reason": "not_configured"}


def test_permutation_problem_names_each_rule() -> None:
    from assembler.stages.reorder import permutation_problem

    assert permutation_problem([2, 0, 1], 3) is None
    assert permutation_problem([], 0) is None
    assert permutation_problem([0, 1], 3) == "has 2 indices for 3 survivors"
    assert permutation_problem([0, 1, 3], 3) == "index 3 is out of range (0 to 2)"
    assert permutation_problem([0, -1, 1], 3) == "index -1 is out of range (0 to 2)"
    assert permutation_problem([1, 1, 0], 3) == "index 1 appears twice"


def test_a_fixed_order_is_checked_against_the_survivors_and_refused_naming_the_query() -> None:
    """Two queries; the second's fixed order is one index short: the UsageError names it, and a
    valid order for the first is applied as before."""
    import pytest

    from assembler import UsageError

    records = [parse_record(record("ok", rerank=False)), parse_record(record("short", rerank=False))]
    reversed_first = assemble_records(records[:1], reorders={"ok": [3, 2, 1, 0]}).packages
    assert reversed_first != assemble_records(records[:1]).packages
    with pytest.raises(UsageError) as caught:
        assemble_records(records, reorders={"ok": [3, 2, 1, 0], "short": [2, 1, 0]})
    assert (
        str(caught.value)
        == "reorders['short'] must be a permutation of the query's survivors: has 3 indices for 4 survivors"
    )
