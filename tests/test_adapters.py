"""``assembler.adapters``: records from plain ranked lists and from the real LangChain and Haystack
document classes (LlamaIndex too where it is installed), the lanes build's fusion rule, the minimal
valid record, and the round trip framework documents -> record -> ``assemble`` -> package ->
framework documents."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

os.environ.setdefault("HAYSTACK_TELEMETRY_ENABLED", "False")

import haystack
from langchain_core.documents import Document as LangchainDocument

from assembler import assemble
from assembler.adapters import (
    Hit,
    as_hit,
    fused_passages,
    lane_record,
    package_documents,
    to_haystack,
    to_langchain,
    to_llama_index,
)
from assembler.contract.jsontext import to_f32
from assembler.errors import UsageError
from assembler.stages.lanes import parse_record

TEXTS = {
    "kura": "青嶺酒造は雲居県霧沢町の蔵元である。",
    "toji": "青嶺酒造の杜氏は高瀬である。",
    "mizu": "仕込み水は霧沢川の伏流水を使う。",
    "meigara": "代表銘柄は「青嶺」である。",
}


def test_plain_lists_become_the_minimal_valid_record() -> None:
    record = lane_record("q1", {"bm25": [("kura", TEXTS["kura"], 2.5)]}, context="sake")
    assert record == {
        "query_id": "q1",
        "context": "sake",
        "request": {"origins": [], "search_limit": 1},
        "lanes": {
            "passages": [
                {
                    "source": "kura",
                    "paragraph": 0,
                    "score": to_f32(1 / 61),
                    "text": TEXTS["kura"],
                    "lanes": {"bm25": {"rank": 1, "score": 2.5}},
                }
            ]
        },
    }
    parse_record(record)
    package = json.loads(assemble(record))
    assert [item["passage"]["source"] for item in package["items"]] == ["kura"]


def test_the_passage_score_is_the_lanes_build_fusion() -> None:
    """RRF k = 60 over each lane's positions, f32, ordered by it, ties by (source, paragraph)."""
    lanes = {
        "bm25": [("mizu", TEXTS["mizu"], 9.0), ("toji", TEXTS["toji"], 8.0), ("kura", TEXTS["kura"], 7.0)],
        "vector": [{"id": "kura", "text": TEXTS["kura"], "score": 0.9}, {"id": "meigara", "text": TEXTS["meigara"]}],
    }
    passages = fused_passages(lanes)
    assert [(p["source"], p["score"]) for p in passages] == [
        ("kura", to_f32(1 / 63 + 1 / 61)),
        ("mizu", to_f32(1 / 61)),
        ("meigara", to_f32(1 / 62)),  # ties with toji: by source
        ("toji", to_f32(1 / 62)),
    ]
    assert passages[0]["lanes"] == {"bm25": {"rank": 3, "score": 7.0}, "vector": {"rank": 1, "score": to_f32(0.9)}}
    assert passages[2]["lanes"] == {"vector": {"rank": 2, "score": 0.0}}  # no score given: 0.0


def test_locate_maps_hits_to_sources_and_paragraphs() -> None:
    hits = [{"id": f"c{i}", "text": f"chunk {i}", "metadata": {"file": "a.md", "chunk": i}} for i in range(3)]
    passages = fused_passages({"vector": hits}, locate=lambda hit: (hit.metadata["file"], hit.metadata["chunk"]))
    assert [(p["source"], p["paragraph"]) for p in passages] == [("a.md", 0), ("a.md", 1), ("a.md", 2)]


@pytest.mark.parametrize(
    ("lanes", "message"),
    [
        ({"dense": []}, "lanes: unknown lane 'dense' (passage lanes: bm25, vector)"),
        ({"bm25": [object()]}, "lanes['bm25'][0]: cannot read a object: expected a tuple, a dict"),
        ({"bm25": [("a", "x")]}, "lanes['bm25'][0]: a tuple must be (id, text, score[, metadata])"),
        (
            {"bm25": [{"id": "a", "text": "x", "source": "s"}]},
            "unknown key 'source' (known: id, text, score, metadata)",
        ),
        ({"bm25": [{"id": "a"}]}, "lanes['bm25'][0]: text is required"),
        ({"bm25": [{"text": "x"}]}, "lanes['bm25'][0]: has no id (a non-empty string)"),
        ({"vector": [("a", 3, 1.0)]}, "lanes['vector'][0]: text must be a string, got int"),
        ({"bm25": [("a", "x", float("nan"))]}, "score must be a finite number that fits an f32, got nan"),
        ({"bm25": [("a", "x", 1e39)]}, "score must be a finite number that fits an f32, got 1e+39"),
        (  # an integer past a float's range: an OverflowError before
            {"bm25": [("a", "x", 10**400)]},
            "score must be a finite number that fits an f32, got an integer past a float's range",
        ),
        ({"bm25": [("a", "x", "high")]}, "score must be a number, got str"),
        ({"bm25": [("a", "x", 1.0), ("a", "x", 0.5)]}, "lanes['bm25'][1]: (a, 0) is already at rank 1 of this lane"),
        ({"bm25": [("a", "x", 1.0)], "vector": [("a", "y", 0.5)]}, "(a, 0) has another text in another lane"),
    ],
)
def test_bad_hits_are_refused_with_their_lane_and_position(lanes: dict[str, Any], message: str) -> None:
    with pytest.raises(UsageError) as caught:
        fused_passages(lanes)
    assert message in str(caught.value)
    assert TEXTS["kura"] not in str(caught.value)


def test_a_bad_locator_is_refused() -> None:
    with pytest.raises(UsageError, match=r"locate must return \(source: str, paragraph"):
        fused_passages({"bm25": [("a", "x", 1.0)]}, locate=lambda hit: (hit.id, -1))


def test_record_options_reach_the_request() -> None:
    record = lane_record(
        "q1",
        {"bm25": [("a", "x", 1.0)]},
        query="what?",
        origins="青嶺酒造",
        search_limit=3,
        budget={"max_items": 2},
    )
    assert record["request"] == {
        "origins": ["青嶺酒造"],
        "text_fallback_query": "what?",
        "search_limit": 3,
        "budget": {"max_items": 2},
    }
    assert lane_record("q2", {})["request"] == {"origins": []}  # no passages: the contract's default limit


def langchain_docs() -> list[LangchainDocument]:
    return [LangchainDocument(page_content=text, metadata={"lang": "ja"}, id=key) for key, text in TEXTS.items()]


def assembled(record: dict[str, Any], **budget: int) -> str:
    return assemble({**record, "request": {**record["request"], "budget": budget}} if budget else record)


def test_langchain_round_trip() -> None:
    docs = langchain_docs()
    bm25 = [(docs[1], 12.0), (docs[0], 8.0), (docs[3], 1.0)]  # similarity_search_with_score's pairs
    record = lane_record("q1", {"bm25": bm25, "vector": [docs[2], docs[1]]}, context="sake", query="杜氏は誰か")
    package_text = assembled(record, max_items=3)
    package = json.loads(package_text)
    back = to_langchain(package_text)
    assert all(isinstance(doc, LangchainDocument) for doc in back)
    assert [doc.id for doc in back] == [item["passage"]["source"] for item in package["items"]]
    assert len(back) == 3
    for doc, item in zip(back, package["items"], strict=True):
        assert doc.page_content == TEXTS[doc.id]
        assert doc.metadata["kind"] == "passage"
        assert doc.metadata["fused_rank"] == item["fused_rank"]
        assert (doc.metadata["source"], doc.metadata["paragraph"]) == (doc.id, 0)
        assert doc.metadata["citations"] == []
        assert doc.metadata["candidate_id"] == f"passage\x00sake\x00{doc.id}\x000"
    # ... and the documents go round again to the same package
    again = lane_record("q1", {"bm25": [(doc, doc.metadata["fused_rank"]) for doc in back]}, context="sake")
    assert {p["source"] for p in again["lanes"]["passages"]} == {doc.id for doc in back}


def test_haystack_round_trip() -> None:
    docs = [haystack.Document(id=key, content=text, score=10.0 - i) for i, (key, text) in enumerate(TEXTS.items())]
    record = lane_record("q1", {"vector": docs}, context="sake")
    assert [p["lanes"]["vector"]["score"] for p in record["lanes"]["passages"]] == [10.0, 9.0, 8.0, 7.0]
    package_text = assembled(record)
    back = to_haystack(package_text)
    assert all(isinstance(doc, haystack.Document) for doc in back)
    items = json.loads(package_text)["items"]
    assert [(doc.id, doc.content, doc.score) for doc in back] == [
        (item["passage"]["source"], item["passage"]["text"], item["passage"]["score"]) for item in items
    ]
    assert sorted(doc.id for doc in back) == sorted(TEXTS)
    assert [doc.meta["fused_rank"] for doc in back] == [item["fused_rank"] for item in items]


class _Node:
    """LlamaIndex's TextNode as the adapter reads it (duck typing)."""

    def __init__(self, node_id: str, text: str) -> None:
        self.node_id, self.text, self.metadata = node_id, text, {"file": "x"}


class _NodeWithScore:
    def __init__(self, node: _Node, score: float | None) -> None:
        self.node, self.score = node, score


def test_llama_index_shapes_are_read_by_their_attributes() -> None:
    hit = as_hit(_NodeWithScore(_Node("n1", "text"), 0.25))
    assert hit == Hit("n1", "text", 0.25, {"file": "x"})


def test_llama_index_round_trip() -> None:
    schema = pytest.importorskip("llama_index.core.schema")
    nodes = [schema.NodeWithScore(node=schema.TextNode(id_=key, text=text), score=1.0) for key, text in TEXTS.items()]
    back = to_llama_index(assemble(lane_record("q1", {"bm25": nodes})))
    assert sorted(node.node.node_id for node in back) == sorted(TEXTS)


def test_associations_and_citations_come_back_in_metadata() -> None:
    """The conformance fixture of docs/package.md: two contradicting associations with citations."""
    record = {
        "query_id": "c",
        "context": "contradiction-corpus",
        "request": {"origins": ["猫"]},
        "lanes": {
            "graph_activate": [
                {
                    "strength": 0.5,
                    "path": ["猫"],
                    "association": {
                        "subject": "猫",
                        "label": "is_a",
                        "object": obj,
                        "weight": 1.0,
                        "count": 1,
                        "attributions": [{"source": source, "weight": 1.0, "count": 1, "paragraph": 0}],
                    },
                }
                for obj, source in (("哺乳類", "s1.md"), ("爬虫類", "s2.md"))
            ],
            "citations": [
                {
                    "source": "s1.md",
                    "paragraph": 0,
                    "citation": {
                        "text": "猫は哺乳類である。",
                        "source": "s1.md",
                        "locator": {"kind": "page", "value": "1"},
                    },
                },
            ],
        },
    }
    line = json.dumps({"query_id": "c", "package": json.loads(assemble(record))}, ensure_ascii=False)
    docs = package_documents(line)  # an output line works as well as the package
    assert [doc["text"] for doc in docs] == ["猫 is_a 哺乳類", "猫 is_a 爬虫類"]
    first = docs[0]
    assert first["id"] == "association:猫:is_a:哺乳類"
    assert first["score"] is None
    assert first["metadata"] == {
        "kind": "association",
        "fused_rank": 1,
        "candidate_id": "association\x00猫\x00is_a\x00哺乳類",
        "source": None,
        "paragraph": None,
        "lane_ranks": [{"lane": "graph_activate", "rank": 1}],
        "contradicts": ["association\x00猫\x00is_a\x00爬虫類"],
        "citations": [
            {
                "source": "s1.md",
                "paragraph": 0,
                "text": "猫は哺乳類である。",
                "section": None,
                "locator": {"kind": "page", "value": "1"},
            }
        ],
    }
    assert docs[1]["metadata"]["citations"] == []  # s2.md did not resolve
    lc = to_langchain(line)
    assert [doc.page_content for doc in lc] == ["猫 is_a 哺乳類", "猫 is_a 爬虫類"]


def test_not_a_package_is_refused() -> None:
    with pytest.raises(UsageError, match="package: expected a package"):
        package_documents('{"query_id": "q"}')


def test_importing_the_module_loads_no_framework() -> None:
    frameworks = "{'langchain_core', 'haystack', 'llama_index'}"
    code = f"import sys, assembler.adapters; print(sorted({frameworks} & set(sys.modules)))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


DOC = Path(__file__).resolve().parent.parent / "docs" / "adapters.md"
BLOCKS = re.findall(r"```python\n(.*?)```", DOC.read_text(encoding="utf-8"), flags=re.DOTALL)


@pytest.mark.parametrize("code", BLOCKS, ids=[f"block{i}" for i in range(len(BLOCKS))])
def test_the_examples_of_docs_adapters_run(
    code: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    needs = re.match(r"# needs: (\S+)", code)
    if needs:
        pytest.importorskip(needs.group(1))
    monkeypatch.chdir(tmp_path)
    exec(compile(code, str(DOC), "exec"), {"__name__": "__docs__"})
    shown = re.search(r"prints\n\n```text\n(.*?)```", DOC.read_text(encoding="utf-8"), flags=re.DOTALL)
    if "print(" in code:
        assert shown is not None and capsys.readouterr().out == shown.group(1)
