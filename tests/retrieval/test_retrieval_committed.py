"""The committed sets under data/eval: eval files valid, lane dumps joined, assembled, cited."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from assembler import assemble_batch
from assembler.contract.text import normalize_entry
from assembler.evaluate.errors import EvaluateError
from assembler.evaluate.loader import EvalSet, check_limits, load_eval

EVAL = Path(__file__).resolve().parents[2] / "data" / "eval"
SETS = sorted(p.name for p in EVAL.iterdir() if (p / "eval.jsonl").exists()) if EVAL.exists() else []


def check_eval_file(path: Path) -> EvalSet:
    """The harness's own checks of an eval file (sections 1.1-1.4), as `assembler evaluate` runs them."""
    evalset = load_eval(str(path))
    check_limits(evalset)
    return evalset


def _jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text("utf-8").splitlines() if line.strip()]


def test_every_set_is_present() -> None:
    assert set(SETS) >= {"brewery", "hotpotqa", "jsquad", "locomo"}
    for name in SETS:
        for file in ("eval.jsonl", "lanes.jsonl", "SOURCE.md", "sources.jsonl", "citations.jsonl"):
            assert (EVAL / name / file).is_file(), f"{name}/{file}"


@pytest.mark.parametrize("name", SETS)
def test_eval_file_follows_section_1_rules(name: str) -> None:
    cases = check_eval_file(EVAL / name / "eval.jsonl").cases
    assert all(case.expected_sources for case in cases)
    assert all(all(e.relevance >= 1 for e in case.expected_sources) for case in cases)
    assert len(cases) == len(_jsonl(EVAL / name / "eval.jsonl")) - 1


def test_the_check_catches_the_section_1_4_errors(tmp_path: Path) -> None:
    header = '{"taguru_eval":1}\n'
    bad = {
        "": "empty file",
        header: "no cases",
        '{"case_id":"a","query":"q"}\n': "not a valid eval header",
        '{"taguru_eval":2}\n{"case_id":"a","query":"q"}\n': "taguru_eval must be 1, got 2",
        header + '{"case_id":" ","query":"q"}\n': "case_id must not be empty",
        header + '{"case_id":"a","query":""}\n': "query must not be empty",
        header + '{"case_id":"a","query":"q"}\n{"case_id":"a","query":"q"}\n': "duplicate case_id 'a'",
        header + '{"case_id":"a","query":"q","options":{"sources":["x"]}}\n': "options",
        header + '{"case_id":"a","query":"q","expected_sources":[{"source":"s","relevance":4}]}\n': "relevance",
        header + '{"case_id":"a","query":"q","expected_sources":[{"source":""}]}\n': "source must not be empty",
        header
        + '{"case_id":"a","query":"q","expected_citations":[{"source":"s","paragraph":0,"quote":" "}]}\n': "quote",
        header + '{"case_id":"a","query":"q","options":{"limit":0}}\n': "options.limit must be 1..=1000",
    }
    for text, message in bad.items():
        path = tmp_path / "e.jsonl"
        path.write_text(text, encoding="utf-8")
        with pytest.raises(EvaluateError, match=message):
            check_eval_file(path)


@pytest.mark.parametrize("name", SETS)
def test_lane_dump_joins_the_eval_file_and_has_realistic_sizes(name: str) -> None:
    cases = _jsonl(EVAL / name / "eval.jsonl")[1:]
    records = _jsonl(EVAL / name / "lanes.jsonl")
    assert [r["query_id"] for r in records] == [c["case_id"] for c in cases]
    for case, record in zip(cases, records, strict=True):
        request, lanes = record["request"], record["lanes"]
        assert request["text_fallback_query"] == case["query"]
        assert request["origins"] == (case.get("cues") or [case["query"]])
        assert request["search_limit"] == 10
        assert lanes["graph_query"] is None
        assert len(lanes["passages"]) == 10
        assert lanes["graph_activate"] is None or len(lanes["graph_activate"]) <= 20
        assert lanes["communities"] is None or len(lanes["communities"]) <= 5
        assert bool(request.get("include_communities")) == (lanes["communities"] is not None)


@pytest.mark.parametrize("name", SETS)
def test_every_attribution_locator_has_its_citation(name: str) -> None:
    for record in _jsonl(EVAL / name / "lanes.jsonl"):
        lanes = record["lanes"]
        wanted = {
            (a["source"], a["paragraph"])
            for activation in lanes["graph_activate"] or []
            for a in activation["association"]["attributions"]
            if a["paragraph"] is not None
        }
        cited = [(c["source"], c["paragraph"]) for c in lanes["citations"]]
        assert cited == sorted(wanted), record["query_id"]
        for entry in lanes["citations"]:
            assert entry["citation"]["source"] == entry["source"]


@pytest.mark.parametrize("name", SETS)
def test_expected_locators_exist_in_the_corpus_snapshot(name: str) -> None:
    cases = _jsonl(EVAL / name / "eval.jsonl")[1:]
    contexts = {r["query_id"]: r["context"] for r in _jsonl(EVAL / name / "lanes.jsonl")}
    sources = {(s["context"], s["source"]): s["paragraphs"] for s in _jsonl(EVAL / name / "sources.jsonl")}
    citations = {
        (c["context"], c["source"], c["paragraph"]): c["citation"] for c in _jsonl(EVAL / name / "citations.jsonl")
    }
    for case in cases:
        context = contexts[case["case_id"]]
        for entry in case["expected_sources"]:
            count = sources[(context, entry["source"])]
            assert all(p < count for p in entry.get("paragraphs", []))
        for entry in case.get("expected_citations", []):
            citation = citations[(context, entry["source"], entry["paragraph"])]
            if "quote" in entry:
                assert normalize_entry(entry["quote"].strip()) in normalize_entry(citation["text"].strip())


@pytest.mark.parametrize("name", SETS)
def test_every_committed_lane_dump_assembles(name: str) -> None:
    records = _jsonl(EVAL / name / "lanes.jsonl")
    result = assemble_batch(records)
    assert len(result.packages) == len(records)
    tight = assemble_batch(records, overrides={"max_items": 5, "max_tokens": 1000})
    for text in tight.packages:
        package = json.loads(text)
        assert len(package["items"]) <= 5 and package["budget"]["tokens_used"] <= 1000
