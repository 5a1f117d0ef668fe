"""Graph lanes: the entity-mention graph on a tiny hand-made corpus, and triple activation."""

from __future__ import annotations

import json

import numpy as np
import pytest

from assembler.retrieval import Case, Fact, Paragraph
from assembler.retrieval.graph import MENTION_LABEL, TripleGraph, mention_activations

from .helpers import TINY, HashEncoder


def _triples(activations: list[dict[str, object]]) -> list[tuple[str, str, str]]:
    return [
        (a["association"]["subject"], a["association"]["label"], a["association"]["object"])  # type: ignore[index]
        for a in activations
    ]


def test_mention_graph_links_question_entities_to_mentioning_titles() -> None:
    retrieved = [(p, 0.9 - 0.1 * i) for i, p in enumerate(TINY)]
    activations = mention_activations(["Modern Drummer Hall of Fame", "Jeff Porcaro"], retrieved, limit=20, decay=0.5)
    assert _triples(activations) == [
        ("Neil Peart", MENTION_LABEL, "Modern Drummer Hall of Fame"),
        ("Toto", MENTION_LABEL, "Jeff Porcaro"),
        ("Jeff Porcaro", MENTION_LABEL, "Modern Drummer Hall of Fame"),
    ]
    hall_of_fame, porcaro = ["Modern Drummer Hall of Fame"], ["Jeff Porcaro"]
    assert [a["path"] for a in activations] == [hall_of_fame, porcaro, hall_of_fame]
    strengths = [a["strength"] for a in activations]
    assert strengths == pytest.approx([0.4, 0.3, 0.25])
    hall = activations[2]["association"]
    # only paragraph 0 of "Jeff Porcaro" mentions the Hall of Fame
    assert [(a["source"], a["paragraph"]) for a in hall["attributions"]] == [("Jeff Porcaro", 0)]  # type: ignore[index]
    toto = activations[1]["association"]
    assert toto["count"] >= 1 and toto["weight"] == 1.0  # type: ignore[index]


def test_a_title_equal_to_the_entity_makes_no_self_mention_fact() -> None:
    retrieved = [(p, 0.9) for p in TINY]
    for entity in ("Jeff Porcaro", "jeff porcaro", "ＪＥＦＦ ＰＯＲＣＡＲＯ"):
        triples = _triples(mention_activations([entity], retrieved, limit=20, decay=0.5))
        assert triples and all(subject != "Jeff Porcaro" for subject, _, _ in triples)


def test_mention_graph_limit_and_no_mentions() -> None:
    retrieved = [(p, 0.5) for p in TINY]
    assert len(mention_activations(["Rush", "Jeff Porcaro", "1993"], retrieved, limit=2, decay=0.5)) == 2
    assert mention_activations(["Rushmore"], retrieved, limit=20, decay=0.5) == []


def test_mention_graph_in_built_lanes_null_without_entities_empty_without_mentions() -> None:
    pytest.importorskip("bm25s")
    from assembler.retrieval import build_lanes

    cases = [
        Case("entities", "Which drummer is in the Modern Drummer Hall of Fame?", ("Modern Drummer Hall of Fame",)),
        Case("none", "which drummer died?"),
        Case("unmentioned", "Where is Lisbon?", ("Lisbon",)),
    ]
    records = {
        json.loads(line)["query_id"]: json.loads(line) for line in build_lanes(TINY, cases, encoder=HashEncoder())
    }
    assert records["entities"]["lanes"]["graph_activate"]
    assert records["entities"]["request"]["origins"] == ["Modern Drummer Hall of Fame"]
    assert records["none"]["lanes"]["graph_activate"] is None
    assert records["none"]["request"]["origins"] == ["which drummer died?"]
    assert records["unmentioned"]["lanes"]["graph_activate"] == []
    assert all(r["lanes"]["graph_query"] is None for r in records.values())


GRAPH = [
    Fact("k", "青嶺酒造", "杜氏", "高瀬", 1.0, "a.md", 0),
    Fact("k", "青嶺酒造", "杜氏", "高瀬", 1.0, "b.md", 2),
    Fact("k", "高瀬", "出身", "南部杜氏", 1.0, "a.md", 1),
    Fact("k", "青嶺酒造", "行う", "大量生産", -1.0, "a.md", 1),
    Fact("k", "青嶺酒造", "創業年", "1907年", 1.0, "a.md", 0),
    Fact("k", "南部杜氏", "地方", "岩手", 1.0),
]
PARAGRAPHS = {("a.md", 0): Paragraph("k", "a.md", 0, "x", section="由来", locator=("page", "1"))}


def test_triple_graph_merges_assertions_into_associations() -> None:
    graph = TripleGraph(GRAPH, PARAGRAPHS)
    first = graph.associations[0]
    assert (first["subject"], first["weight"], first["count"]) == ("青嶺酒造", 1.0, 2)
    assert first["attributions"][0] == {
        "source": "a.md",
        "weight": 1.0,
        "count": 1,
        "paragraph": 0,
        "section": "由来",
        "locator": {"kind": "page", "value": "1"},
    }
    assert first["attributions"][1]["section"] is None
    assert graph.associations[-1]["attributions"] == []


def test_resolve_normalized_then_fuzzy() -> None:
    graph = TripleGraph(GRAPH, PARAGRAPHS)
    assert graph.resolve("１９０７年") == "1907年"
    assert graph.resolve(" 高瀬 ") == "高瀬"
    assert graph.resolve("青嶺酒蔵") == "青嶺酒造"  # bigram Dice 2/3
    assert graph.resolve("月白屋") is None


def test_activation_hops_strength_and_limit() -> None:
    graph = TripleGraph(GRAPH, PARAGRAPHS)
    relevance = np.array([0.8, 0.9, 0.5, 0.7, 0.6], dtype=np.float32)
    activations = graph.activate(["青嶺酒造"], relevance, limit=20, decay=0.5)
    assert _triples(activations) == [
        ("青嶺酒造", "杜氏", "高瀬"),
        ("青嶺酒造", "創業年", "1907年"),
        ("青嶺酒造", "行う", "大量生産"),  # |weight| of the negated fact
        ("高瀬", "出身", "南部杜氏"),  # two hops: decay squared
    ]
    assert [a["strength"] for a in activations] == [0.4, 0.35, 0.25, 0.225]
    assert activations[3]["path"] == ["青嶺酒造", "高瀬"]
    assert len(graph.activate(["青嶺酒造"], relevance, limit=2, decay=0.5)) == 2
    assert len(graph.activate(["青嶺酒造"], relevance, limit=20, decay=0.5, hops=3)) == 5
