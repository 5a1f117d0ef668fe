"""The quality policy: one test per rule (contract behaviour beside quality behaviour), the
package invariants as properties under every quality variant, and determinism."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from assembler import assemble_batch, get_policy
from assembler.selection import QualityPolicy, register_policy
from assembler.selection.quality import FACT_LAG, STATEMENT_SHARE, head_order
from tests.oracle.key_order import PACKAGE_KEYS
from tests.selection.test_selection import act, assoc, cite, passage, record
from tests.strategies import lane_records
from tests.test_pipeline import fused_count

QUALITY_NAMES = [
    "quality",
    "quality-no-identity",
    "quality-no-passages-first",
    "quality-facts-last",
    "quality-no-statement-test",
    "quality-no-source-guard",
    "quality-no-signs",
    "quality-no-words",
    "quality-with-tiers",
    # Tuned settings (assembler evaluate tune): every invariant holds under them too.
    register_policy(
        QualityPolicy.from_config(
            {
                "name": "quality-tuned-early",
                "fact_lag": 0,
                "statement_share": None,
                "guard": False,
                "lane_offsets": {"graph_activate": -1, "graph_query": None},
            }
        )
    ),
    register_policy(
        QualityPolicy.from_config(
            {"name": "quality-tuned-late", "fact_lag": 2, "statement_share": 0.1, "lane_offsets": {"graph_query": 3}}
        )
    ),
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
# Six passages from four sources: the last two come from sources the first four already hold.
SOURCES = ["a.md", "b.md", "c.md", "d.md", "a.md", "b.md"]
SIX_PASSAGES = [
    passage(source, f"This paragraph is about {topic}.", n)
    for n, (source, topic) in enumerate(zip(SOURCES, TOPICS, strict=True))
]


def places(package: dict[str, Any]) -> list[str]:
    return [item.get("passage", {}).get("source", item["kind"]) for item in package["items"]]


def test_a_statement_that_adds_evidence_follows_the_passages_by_the_lag() -> None:
    lanes = {
        "graph_activate": [
            act(assoc("s", "l", "a statement without a citation")),
            act(assoc("s", "m", "a statement citing a new paragraph", ("new.md", 0, 1.0))),
        ],
        "passages": SIX_PASSAGES,
        "citations": [cite("new.md", 0)],
    }
    # The fact adding evidence comes right after passage 1 + FACT_LAG; the other fact after all.
    assert FACT_LAG == 3
    expected = ["a.md", "b.md", "c.md", "d.md", "association", "a.md", "b.md", "association"]
    assert places(run("quality", lanes, search_limit=10)) == expected
    assert kinds(run("quality-facts-last", lanes, search_limit=10))[-2:] == ["association", "association"]
    assert kinds(run("contract", lanes))[:2] == ["association", "passage"]


def test_a_short_fact_is_a_pointer_and_waits_behind_the_passages() -> None:
    # "s m o" is 5 characters against passages of about 35: below STATEMENT_SHARE of the median.
    lanes = {
        "graph_activate": [act(assoc("s", "m", "o", ("new.md", 0, 1.0)))],
        "passages": SIX_PASSAGES,
        "citations": [cite("new.md", 0)],
    }
    assert len("s m o") < STATEMENT_SHARE * len("This paragraph is about koji mould.")
    assert kinds(run("quality", lanes, search_limit=10)) == ["passage"] * 6 + ["association"]
    assert kinds(run("quality-no-statement-test", lanes, search_limit=10)) == (
        ["passage"] * 4 + ["association"] + ["passage"] * 2
    )


SIX_SOURCES = [passage(f"p{n}.md", f"This paragraph is about {topic}.") for n, topic in enumerate(TOPICS)]


def test_a_fact_never_lowers_the_distinct_sources_of_the_head() -> None:
    # The fact cites another paragraph of p0.md; every passage behind its place is its source's
    # only one, so displacing any of them would serve one source fewer.
    lanes = {
        "graph_activate": [act(assoc("s", "m", "a statement citing p0.md again", ("p0.md", 9, 1.0)))],
        "passages": SIX_SOURCES,
        "citations": [cite("p0.md", 9)],
    }
    assert kinds(run("quality", lanes, search_limit=10)) == ["passage"] * 6 + ["association"]
    assert kinds(run("quality-no-source-guard", lanes, search_limit=10)) == (
        ["passage"] * 4 + ["association"] + ["passage"] * 2
    )


def test_a_fact_citing_a_new_source_may_take_the_place_of_the_last_passage() -> None:
    lanes = {
        "graph_activate": [act(assoc("s", "m", "a statement citing a new paragraph", ("new.md", 0, 1.0)))],
        "passages": SIX_SOURCES,
        "citations": [cite("new.md", 0)],
    }
    package = run("quality", lanes, search_limit=10, budget={"max_items": 6})
    assert places(package) == ["p0.md", "p1.md", "p2.md", "p3.md", "association", "p4.md"]


def test_the_head_is_as_long_as_the_item_budget() -> None:
    lanes = {
        "graph_activate": [act(assoc("s", "m", "a statement citing a new paragraph", ("new.md", 0, 1.0)))],
        "passages": SIX_PASSAGES,
        "citations": [cite("new.md", 0)],
    }
    # A head of five: the fact's place (after passage 4) would displace passage 5 (a.md, held by
    # passage 1), so it gets in; the sixth passage does not fit.
    assert places(run("quality", lanes, search_limit=10, budget={"max_items": 5})) == [
        "a.md",
        "b.md",
        "c.md",
        "d.md",
        "association",
    ]


def test_a_negative_lag_puts_the_first_fact_before_every_passage() -> None:
    # Guards the sweep's lag -1: the head's last passage was taken for "one passage before".
    order = head_order(["a", "a", "b"], [frozenset({"a"})], lag=-1, head=3, guard=True)
    assert order == [(True, 0), (False, 0), (False, 2), (False, 1)]


def test_without_passages_facts_keep_their_fused_order() -> None:
    # Guards the statement test's measure: a pool with no passage has no median to compare with,
    # and no passage for a fact to join, so no fact moves ahead of another.
    lanes = {
        "graph_activate": [
            act(assoc("s", "l", "first")),
            act(assoc("s", "m", "a long statement citing a new paragraph", ("new.md", 0, 1.0))),
        ],
        "citations": [cite("new.md", 0)],
    }
    objects = [item["association"]["object"] for item in run("quality", lanes, search_limit=10)["items"]]
    assert objects == ["first", "a long statement citing a new paragraph"]


def test_each_further_fact_follows_one_passage_later() -> None:
    facts = [act(assoc("s", f"l{n}", f"a statement number {n}", (f"new{n}.md", 0, 1.0))) for n in range(2)]
    lanes = {
        "graph_activate": facts,
        "passages": [*SIX_PASSAGES, passage("c.md", "This paragraph is about cellar temperatures.", 6)],
        "citations": [cite("new0.md", 0), cite("new1.md", 0)],
    }
    expected = ["passage"] * 4 + ["association", "passage", "association", "passage", "passage"]
    assert kinds(run("quality", lanes, search_limit=10)) == expected


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.sampled_from("abcdef"), max_size=12),
    st.lists(st.frozensets(st.sampled_from("abcdefgh"), min_size=1, max_size=3), max_size=6),
    st.integers(-2, 4),
    st.integers(0, 14),
    st.booleans(),
)
def test_head_order_places_every_entry_once_and_the_guard_keeps_the_head_sources(
    passages: list[str], facts: list[frozenset[str]], lag: int, head: int, guard: bool
) -> None:
    order = head_order(passages, facts, lag, head, guard)
    assert sorted(order) == sorted([(False, i) for i in range(len(passages))] + [(True, i) for i in range(len(facts))])
    size = min(head, len(passages))
    kept = order[:size]
    for part in (kept, order[size:]):  # a fact that waits may follow a later one that got in
        assert [i for is_fact, i in part if is_fact] == sorted(i for is_fact, i in part if is_fact)
    assert [i for is_fact, i in kept if not is_fact] == sorted(i for is_fact, i in kept if not is_fact)
    for position, (is_fact, fact) in enumerate(kept):
        if is_fact:  # the n-th fact (0-based) follows at least n + 1 + lag passages
            assert sum(not f for f, _ in kept[:position]) >= fact + 1 + lag
    if guard:
        served = {s for is_fact, i in kept for s in (facts[i] if is_fact else {passages[i]})}
        assert len(served) >= len(set(passages[:size]))
    else:
        in_head = sum(is_fact for is_fact, _ in kept)
        assert [i for is_fact, i in kept if not is_fact] == list(range(size - in_head))


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

    sample = Path(__file__).resolve().parent.parent.parent / "data" / "sample" / "lanes.jsonl"
    lines = sample.read_text(encoding="utf-8")
    records = [json.loads(line) for line in lines.splitlines()]
    for text in assemble_batch(records, policy=get_policy(name)).packages:
        package = json.loads(text)
        assert tuple(package) == PACKAGE_KEYS


def test_a_statement_share_too_large_for_a_float_is_a_config_error() -> None:
    """A JSON integer of more than 308 digits passed the positive-number check and then made
    ``float`` overflow: a traceback, not the config's one-line error."""
    from assembler.errors import UsageError

    with pytest.raises(UsageError, match=r"policy\.statement_share.*a float can hold"):
        QualityPolicy.from_config({"name": "huge-share", "statement_share": 10**400})
    assert QualityPolicy.from_config({"name": "big-share", "statement_share": 10**300}).statement_share == 1e300
