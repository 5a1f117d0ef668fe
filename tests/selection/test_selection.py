"""The contract's section 12 scenarios that concern selection, one test each."""

from __future__ import annotations

import json
from typing import Any

import pytest

from assembler import assemble_batch
from assembler.stages.lanes import build_batch, parse_record

SEP = "\x00"


def assoc(s: str, label: str, o: str, *atts: tuple[str, int | None, float], weight: float = 1.0) -> dict[str, Any]:
    return {
        "subject": s,
        "label": label,
        "object": o,
        "weight": weight,
        "count": 1,
        "attributions": [
            {"source": src, "weight": w, "count": 1, "paragraph": p, "section": None, "locator": None}
            for src, p, w in atts
        ],
    }


def act(association: dict[str, Any], strength: float = 0.5) -> dict[str, Any]:
    return {"strength": strength, "path": ["x"], "association": association}


def passage(source: str, text: str, paragraph: int = 0, lanes: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "source": source,
        "paragraph": paragraph,
        "score": 1.0,
        "text": text,
        "lanes": {"bm25": {"rank": 1, "score": 1.0}} if lanes is None else lanes,
    }


def cite(source: str, paragraph: int, text: str = "cited text") -> dict[str, Any]:
    return {
        "source": source,
        "paragraph": paragraph,
        "citation": {"text": text, "source": source, "section": None, "locator": None},
    }


def record(lanes: dict[str, Any], **request: Any) -> dict[str, Any]:
    return {
        "query_id": "q",
        "context": "ctx",
        "request": {"origins": ["x"], **request},
        "lanes": {"graph_activate": [], **lanes},
    }


def run(lanes: dict[str, Any], reorder: list[int] | None = None, **request: Any) -> dict[str, Any]:
    result = assemble_batch([record(lanes, **request)], reorders={"q": reorder} if reorder is not None else None)
    package: dict[str, Any] = json.loads(result.packages[0])
    return package


def ids(package: dict[str, Any]) -> list[str]:
    return [item["candidate_id"] for item in package["items"]]


def candidates(lanes: dict[str, Any]) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = build_batch([parse_record(record(lanes))]).candidates.to_dicts()
    return rows


def test_association_normalizes_kind_lane_and_keys() -> None:
    [row] = candidates({"graph_query": [assoc("cats", "is_a", "mammals")] * 1})
    assert (row["kind"], row["lane"], row["lane_rank"]) == ("association", "graph_query", 1)
    assert row["canonical_key"] == f"cats{SEP}is_a{SEP}mammals"
    assert row["candidate_id"] == f"association{SEP}cats{SEP}is_a{SEP}mammals"


def test_activation_uses_the_inner_association_and_keeps_kind_association() -> None:
    package = run({"graph_activate": [act(assoc("a", "l", "b"), strength=0.75)]})
    [item] = package["items"]
    assert item["kind"] == "association" and "association" in item
    assert "strength" not in json.dumps(item) and item["lane_ranks"] == [{"lane": "graph_activate", "rank": 1}]


def test_primary_attribution_prefers_greatest_magnitude_including_negative() -> None:
    [row] = candidates({"graph_query": [assoc("a", "l", "b", ("small.txt", 1, 0.4), ("big.txt", 2, -3.0))]})
    assert row["source"] == "big.txt"


def test_primary_attribution_ties_break_on_source_then_paragraph() -> None:
    atts = (("same.txt", 9, 1.0), ("same.txt", 2, 1.0), ("zzz.txt", 1, 1.0))
    [row] = candidates({"graph_query": [assoc("a", "l", "b", *atts)]})
    assert row["source"] == "same.txt"


def test_zero_attributions_leave_locator_and_origins_empty() -> None:
    [row] = candidates({"graph_query": [assoc("a", "l", "b")]})
    assert row["source"] is None
    assert build_batch([parse_record(record({"graph_query": [assoc("a", "l", "b")]}))]).origins.is_empty()
    [item] = run({"graph_query": [assoc("a", "l", "b")]})["items"]
    assert item["citation_refs"] == [] and "corroboration" not in item


@pytest.mark.parametrize(
    ("lanes", "lane"),
    [
        ({"bm25": {"rank": 1, "score": 1.0}}, "passage_bm25"),
        ({"vector": {"rank": 1, "score": 0.5}}, "passage_vector"),
        ({"bm25": {"rank": 1, "score": 1.0}, "vector": {"rank": 2, "score": 0.5}}, "passage_fused"),
        ({}, "passage_bm25"),
    ],
)
def test_passage_lane_labeling_covers_all_reachable_shapes(lanes: dict[str, Any], lane: str) -> None:
    [row] = candidates({"passages": [passage("a.md", "t", lanes=lanes)]})
    assert row["lane"] == lane


def test_community_candidate_self_cites_and_uses_community_source_prefix() -> None:
    hit = {"community": "L0-3", "score": 0.5, "text": "summary", "paragraph": 5}
    [row] = candidates({"communities": [hit]})
    assert row["source"] == "community:L0-3" and row["candidate_id"] == f"community{SEP}ctx{SEP}community:L0-3{SEP}5"
    package = run({"communities": [hit]}, include_communities=True)
    assert package["items"][0]["citation_refs"] == [] and package["citations"] == []


def test_candidate_id_does_not_collide_across_field_boundaries() -> None:
    package = run({"graph_query": [assoc("ab", "c", "d"), assoc("a", "bc", "d")]})
    assert len(set(ids(package))) == 2


def test_same_evidence_across_two_lanes_outranks_a_single_lane_candidate_at_same_rank() -> None:
    edge = assoc("e", "l", "o")
    package = run({"graph_query": [assoc("z", "l", "single"), edge], "graph_activate": [act(edge)]}, labels=["l"])
    first = package["items"][0]
    assert first["candidate_id"].endswith(f"e{SEP}l{SEP}o")
    assert first["lane_ranks"] == [{"lane": "graph_activate", "rank": 1}, {"lane": "graph_query", "rank": 2}]
    assert package["plan"]["selection"]["dedup_dropped"] == 1


def test_ties_break_on_kind_then_canonical_key_not_insertion_order() -> None:
    forward = run({"graph_query": [assoc("z", "l", "z")], "graph_activate": [act(assoc("a", "l", "a"))]})
    assert ids(forward)[0] == f"association{SEP}a{SEP}l{SEP}a"


def test_rank_one_passage_and_rank_one_association_fuse_identically() -> None:
    package = run({"graph_activate": [act(assoc("s", "l", "o"))], "passages": [passage("a.md", "t")]})
    assert [item["kind"] for item in package["items"]] == ["association", "passage"]  # tie broken on kind


def test_dedup_keeps_union_of_origins_and_reports_dropped_count() -> None:
    query = assoc("s", "l", "o", ("a.txt", 1, 1.0))
    activate = assoc("s", "l", "o", ("b.txt", 2, 1.0))
    package = run(
        {"graph_query": [query], "graph_activate": [act(activate)], "citations": [cite("a.txt", 1), cite("b.txt", 2)]},
        labels=["l"],
    )
    [item] = package["items"]
    assert item["citation_refs"] == [{"source": "a.txt", "paragraph": 1}, {"source": "b.txt", "paragraph": 2}]
    # corroboration.sources reads the representative's own payload (the activate copy wins rank ties)
    assert item["corroboration"]["sources"] == ["b.txt"]
    assert package["plan"]["selection"]["dedup_dropped"] == 1


@pytest.mark.parametrize(("field", "value"), [("max_items", 0), ("max_bytes", 1), ("max_tokens", 0)])
def test_zero_budget_yields_an_empty_package_not_an_error(field: str, value: int) -> None:
    package = run({"graph_activate": [act(assoc("s", "l", "o"))]}, budget={field: value})
    assert package["items"] == [] and package["omitted_total"] == 1
    assert package["omitted_by_reason"] == {"budget_exceeded": 1}
    assert (package["budget"]["bytes_used"], package["budget"]["tokens_used"]) == (4, 1)


def test_an_over_budget_candidate_is_skipped_so_a_later_smaller_one_still_fits() -> None:
    package = run(
        {"passages": [passage("big.md", "x" * 500), passage("small.md", "tiny", lanes={})]}, budget={"max_bytes": 400}
    )
    assert [item["passage"]["source"] for item in package["items"]] == ["small.md"]
    assert package["omitted"][0]["reason"] == "budget_exceeded"


def test_every_citation_ref_has_a_matching_entry_and_an_unresolvable_one_is_dropped() -> None:
    edge = assoc("s", "l", "o", ("book.txt", 1, 1.0), ("missing.txt", 3, 1.0))
    package = run({"graph_activate": [act(edge)], "citations": [cite("book.txt", 1)]})
    assert package["items"][0]["citation_refs"] == [{"source": "book.txt", "paragraph": 1}]
    assert [(c["source"], c["paragraph"]) for c in package["citations"]] == [("book.txt", 1)]
    assert package["items"][0]["corroboration"]["sources"] == ["book.txt", "missing.txt"]


def test_a_shared_citation_locator_is_not_double_counted_across_two_admission_units() -> None:
    lanes = {
        "graph_activate": [
            act(assoc("a", "l", "x", ("book.txt", 1, 1.0))),
            act(assoc("b", "l", "y", ("book.txt", 1, 1.0))),
        ],
        "citations": [cite("book.txt", 1)],
    }
    generous = run(lanes)
    assert len(generous["items"]) == 2 and len(generous["citations"]) == 1
    used = generous["budget"]
    tight = run(lanes, budget={"max_bytes": used["bytes_used"], "max_tokens": used["tokens_used"]})
    assert len(tight["items"]) == 2 and tight["budget"]["bytes_used"] == used["bytes_used"]


def test_corroboration_survives_a_paragraph_less_attribution() -> None:
    [item] = run({"graph_activate": [act(assoc("s", "l", "o", ("a.txt", None, 1.0)))]})["items"]
    assert item["corroboration"] == {"sources": ["a.txt"], "attributions": []}


def test_unsourced_candidates_never_count_as_repeats_of_each_other() -> None:
    package = run({"graph_activate": [act(assoc("a", "l", "x")), act(assoc("b", "l", "y"))]}, budget={"max_items": 8})
    assert len(package["items"]) == 2


def test_a_contradiction_group_is_admitted_or_omitted_as_a_whole() -> None:
    lanes = {"graph_activate": [act(assoc("猫", "is_a", "哺乳類")), act(assoc("猫", "is_a", "爬虫類"))]}
    generous = run(lanes)
    assert [len(item["contradicts"]) for item in generous["items"]] == [1, 1]
    tight = run(lanes, budget={"max_items": 1})
    assert tight["items"] == [] and tight["omitted_by_reason"] == {"contradiction_group_exceeds_budget": 2}


def test_three_way_contradiction_is_one_group() -> None:
    package = run({"graph_activate": [act(assoc("s", "l", o)) for o in "abc"]})
    assert [len(item["contradicts"]) for item in package["items"]] == [2, 2, 2]
    assert package["plan"]["selection"]["contradiction_groups"] == 1


def test_near_identical_passages_keep_the_higher_ranked_one() -> None:
    package = run({"passages": [passage("s1", "the quick brown fox jumps"), passage("s2", "the quick brown fox jump")]})
    assert [item["passage"]["source"] for item in package["items"]] == ["s1"]
    assert package["omitted"] == [
        {
            "candidate_id": f"passage{SEP}ctx{SEP}s2{SEP}0",
            "kind": "passage",
            "reason": "duplicate_passage",
            "duplicate_of": f"passage{SEP}ctx{SEP}s1{SEP}0",
        }
    ]


def test_distinct_passages_are_not_suppressed() -> None:
    package = run({"passages": [passage("s1", "sake brewing in winter"), passage("s2", "rice polishing ratios")]})
    assert len(package["items"]) == 2


def test_diversity_tiering_prefers_a_novel_source_within_a_tier() -> None:
    lanes = {
        "passages": [
            passage("dominant", "alpha text one", 0),
            passage("dominant", "beta words two", 1),
            passage("other", "gamma thing three", 0),
        ]
    }
    package = run(lanes, budget={"max_items": 12})
    assert [(i["passage"]["source"], i["passage"]["paragraph"]) for i in package["items"]] == [
        ("dominant", 0),
        ("other", 0),
        ("dominant", 1),
    ]


def test_diversity_tiering_remembers_a_source_seen_in_an_earlier_tier() -> None:
    lanes = {
        "passages": [
            passage("alpha", "one text here", 0),
            passage("beta", "two words there", 0),
            passage("alpha", "three things now", 1),
            passage("gamma", "four items later", 0),
        ]
    }
    package = run(lanes, budget={"max_items": 8})
    assert [i["passage"]["source"] for i in package["items"]] == ["alpha", "beta", "gamma", "alpha"]


@pytest.mark.parametrize(
    ("order", "rule"),
    [
        ([0, 1], "has 2 indices for 3 survivors"),
        ([0, 1, 99], r"index 99 is out of range \(0 to 2\)"),
        ([0, 0, 1], "index 0 appears twice"),
    ],
)
def test_an_invalid_reorder_permutation_is_the_callers_usage_error(order: list[int], rule: str) -> None:
    """A fixed permutation from the API is the caller's data: an invalid one is refused (the HTTP
    reranker's invalid answer falls back instead, as ``invalid_permutation``)."""
    from assembler import UsageError

    lanes = {"graph_activate": [act(assoc(s, "l", "o")) for s in ("s1", "s2", "s3")]}
    with pytest.raises(UsageError, match=rf"^reorders\['q'\] must be a permutation of the query's survivors: {rule}$"):
        run(lanes, reorder=order)


def test_a_reversing_reorder_reverses_admission_order() -> None:
    lanes = {"graph_activate": [act(assoc(s, "l", "o")) for s in ("s1", "s2", "s3", "s4")]}
    package = run(lanes, reorder=[3, 2, 1, 0])
    assert [i["association"]["subject"] for i in package["items"]] == ["s4", "s3", "s2", "s1"]
    assert [i["fused_rank"] for i in package["items"]] == [4, 3, 2, 1]


def test_every_non_admitted_candidate_is_counted_in_omitted_total() -> None:
    hits = [passage(f"s{i}", f"distinct text body number {i}") for i in range(25)]
    package = run({"passages": hits}, budget={"max_items": 3}, search_limit=25)
    assert len(package["items"]) + package["omitted_total"] == 25
    assert len(package["omitted"]) == 20
    # The texts are near-duplicates of each other: 1 item, 24 duplicate_passage omissions.
    assert package["omitted_by_reason"] == {"duplicate_passage": 24}


def test_an_item_with_no_contradictions_has_no_contradicts_key() -> None:
    [item] = run({"graph_activate": [act(assoc("s", "l", "o"))]})["items"]
    assert "contradicts" not in item


def test_mixed_pool_produces_a_deterministic_package() -> None:
    lanes = {
        "graph_activate": [act(assoc("s", "l", "o", ("a.md", 0, 1.0)))],
        "passages": [passage("b.md", "text")],
        "communities": [{"community": "L0-1", "score": 0.5, "text": "sum", "paragraph": 0}],
        "citations": [cite("a.md", 0)],
    }
    first = assemble_batch([record(lanes, include_communities=True)]).packages[0]
    assert first == assemble_batch([record(lanes, include_communities=True)]).packages[0]
    package = json.loads(first)
    assert len(package["items"]) == 3 and len(package["citations"]) == 1 and package["omitted_total"] == 0


def test_budget_limits_resolve_defaults_and_ceilings() -> None:
    """`resolve_fills_defaults_and_clamps_to_ceilings` and zero staying zero."""
    from assembler.contract.request import resolve_limits

    assert vars(resolve_limits({})) == {"max_items": 40, "max_bytes": 65536, "max_tokens": 4000}
    huge = resolve_limits({"max_items": 10**9, "max_bytes": 10**9, "max_tokens": 10**12})
    assert vars(huge) == {"max_items": 1000, "max_bytes": 1048576, "max_tokens": 10**12}
    assert vars(resolve_limits({"max_items": 0, "max_bytes": 0, "max_tokens": 0})) == dict.fromkeys(
        ("max_items", "max_bytes", "max_tokens"), 0
    )
    assert resolve_limits({"max_items": 3}, {"max_items": 5000}).max_items == 1000
