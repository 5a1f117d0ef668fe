"""The harness's scores against an outside reference: pytrec_eval (trec_eval's own C code) on the
same run and qrels, to 1e-9.

What is meant to agree (``docs/evaluate.md``, "The numbers against trec_eval"), when every hit of a
case has a distinct source, as with one paragraph per document:

* the contract's ``recall_at_k`` is trec_eval's ``recall_k``;
* its ``mrr`` is ``recip_rank`` of the run cut at k (trec_eval's measure has no cut of its own);
* its ``ndcg`` is trec_eval's ``ndcg`` of the run cut at k: the ideal is over *every* relevant
  document, so it equals ``ndcg_cut_k`` only for a query with at most k relevant documents;
* the ``qrels`` block (:func:`standard_scores`) is ``recall_k``, ``recip_rank`` of the cut run and
  ``ndcg_cut_k`` for every query, a query without a relevant document included (0, as trec_eval).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import pytest
import pytrec_eval

from assembler.evaluate.dump import load_lanes
from assembler.evaluate.harness import RunConfig, evaluate_cases
from assembler.evaluate.loader import load_eval
from assembler.evaluate.qrels import load_qrels_set, qrels_block, standard_scores

ROOT = Path(__file__).resolve().parents[2]
HOTPOT = ROOT / "data" / "eval" / "hotpotqa"
TOLERANCE = 1e-9

Run = dict[str, dict[str, float]]
Judgments = dict[str, dict[str, int]]


def as_run(ranked: Mapping[str, Sequence[str]]) -> Run:
    """Ranked ids as a trec_eval run: strictly falling scores, so trec_eval's own sort (score, then
    doc id) keeps the given order."""
    return {qid: {doc: float(len(docs) - i) for i, doc in enumerate(docs)} for qid, docs in ranked.items()}


def reference(judgments: Judgments, ranked: Mapping[str, Sequence[str]], k: int) -> dict[str, dict[str, float]]:
    """pytrec_eval's recall_k, ndcg_cut_k (on the whole ranking), and recip_rank and ndcg of the
    ranking cut at k, per query."""
    whole = pytrec_eval.RelevanceEvaluator(judgments, {f"recall.{k}", f"ndcg_cut.{k}"}).evaluate(as_run(ranked))
    cut = {qid: docs[:k] for qid, docs in ranked.items()}
    at_k = pytrec_eval.RelevanceEvaluator(judgments, {"recip_rank", "ndcg"}).evaluate(as_run(cut))
    return {
        qid: {
            "recall": whole[qid][f"recall_{k}"],
            "ndcg_cut": whole[qid][f"ndcg_cut_{k}"],
            "mrr": at_k[qid]["recip_rank"],
            "ndcg": at_k[qid]["ndcg"],
        }
        for qid in ranked
    }


def lane_sources() -> dict[str, list[str]]:
    """The committed HotpotQA baseline ranking: each query's passage lane as source names."""
    lines = (HOTPOT / "lanes.jsonl").read_text(encoding="utf-8").splitlines()
    records = [json.loads(line) for line in lines]
    return {r["query_id"]: [hit["source"] for hit in r["lanes"]["passages"]] for r in records}


def test_the_committed_ranking_has_one_paragraph_per_source() -> None:
    """The premise of an exact match: no case has two hits of one source."""
    ranked = lane_sources()
    assert len(ranked) == 100
    assert all(len(set(docs)) == len(docs) == 10 for docs in ranked.values())


def test_the_contract_scores_of_the_committed_eval_set_are_trec_eval_s() -> None:
    evalset = load_eval(str(HOTPOT / "eval.jsonl"))
    outcomes = evaluate_cases(evalset, load_lanes(str(HOTPOT / "lanes.jsonl"), evalset), RunConfig())
    judgments = {c.case_id: {e.source: e.relevance for e in c.expected_sources} for c in evalset.cases}
    ranked = lane_sources()
    expected = reference(judgments, ranked, 10)
    for case, outcome in zip(evalset.cases, outcomes, strict=True):
        assert outcome.recall is not None
        ours, theirs = outcome.recall, expected[case.case_id]
        assert ours["recall_at_k"] == pytest.approx(theirs["recall"], abs=TOLERANCE)
        assert ours["mrr"] == pytest.approx(theirs["mrr"], abs=TOLERANCE)
        assert ours["ndcg"] == pytest.approx(theirs["ndcg"], abs=TOLERANCE)
        assert ours["ndcg"] == pytest.approx(theirs["ndcg_cut"], abs=TOLERANCE)  # 2 relevant, k = 10


def graded_qrels(ranked: Mapping[str, Sequence[str]], seed: int) -> Judgments:
    """Grades -1..4 on random retrieved documents, and 0 to 12 relevant documents never retrieved
    (so some queries have more relevant documents than k, and some none at all)."""
    rng = np.random.default_rng(seed)
    judgments: Judgments = {}
    for i, (qid, docs) in enumerate(ranked.items()):
        if i % 10 == 0:  # nothing relevant: grades -1 and 0 only
            judgments[qid] = {doc: int(rng.integers(-1, 1)) for doc in docs[:3]}
            continue
        judged = {doc: int(rng.integers(-1, 5)) for doc in docs if rng.random() < 0.6}
        judged.update({f"unretrieved-{qid}-{j}": int(rng.integers(1, 4)) for j in range(int(rng.integers(0, 13)))})
        judgments[qid] = judged or {docs[0]: 0}
    return judgments


def write_qrels(tmp_path: Path, judgments: Judgments) -> tuple[Path, Path]:
    qrels = tmp_path / "test.tsv"
    rows = [f"{qid}\t{doc}\t{grade}\n" for qid, judged in judgments.items() for doc, grade in judged.items()]
    qrels.write_text("query-id\tcorpus-id\tscore\n" + "".join(rows), encoding="utf-8")
    queries = tmp_path / "queries.jsonl"
    queries.write_text("".join(json.dumps({"_id": q, "text": f"question {q}"}) + "\n" for q in judgments), "utf-8")
    return qrels, queries


@pytest.mark.parametrize("k", [1, 3, 5, 10])
def test_graded_qrels_runs_agree_with_trec_eval(tmp_path: Path, k: int) -> None:
    ranked = lane_sources()
    judgments = graded_qrels(ranked, seed=k)
    qset = load_qrels_set(*map(str, write_qrels(tmp_path, judgments)), limit=k)
    outcomes = evaluate_cases(qset, load_lanes(str(HOTPOT / "lanes.jsonl"), qset), RunConfig())
    expected = reference(judgments, ranked, k)
    blocks = [outcome.block for outcome in outcomes]
    standard = qrels_block(qset, {"cases": blocks})
    relevant = {qid: sum(grade >= 1 for grade in judged.values()) for qid, judged in judgments.items()}
    differs = 0
    for case, outcome, row in zip(qset.cases, outcomes, standard["cases"], strict=True):
        theirs = expected[case.case_id]
        # the qrels block: the standard measures, on every case
        assert row[f"recall@{k}"] == pytest.approx(theirs["recall"], abs=TOLERANCE)
        assert row[f"mrr@{k}"] == pytest.approx(theirs["mrr"], abs=TOLERANCE)
        assert row[f"ndcg@{k}"] == pytest.approx(theirs["ndcg_cut"], abs=TOLERANCE)
        # the contract's recall block: only cases with a relevant document have one
        assert (outcome.recall is None) == (relevant[case.case_id] == 0)
        if outcome.recall is None:
            assert theirs == {"recall": 0.0, "ndcg_cut": 0.0, "mrr": 0.0, "ndcg": 0.0}
            continue
        assert outcome.recall["recall_at_k"] == pytest.approx(theirs["recall"], abs=TOLERANCE)
        assert outcome.recall["mrr"] == pytest.approx(theirs["mrr"], abs=TOLERANCE)
        assert outcome.recall["ndcg"] == pytest.approx(theirs["ndcg"], abs=TOLERANCE)
        if relevant[case.case_id] <= k:
            assert outcome.recall["ndcg"] == pytest.approx(theirs["ndcg_cut"], abs=TOLERANCE)
        elif abs(outcome.recall["ndcg"] - theirs["ndcg_cut"]) > TOLERANCE:
            differs += 1
    assert any(value == 0 for value in relevant.values())
    assert differs > 0  # the documented difference is real: more relevant documents than k
    means = {name: np.mean([expected[c.case_id][key] for c in qset.cases]) for name, key in
             ((f"recall@{k}", "recall"), (f"mrr@{k}", "mrr"), (f"ndcg@{k}", "ndcg_cut"))}  # fmt: skip
    for name, value in means.items():
        assert standard["metrics"][name] == pytest.approx(value, abs=TOLERANCE)


def test_standard_scores_agree_with_trec_eval_on_random_runs() -> None:
    rng = np.random.default_rng(7)
    vocabulary = [f"d{i}" for i in range(30)]
    ranked: dict[str, list[str]] = {}
    judgments: Judgments = {}
    ks: dict[str, int] = {}
    for q in range(300):
        qid = f"q{q}"
        ranked[qid] = [str(doc) for doc in rng.permutation(vocabulary)[: int(rng.integers(1, 20))]]
        judgments[qid] = {str(doc): int(rng.integers(-2, 5)) for doc in rng.permutation(vocabulary)[:12]}
        ks[qid] = int(rng.integers(1, 15))
    scores = standard_scores(list(ranked.values()), list(judgments.values()), list(ks.values()))
    for i, qid in enumerate(ranked):
        theirs = reference({qid: judgments[qid]}, {qid: ranked[qid]}, ks[qid])[qid]
        assert scores["recall"][i] == pytest.approx(theirs["recall"], abs=TOLERANCE)
        assert scores["mrr"][i] == pytest.approx(theirs["mrr"], abs=TOLERANCE)
        assert scores["ndcg"][i] == pytest.approx(theirs["ndcg_cut"], abs=TOLERANCE)


def test_a_repeated_document_scores_as_the_run_without_its_repeats() -> None:
    judged = {"a": 2, "b": 1, "c": 3}
    scores = standard_scores([["x", "a", "x", "a", "b", "y", "c"]], [judged], [4])
    theirs = reference({"q": judged}, {"q": ["x", "a", "b", "y", "c"]}, 4)["q"]
    assert float(scores["recall"][0]) == pytest.approx(theirs["recall"], abs=TOLERANCE)
    assert float(scores["mrr"][0]) == pytest.approx(theirs["mrr"], abs=TOLERANCE)
    assert float(scores["ndcg"][0]) == pytest.approx(theirs["ndcg_cut"], abs=TOLERANCE)
