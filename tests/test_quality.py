"""The quality policy: one test per rule (contract behaviour beside quality behaviour), the
package invariants as properties under every quality variant, and determinism."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from assembler import assemble_batch, get_policy
from assembler.quality import FACT_LAG
from tests.strategies import lane_records
from tests.test_pipeline import fused_count
from tests.test_selection import act, assoc, cite, passage, record

QUALITY_NAMES = [
    "quality",
    "quality-no-identity",
    "quality-no-passages-first",
    "quality-graph",
    "quality-no-signs",
    "quality-no-words",
    "quality-with-tiers",
]


def run(policy: str, lanes: dict[str, Any], **request: Any) -> dict[str, Any]:
    package: dict[str, Any] = json.loads(
        assemble_batch([record(lanes, **request)], policy=get_policy(policy)).packages[0]
    )
    return package


def kinds(package: dict[str, Any]) -> list[str]:
    return [item["kind"] for item in package["items"]]


# --- rule 1: evidence identity across kinds -------------------------------------------------------

CITED = {
    "graph_activate": [act(assoc("蔵", "杜氏", "高瀬", ("kura.md", 0, 1.0)))],
    "passages": [passage("kura.md", "青嶺酒造の杜氏は高瀬である。")],
    "citations": [cite("kura.md", 0, "青嶺酒造の杜氏は高瀬である。")],
}


def test_contract_pays_twice_for_a_cited_passage() -> None:
    package = run("contract", CITED)
    assert kinds(package) == ["association", "passage"] and len(package["citations"]) == 1


def test_quality_folds_an_association_into_the_passage_it_cites() -> None:
    package = run("quality", CITED)
    assert kinds(package) == ["passage"] and package["citations"] == []
    [omission] = package["omitted"]
    assert omission["reason"] == "evidence_in_passage"
    assert omission["duplicate_of"] == package["items"][0]["candidate_id"]
    assert package["budget"]["bytes_used"] < run("contract", CITED)["budget"]["bytes_used"]


def test_an_association_citing_a_paragraph_outside_the_pool_stays() -> None:
    lanes = {
        **CITED,
        "graph_activate": [act(assoc("蔵", "杜氏", "高瀬", ("other.md", 3, 1.0)))],
        "citations": [cite("other.md", 3)],
    }
    assert kinds(run("quality", lanes)) == ["passage", "association"]  # kept, after the passages


def test_passages_are_offered_before_graph_facts() -> None:
    lanes = {
        "graph_activate": [act(assoc("s", "l", "o", ("c.md", 0, 1.0)))],
        "passages": [passage("a.md", "first passage about rice"), passage("b.md", "second passage about yeast")],
        "citations": [cite("c.md", 0)],
    }
    assert kinds(run("contract", lanes, budget={"max_items": 2})) == ["association", "passage"]
    assert kinds(run("quality", lanes, budget={"max_items": 2})) == ["passage", "passage"]
    assert kinds(run("quality", lanes)) == ["passage", "passage", "association"]


TOPICS = ["rice polishing", "yeast starters", "koji mould", "water hardness", "pressing the mash", "bottling dates"]
SIX_PASSAGES = [passage(f"p{n}.md", f"This paragraph is about {topic}.") for n, topic in enumerate(TOPICS)]


def test_a_fact_that_adds_evidence_follows_the_passages_by_the_lag() -> None:
    lanes = {
        "graph_activate": [
            act(assoc("s", "l", "fact without a citation")),
            act(assoc("s", "m", "fact citing a new paragraph", ("new.md", 0, 1.0))),
        ],
        "passages": SIX_PASSAGES,
        "citations": [cite("new.md", 0)],
    }
    items = run("quality-graph", lanes, search_limit=10)["items"]
    sources = [item.get("passage", {}).get("source", item["kind"]) for item in items]
    # The fact adding evidence comes right after passage 1 + FACT_LAG; the other fact after all.
    assert FACT_LAG == 3
    assert sources == ["p0.md", "p1.md", "p2.md", "p3.md", "association", "p4.md", "p5.md", "association"]
    assert kinds(run("quality", lanes, search_limit=10))[-2:] == ["association", "association"]
    assert kinds(run("contract", lanes))[:2] == ["association", "passage"]


def test_the_lag_counts_only_facts_that_add_evidence() -> None:
    facts = [act(assoc("s", f"l{n}", f"o{n}", (f"new{n}.md", 0, 1.0))) for n in range(2)]
    lanes = {
        "graph_activate": facts,
        "passages": SIX_PASSAGES,
        "citations": [cite("new0.md", 0), cite("new1.md", 0)],
    }
    expected = ["passage"] * 4 + ["association", "passage", "association", "passage"]
    assert kinds(run("quality-graph", lanes, search_limit=10)) == expected


# --- rule 3: contradictions need opposite signs ---------------------------------------------------

MULTI = {"graph_activate": [act(assoc("青嶺", "輸出先", "米国")), act(assoc("青嶺", "輸出先", "台湾"))]}


def test_contract_treats_a_multi_valued_relation_as_one_atomic_group() -> None:
    package = run("contract", MULTI, budget={"max_items": 1})
    assert package["items"] == [] and package["omitted_by_reason"] == {"contradiction_group_exceeds_budget": 2}


def test_quality_admits_a_multi_valued_relation_member_by_member() -> None:
    package = run("quality", MULTI, budget={"max_items": 1})
    assert len(package["items"]) == 1 and "contradicts" not in package["items"][0]
    assert package["plan"]["selection"]["contradiction_groups"] == 0


def test_opposite_signs_still_form_an_atomic_group() -> None:
    lanes = {"graph_activate": [act(assoc("猫", "is_a", "哺乳類")), act(assoc("猫", "is_a", "爬虫類", weight=-1.0))]}
    package = run("quality", lanes, budget={"max_items": 1})
    assert package["items"] == [] and package["omitted_by_reason"] == {"contradiction_group_exceeds_budget": 2}
    assert [len(i["contradicts"]) for i in run("quality", lanes, search_limit=10)["items"]] == [1, 1]


def test_multi_valued_members_are_kept_next_to_each_other() -> None:
    lanes = {"graph_activate": [act(assoc("a", "l", "x")), act(assoc("b", "m", "y")), act(assoc("a", "l", "z"))]}
    objects = [item["association"]["object"] for item in run("quality", lanes, search_limit=10)["items"]]
    assert objects == ["x", "z", "y"]


# --- rule 4: near-duplicates need shared words ----------------------------------------------------

TEMPLATED = {"passages": [passage("for.md", "For Love may refer to:"), passage("to.md", "To Love may refer to:")]}


def test_contract_drops_templated_text_about_another_entity() -> None:
    assert run("contract", TEMPLATED)["omitted_by_reason"] == {"duplicate_passage": 1}


def test_quality_keeps_templated_text_about_another_entity() -> None:
    assert len(run("quality", TEMPLATED)["items"]) == 2


def test_quality_still_drops_a_revision_of_the_same_text() -> None:
    text = "Sake is brewed in winter from polished rice, koji mold and water drawn from the river below the hill."
    lanes = {"passages": [passage("v1.md", text), passage("v2.md", text.replace("river", "rivers"))]}
    assert run("quality", lanes)["omitted_by_reason"] == {"duplicate_passage": 1}


# --- rule 5: rank order, not tiers ------------------------------------------------------------------


def test_quality_admits_in_rank_order_and_reports_tiers_of_one() -> None:
    lanes = {
        "passages": [
            passage("dominant", "alpha text one", 0),
            passage("dominant", "beta words two", 1),
            passage("other", "gamma thing three", 0),
        ]
    }
    contract = run("contract", lanes, budget={"max_items": 12})
    quality = run("quality", lanes, budget={"max_items": 12})
    assert [i["passage"]["source"] for i in contract["items"]] == ["dominant", "other", "dominant"]
    assert [i["passage"]["source"] for i in quality["items"]] == ["dominant", "dominant", "other"]
    assert quality["plan"]["selection"]["diversity_tier_width"] == 1


# --- invariants and determinism --------------------------------------------------------------------


@settings(max_examples=80, deadline=None)
@given(lane_records(), st.sampled_from(QUALITY_NAMES))
def test_invariants_hold_under_every_quality_variant(lane_record: dict[str, Any], name: str) -> None:
    policy = get_policy(name)
    text = assemble_batch([lane_record], policy=policy).packages[0]
    package = json.loads(text)
    items, budget, limits = package["items"], package["budget"], package["budget"]["limits"]
    refs = {(r["source"], r["paragraph"]) for item in items for r in item["citation_refs"]}
    assert {(c["source"], c["paragraph"]) for c in package["citations"]} == refs
    assert len(items) <= limits["max_items"]
    if items:
        assert budget["bytes_used"] <= limits["max_bytes"] and budget["tokens_used"] <= limits["max_tokens"]
    assert len(items) + package["omitted_total"] == fused_count(lane_record)
    assert sum(package["omitted_by_reason"].values()) == package["omitted_total"]
    admitted = {item["candidate_id"] for item in items}
    for item in items:
        assert set(item.get("contradicts", [])) <= admitted
    reordered = {**lane_record, "lanes": dict(reversed(list(lane_record["lanes"].items())))}
    assert assemble_batch([{**lane_record, "query_id": "x"}, reordered], policy=policy).packages[1] == text


@pytest.mark.parametrize("name", QUALITY_NAMES)
def test_quality_variants_run_on_the_sample_and_keep_the_contract_wire_types(name: str) -> None:
    from pathlib import Path

    lines = (Path(__file__).resolve().parent.parent / "data" / "sample" / "lanes.jsonl").read_text(encoding="utf-8")
    records = [json.loads(line) for line in lines.splitlines()]
    for text in assemble_batch(records, policy=get_policy(name)).packages:
        package = json.loads(text)
        assert list(package) == [
            "items",
            "citations",
            "budget",
            "omitted",
            "omitted_total",
            "omitted_by_reason",
            "plan",
        ]
