"""Package-level assessment: the five conformance packages (hand-checked) and every rule at its boundary."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from assembler.assess import assess_package, assess_packages, assessed_line, assessment_texts

DATA = Path(__file__).resolve().parents[2] / "data"
EXPECTED = DATA / "conformance" / "expected.jsonl"
NO_LABELS = "lane:query:no 'labels' given"
NO_COMMUNITIES = "lane:communities:include_communities was false"
ZERO_LANES = {"graph_query": 0, "graph_activate": 0, "passage_bm25": 0, "passage_vector": 0, "passage_fused": 0}


def conformance_texts() -> dict[str, str]:
    """query_id -> the exact package text of the shipped expected packages."""
    texts = {}
    for line in EXPECTED.read_text(encoding="utf-8").splitlines():
        query_id = json.loads(line)["query_id"]
        prefix = '{"query_id":' + json.dumps(query_id) + ',"package":'
        assert line.startswith(prefix) and line.endswith("}")
        texts[query_id] = line[len(prefix) : -1]
    return texts


def kinds(association: int = 0, passage: int = 0, community: int = 0) -> dict[str, int]:
    return {"association": association, "passage": passage, "community": community}


def lanes(**counts: int) -> dict[str, int]:
    return {**ZERO_LANES, "community": 0, **counts}


# Hand-checked from data/conformance/expected.jsonl (see each package's items, omitted and plan).
CONFORMANCE = {
    # 2 unsourced activations admitted (attributions []), 3 refused for max_items 2.
    "evidence_budget_constrained": {
        "support_level": "weak",
        "items_by_kind": kinds(association=2),
        "items_by_lane": lanes(graph_activate=2),
        "independent_sources": 0,
        "unresolved_gaps": [NO_LABELS, NO_COMMUNITIES, "budget:budget_exceeded:3"],
        "required_citation_refs": [],
        "version": 1,
    },
    # 1 unsourced activation; communities asked for but the artifact is missing (a degraded lane).
    "evidence_communities_degrade_and_rerank_reason": {
        "support_level": "weak",
        "items_by_kind": kinds(association=1),
        "items_by_lane": lanes(graph_activate=1),
        "independent_sources": 0,
        "unresolved_gaps": [
            NO_LABELS,
            "lane:communities:no communities artifact for 'comm-corpus': context 'comm-corpus::communities'"
            " does not exist \u2014 run `taguru communities` to build it",
        ],
        "required_citation_refs": [],
        "version": 1,
    },
    # 猫 is_a 哺乳類 (s1.md#0) and 猫 is_a 爬虫類 (s2.md#0): one admitted group, two sources, 2 items < 3.
    "evidence_contradiction_group": {
        "support_level": "partial",
        "items_by_kind": kinds(association=2),
        "items_by_lane": lanes(graph_activate=2),
        "independent_sources": 2,
        "unresolved_gaps": [NO_LABELS, NO_COMMUNITIES, "contradiction_groups:admitted:1"],
        "required_citation_refs": [{"source": "s1.md", "paragraph": 0}, {"source": "s2.md", "paragraph": 0}],
        "version": 1,
    },
    # origins empty: resolve/query/activate off by request (no degrade); b.md#0 dropped as a near-duplicate.
    "evidence_duplicate_passage": {
        "support_level": "partial",
        "items_by_kind": kinds(passage=1),
        "items_by_lane": lanes(passage_bm25=1),
        "independent_sources": 1,
        "unresolved_gaps": [
            "lane:resolve:origins was empty",
            "lane:query:no anchors resolved from 'origins'",
            "lane:activate:no anchors resolved from 'origins'",
            NO_COMMUNITIES,
            "duplicate_passage:1",
        ],
        "required_citation_refs": [{"source": "a.md", "paragraph": 0}],
        "version": 1,
    },
    # association citing docs/kura.md#0, then the passage at the same locator: one source, one ref.
    "evidence_mixed_lanes": {
        "support_level": "partial",
        "items_by_kind": kinds(association=1, passage=1),
        "items_by_lane": lanes(graph_activate=1, passage_bm25=1),
        "independent_sources": 1,
        "unresolved_gaps": [NO_LABELS, NO_COMMUNITIES],
        "required_citation_refs": [{"source": "docs/kura.md", "paragraph": 0}],
        "version": 1,
    },
}


@pytest.mark.parametrize("query_id", sorted(CONFORMANCE))
def test_conformance_packages(query_id: str) -> None:
    assert assess_package(conformance_texts()[query_id]) == CONFORMANCE[query_id]


def test_conformance_batch_in_order_and_key_order() -> None:
    texts = conformance_texts()
    assessed = [json.loads(text) for text in assessment_texts(list(texts.values()))]
    assert assessed == [CONFORMANCE[query_id] for query_id in texts]
    assert list(assessed[0]) == [
        "support_level",
        "items_by_kind",
        "items_by_lane",
        "independent_sources",
        "unresolved_gaps",
        "required_citation_refs",
        "version",
    ]
    assert list(assessed[0]["items_by_lane"]) == [*ZERO_LANES, "community"]


# --- synthetic packages: only what the assessment reads ------------------------------------------

RAN = {"ran": True}


def plan_lanes(**off: str | None) -> dict[str, Any]:
    """Every lane ran except those given (value = reason; ``None`` = no reason given)."""
    names = ("resolve", "query", "activate", "passages", "communities", "citations")
    result: dict[str, Any] = {}
    for name in names:
        if name not in off:
            result[name] = RAN
        elif off[name] is None:
            result[name] = {"ran": False}
        else:
            result[name] = {"ran": False, "reason": off[name]}
    return result


def passage(source: str, paragraph: int = 0, lane: str = "passage_bm25") -> dict[str, Any]:
    return {
        "candidate_id": f"passage\x00c\x00{source}\x00{paragraph}",
        "kind": "passage",
        "fused_rank": 1,
        "lane_ranks": [{"lane": lane, "rank": 1}],
        "citation_refs": [],
        "bytes": 1,
        "estimated_tokens": 1,
        "passage": {"source": source, "paragraph": paragraph, "score": 1.0, "text": "t", "lanes": {}},
    }


def association(
    obj: str,
    refs: Sequence[tuple[str, int]] = (),
    sources: list[str] | None = None,
    contradicts: list[str] | None = None,
    lane_names: tuple[str, ...] = ("graph_activate",),
) -> dict[str, Any]:
    item: dict[str, Any] = {
        "candidate_id": f"association\x00s\x00l\x00{obj}",
        "kind": "association",
        "fused_rank": 1,
        "lane_ranks": [{"lane": name, "rank": 1} for name in lane_names],
        "citation_refs": [{"source": s, "paragraph": p} for s, p in refs],
    }
    if sources is not None:
        item["corroboration"] = {"sources": sources, "attributions": item["citation_refs"]}
    if contradicts:
        item["contradicts"] = contradicts
    item.update(bytes=1, estimated_tokens=1, association={"subject": "s", "label": "l", "object": obj})
    return item


def community(name: str) -> dict[str, Any]:
    return {
        "candidate_id": f"community\x00c\x00community:{name}\x000",
        "kind": "community",
        "fused_rank": 1,
        "lane_ranks": [{"lane": "community", "rank": 1}],
        "citation_refs": [],
        "bytes": 1,
        "estimated_tokens": 1,
        "community": {"community": name, "score": 1.0, "text": "t", "paragraph": 0},
    }


def package(
    items: list[dict[str, Any]],
    by_reason: dict[str, int] | None = None,
    groups: int = 0,
    **off: str | None,
) -> str:
    by_reason = by_reason or {}
    value = {
        "items": items,
        "citations": [],
        "budget": {"items_used": len(items), "bytes_used": 4, "tokens_used": 1, "limits": {}},
        "omitted": [],
        "omitted_total": sum(by_reason.values()),
        "omitted_by_reason": dict(sorted(by_reason.items())),
        "plan": {
            "lanes": plan_lanes(**off),
            "selection": {"dedup_dropped": 0, "contradiction_groups": groups, "diversity_tier_width": 10},
            "reranker": {"configured": False, "ran": False},
        },
    }
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def level(text: str) -> str:
    return str(assess_package(text)["support_level"])


THREE = [passage("a.md"), passage("b.md"), passage("a.md", 1)]


def test_none_when_nothing_admitted() -> None:
    result = assess_package(package([], {"budget_exceeded": 4}))
    assert result["support_level"] == "none"
    assert result["items_by_kind"] == kinds()
    assert result["unresolved_gaps"] == ["budget:budget_exceeded:4"]
    assert level(package([])) == "none"


def test_weak_when_no_item_names_a_source() -> None:
    unsourced = [association("o1"), association("o2", sources=None), community("L0-1"), community("L0-2")]
    assert level(package(unsourced)) == "weak"
    assert assess_package(package(unsourced))["independent_sources"] == 0
    assert level(package([*unsourced, passage("a.md")])) == "partial"


@pytest.mark.parametrize(("count", "expected"), [(1, "partial"), (2, "partial"), (3, "strong"), (4, "strong")])
def test_item_count_boundary(count: int, expected: str) -> None:
    items = [passage("a.md"), passage("b.md"), passage("a.md", 1), passage("b.md", 1)][:count]
    assert level(package(items)) == expected


def test_source_count_boundary() -> None:
    one_source = [passage("a.md", i) for i in range(5)]
    assert level(package(one_source)) == "partial"
    assert level(package([*one_source, passage("b.md")])) == "strong"


def test_independent_sources_are_corroboration_and_passage_sources() -> None:
    items = [
        association("o1", refs=[("a.md", 0)], sources=["a.md", "z.md"]),  # z.md: paragraph-less attribution
        association("o2", sources=[]),
        passage("a.md", 3),
        community("L0-1"),
    ]
    result = assess_package(package(items))
    assert result["independent_sources"] == 2
    assert result["support_level"] == "strong"


def test_not_requested_lanes_are_gaps_but_not_a_degrade() -> None:
    text = package(
        THREE,
        resolve="origins was empty",
        query="no anchors resolved from 'origins'",
        activate="no anchors resolved from 'origins'",
        communities="include_communities was false",
    )
    result = assess_package(text)
    assert result["support_level"] == "strong"
    assert [gap.split(":")[1] for gap in result["unresolved_gaps"]] == ["resolve", "query", "activate", "communities"]
    assert level(package(THREE, query="no 'labels' given", passages="the requested limit is 0")) == "strong"


@pytest.mark.parametrize(
    "off",
    [
        {"query": "no anchors resolved from 'origins'"},  # origins given, nothing resolved
        {"activate": "no anchors resolved from 'origins'"},
        {"passages": "the query yields no searchable terms"},
        {"communities": "no communities artifact for 'c': context 'c::communities' does not exist"},
        {"communities": "context 'c::communities' holds no 'communities:manifest' record"},
        {"citations": "a reason this tool has never seen"},
        {"passages": None},
    ],
)
def test_a_degraded_lane_stops_strong(off: dict[str, str | None]) -> None:
    result = assess_package(package(THREE, **off))
    assert result["support_level"] == "partial"
    ((name, reason),) = off.items()
    assert result["unresolved_gaps"] == [f"lane:{name}:{reason or 'unspecified'}"]


@pytest.mark.parametrize(
    ("by_reason", "groups", "gaps"),
    [
        ({"budget_exceeded": 1}, 0, ["budget:budget_exceeded:1"]),
        (
            {"contradiction_group_exceeds_budget": 3},
            1,
            ["budget:contradiction_group_exceeds_budget:3", "contradiction_groups:omitted:1"],
        ),
        (
            {"budget_exceeded": 2, "contradiction_group_exceeds_budget": 4},
            2,
            [
                "budget:budget_exceeded:2",
                "budget:contradiction_group_exceeds_budget:4",
                "contradiction_groups:omitted:2",
            ],
        ),
        ({"some_new_reason": 2}, 0, ["omitted:unrecognized_reason:2"]),
    ],
)
def test_budget_truncation_stops_strong(by_reason: dict[str, int], groups: int, gaps: list[str]) -> None:
    result = assess_package(package(THREE, by_reason, groups))
    assert (result["support_level"], result["unresolved_gaps"]) == ("partial", gaps)


def test_duplicates_and_admitted_contradictions_are_gaps_without_a_degrade() -> None:
    a, b = "association\x00s\x00l\x00o1", "association\x00s\x00l\x00o2"
    items = [
        association("o1", refs=[("a.md", 0)], sources=["a.md"], contradicts=[b]),
        association("o2", refs=[("b.md", 0)], sources=["b.md"], contradicts=[a]),
        passage("c.md"),
    ]
    result = assess_package(package(items, {"duplicate_passage": 2}, groups=1))
    assert result["support_level"] == "strong"
    assert result["unresolved_gaps"] == ["contradiction_groups:admitted:1", "duplicate_passage:2"]


def test_admitted_and_omitted_groups_are_counted_apart() -> None:
    ids = [f"association\x00s\x00l\x00o{i}" for i in range(3)]
    items = [association(f"o{i}", contradicts=[x for x in ids if x != ids[i]]) for i in range(3)]
    result = assess_package(package(items, {"contradiction_group_exceeds_budget": 2}, groups=2))
    assert result["unresolved_gaps"] == [
        "budget:contradiction_group_exceeds_budget:2",
        "contradiction_groups:admitted:1",
        "contradiction_groups:omitted:1",
    ]


def test_counts_by_kind_and_by_lane() -> None:
    items = [
        association("o1", lane_names=("graph_activate", "graph_query")),
        association("o2", lane_names=("graph_query",)),
        passage("a.md", lane="passage_fused"),
        passage("b.md", lane="passage_vector"),
        passage("c.md"),
        community("L0-1"),
    ]
    result = assess_package(package(items))
    assert result["items_by_kind"] == kinds(association=2, passage=3, community=1)
    assert result["items_by_lane"] == {
        "graph_query": 2,
        "graph_activate": 1,
        "passage_bm25": 1,
        "passage_vector": 1,
        "passage_fused": 1,
        "community": 1,
    }


def test_refs_in_admission_order_unique_capped_at_six() -> None:
    items = [
        passage("p.md", 2),
        association("o1", refs=[("a.md", 0), ("p.md", 2), ("a.md", 1)], sources=["a.md", "p.md"]),
        community("L0-1"),
        passage("a.md", 0),
        association("o2", refs=[("b.md", 0), ("c.md", 0)], sources=["b.md", "c.md"]),
        passage("d.md", 0),
        passage("e.md", 0),
    ]
    refs = assess_package(package(items))["required_citation_refs"]
    assert refs == [
        {"source": "p.md", "paragraph": 2},
        {"source": "a.md", "paragraph": 0},
        {"source": "a.md", "paragraph": 1},
        {"source": "b.md", "paragraph": 0},
        {"source": "c.md", "paragraph": 0},
        {"source": "d.md", "paragraph": 0},
    ]


def test_batch_keeps_order_and_handles_empty_input() -> None:
    texts = [package([]), package(THREE), package([association("o")])]
    assert assess_packages(texts)["support_level"].to_list() == ["none", "strong", "weak"]
    assert assessment_texts([]) == []
    assert assess_packages([]).height == 0


def test_assessed_line_keeps_the_package_bytes() -> None:
    text = conformance_texts()["evidence_mixed_lanes"]
    assessment = assessment_texts([text])[0]
    line = assessed_line("q\x00\u2028", text, assessment)
    assert line.endswith("\n")
    value = json.loads(line)
    assert list(value) == ["query_id", "package", "assessment"]
    assert value["query_id"] == "q\x00\u2028"
    assert f',"package":{text},"assessment":' in line
