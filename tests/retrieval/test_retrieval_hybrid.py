"""BM25/dense fusion into PassageHit lanes: ranks, f32 scores, order."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

from assembler.contract.jsontext import format_f32, to_f32
from assembler.retrieval.hybrid import fuse_hits, rank_lane

from .helpers import TINY, HashEncoder


def test_rank_lane_orders_by_score_then_document_and_keeps_positive_only() -> None:
    scores = np.array([0.5, 0.0, 2.0, 0.5, -1.0], dtype=np.float32)
    assert rank_lane(scores, depth=10, positive=True) == [(2, 2.0), (0, 0.5), (3, 0.5)]
    assert rank_lane(scores, depth=2) == [(2, 2.0), (0, 0.5)]
    assert [doc for doc, _ in rank_lane(scores, depth=10)] == [2, 0, 3, 1, 4]


def test_rank_lane_scores_are_f32() -> None:
    scores = np.array([0.1, 0.7], dtype=np.float32)
    for _, score in rank_lane(scores, depth=2):
        assert score == float(np.float32(score)) == to_f32(score)


def test_fuse_is_rrf_k60_rounded_to_f32_and_ordered() -> None:
    keys = [("a", 0), ("b", 0), ("c", 0), ("d", 0)]
    bm25 = [(0, 9.5), (2, 4.25), (1, 1.0)]
    vector = [(1, 0.91), (3, 0.8), (0, 0.5)]
    hits = fuse_hits(bm25, vector, keys)
    by_doc = {hit.doc: hit for hit in hits}
    assert by_doc[0].bm25 == (1, 9.5) and by_doc[0].vector == (3, 0.5)
    assert by_doc[1].bm25 == (3, 1.0) and by_doc[1].vector == (1, 0.91)
    assert by_doc[2].vector is None and by_doc[3].bm25 is None
    assert by_doc[0].score == to_f32(1 / 61 + 1 / 63)
    assert by_doc[1].score == to_f32(1 / 63 + 1 / 61)
    assert by_doc[2].score == to_f32(1 / 62)
    for hit in hits:
        assert hit.score == float(np.float32(hit.score))
    # docs 0/1 and 2/3 tie on the f32 score: (source, paragraph) decides
    assert [hit.doc for hit in hits] == [0, 1, 2, 3]
    assert hits == sorted(hits, key=lambda h: (-h.score, keys[h.doc]))


def test_fuse_ties_break_on_source_then_paragraph() -> None:
    keys = [("b", 1), ("a", 2), ("a", 1)]
    hits = fuse_hits([(0, 1.0)], [(1, 0.5)], keys)  # both rank 1 in one lane: equal scores
    assert [hit.doc for hit in hits] == [1, 0]
    hits = fuse_hits([(2, 1.0)], [(1, 0.5)], keys)
    assert [hit.doc for hit in hits] == [2, 1]


def _build(**kwargs: object) -> list[dict[str, object]]:
    from assembler.retrieval import Case, build_lanes

    cases = [Case("q1", "Which drummer entered the Modern Drummer Hall of Fame?"), Case("q2", "Rush album 1993")]
    return [json.loads(line) for line in build_lanes(TINY, cases, encoder=HashEncoder(), **kwargs)]  # type: ignore[arg-type]


def test_built_passages_match_independent_lane_rankings() -> None:
    pytest.importorskip("bm25s")
    from assembler.retrieval import Settings
    from assembler.retrieval.engines import Bm25Index

    records = _build(settings=Settings(search_limit=4))
    encoder = HashEncoder()
    index = Bm25Index([p.index_text for p in TINY])
    vectors = encoder.passage([p.index_text for p in TINY])
    keys = [(p.source, p.paragraph) for p in TINY]
    for record in records:
        query = record["request"]["text_fallback_query"]  # type: ignore[index]
        bm25_order = rank_lane(index.scores(query), 50, positive=True)
        vector_order = rank_lane((vectors @ encoder.query([query])[0]).astype(np.float32), 50)
        passages = record["lanes"]["passages"]  # type: ignore[index]
        assert len(passages) == 4
        for hit in passages:
            doc = keys.index((hit["source"], hit["paragraph"]))
            expected = 0.0
            bm25_ranks = [i for i, (d, _) in enumerate(bm25_order, start=1) if d == doc]
            if bm25_ranks:
                assert hit["lanes"]["bm25"]["rank"] == bm25_ranks[0]
                assert hit["lanes"]["bm25"]["score"] == pytest.approx(bm25_order[bm25_ranks[0] - 1][1], rel=1e-6)
                expected += 1 / (60 + bm25_ranks[0])
            else:
                assert "bm25" not in hit["lanes"]
            vector_rank = next(i for i, (d, _) in enumerate(vector_order, start=1) if d == doc)
            assert hit["lanes"]["vector"]["rank"] == vector_rank
            expected += 1 / (60 + vector_rank)
            assert to_f32(hit["score"]) == to_f32(expected)
            assert hit["text"] == TINY[doc].text
        scores = [to_f32(hit["score"]) for hit in passages]
        assert scores == sorted(scores, reverse=True)


def test_scores_are_written_in_shortest_f32_form() -> None:
    pytest.importorskip("bm25s")
    from assembler.retrieval import Case, build_lanes

    line = next(build_lanes(TINY, [Case("q", "Jeff Porcaro drummer")], encoder=HashEncoder()))
    tokens = re.findall(r'"score":(-?[0-9.e+-]+)', line)
    assert tokens
    for token in tokens:
        assert format_f32(to_f32(float(token))) == token
