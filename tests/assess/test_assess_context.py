"""Run contexts in: what is validated, the error for each broken rule, what is passed over."""

from __future__ import annotations

import json
from typing import Any

import pytest

from assembler.assess import RunRecordError, assess_run, parse_context
from assembler.errors import InputError, RecordError
from assembler.run.io import parse_json

SECRET = "SECRET-MARKER-u7-never-log-me"


def error_of(value: Any) -> RunRecordError:
    with pytest.raises(InputError) as caught:
        parse_context(value, file="runs.jsonl", line=7)
    error = caught.value.error
    assert isinstance(error, RunRecordError)
    return error


@pytest.mark.parametrize(
    ("record", "field", "rule"),
    [
        ([1, 2], "", "a run context must be a JSON object"),
        ("run", "", "a run context must be a JSON object"),
        ({}, "run_id", "is required but missing"),
        ({"run_id": None}, "run_id", "must not be null"),
        ({"run_id": 7}, "run_id", "must be a string, got the integer 7"),
        ({"run_id": "r", "raw_hits": "x"}, "raw_hits", "must be an array, got a string"),
        ({"run_id": "r", "raw_hits": {}}, "raw_hits", "must be an array, got an object"),
        ({"run_id": "r", "raw_hits": [{}, 5]}, "raw_hits[1]", "must be an object, got the integer 5"),
        (
            {"run_id": "r", "raw_hits": [{"citation_path": 36}]},
            "raw_hits[0].citation_path",
            "must be a string, got the integer 36",
        ),
        ({"run_id": "r", "raw_hits": [{"metadata": "m"}]}, "raw_hits[0].metadata", "must be an object, got a string"),
        (
            {"run_id": "r", "raw_hits": [{"metadata": {"citation_path": ["ст. 1"]}}]},
            "raw_hits[0].metadata.citation_path",
            "must be a string, got an array",
        ),
        (
            {"run_id": "r", "raw_hits": [{"rada_nreg": 322}]},
            "raw_hits[0].rada_nreg",
            "must be a string, got the integer 322",
        ),
        ({"run_id": "r", "retrieval_trace": []}, "retrieval_trace", "must be an object, got an array"),
        (
            {"run_id": "r", "retrieval_trace": {"hits": [None]}},
            "retrieval_trace.hits[0]",
            "must be an object, got null",
        ),
        (
            {"run_id": "r", "retrieval_trace": {"meta": {"coverage_gap": 1.5}}},
            "retrieval_trace.meta.coverage_gap",
            "must be a string, got the number 1.5",
        ),
        ({"run_id": "r", "memory_items": {"id": 1}}, "memory_items", "must be an array, got an object"),
        ({"run_id": "r", "memory_items": ["note"]}, "memory_items[0]", "must be an object, got a string"),
        ({"run_id": "r", "memory_summaries": [{}, True]}, "memory_summaries[1]", "must be an object, got a boolean"),
        ({"run_id": "r", "history": [{}, {}, 3]}, "history[2]", "must be an object, got the integer 3"),
        ({"run_id": "r", "doc_snippets": True}, "doc_snippets", "must be an array, got a boolean"),
        ({"run_id": "r", "query_profile": "law"}, "query_profile", "must be an object, got a string"),
        (
            {"run_id": "r", "query_profile": {"routing_flags": {"context_mode": 1}}},
            "query_profile.routing_flags.context_mode",
            "must be a string, got the integer 1",
        ),
        (
            {"run_id": "r", "query_profile": {"context_mode": ["mixed"]}},
            "query_profile.context_mode",
            "must be a string, got an array",
        ),
        (
            {"run_id": "r", "doclist_trace": {"reason_code": False}},
            "doclist_trace.reason_code",
            "must be a string, got a boolean",
        ),
        (
            {"run_id": "r", "doclist_trace": {"corpus_gap_status": {}}},
            "doclist_trace.corpus_gap_status",
            "must be a string, got an object",
        ),
        ({"run_id": "r", "clarification": "pending"}, "clarification", "must be an object, got a string"),
        (
            {"run_id": "r", "clarification": {"status": 0}},
            "clarification.status",
            "must be a string, got the integer 0",
        ),
        (
            {"run_id": "r", "raw_hits": [{"citation_path": "\ud800"}]},
            "raw_hits[0].citation_path",
            "is not valid Unicode (lone surrogate escape)",
        ),
    ],
)
def test_each_broken_rule_names_field_and_rule(record: Any, field: str, rule: str) -> None:
    error = error_of(record)
    assert (error.file, error.line, error.field, error.rule) == ("runs.jsonl", 7, field, rule)
    run_id = record.get("run_id") if isinstance(record, dict) else None
    assert error.query_id == (run_id if isinstance(run_id, str) else None)


def test_error_text_names_file_line_run_id_field_and_rule() -> None:
    error = error_of({"run_id": "r7", "raw_hits": [{"citation_path": 1}]})
    assert (
        str(error) == "runs.jsonl:7: run_id 'r7' field raw_hits[0].citation_path: must be a string, got the integer 1"
    )
    assert error.as_dict() == {
        "file": "runs.jsonl",
        "line": 7,
        "run_id": "r7",
        "field": "raw_hits[0].citation_path",
        "rule": "must be a string, got the integer 1",
    }
    assert str(error_of([])) == "runs.jsonl:7: a run context must be a JSON object"
    assert str(error_of({"run_id": 3})) == "runs.jsonl:7: field run_id: must be a string, got the integer 3"


def test_a_reader_error_is_relabelled_for_runs() -> None:
    plain = RecordError("in.jsonl", 2, None, "", "invalid JSON at column 1: Expecting value")
    relabelled = RunRecordError.of(plain)
    assert str(relabelled) == str(plain)
    assert relabelled.as_dict()["run_id"] is None and "query_id" not in relabelled.as_dict()
    assert RunRecordError.of(relabelled) is relabelled


def test_a_run_id_with_a_lone_surrogate_is_shown_escaped() -> None:
    error = error_of({"run_id": "r\udc80"})
    assert error.query_id == "r\\udc80"
    assert error.field == "run_id"


def test_a_repeated_known_key_is_refused_and_an_unknown_one_is_not() -> None:
    record = parse_json('{"run_id":"a","raw_hits":[],"raw_hits":[]}')
    assert (error_of(record).field, error_of(record).rule) == ("raw_hits", "duplicate field")
    record = parse_json('{"run_id":"a","x":1,"x":2,"raw_hits":[{"citation_path":"a","citation_path":"b"}]}')
    assert error_of(record).field == "raw_hits[0].citation_path"
    parse_context(parse_json('{"run_id":"a","x":1,"x":2}'))


def test_errors_never_carry_payload_text() -> None:
    records = [
        {"run_id": "r", "raw_hits": [{"citation_path": 1, "text": SECRET}], "history": [{"content": SECRET}]},
        {"run_id": "r", "memory_items": [SECRET]},
        {"run_id": "r", "doclist_trace": {"reason_code": [SECRET]}},
        {"run_id": "r", "clarification": SECRET},
    ]
    for record in records:
        error = error_of(record)
        assert SECRET not in str(error)
        assert SECRET not in json.dumps(error.as_dict())


def test_unknown_keys_and_unread_fields_are_passed_over() -> None:
    context = {
        "run_id": "r",
        "raw_hits": [
            {
                "r2_key": 5,  # declared string in RawHit, but U7 never reads it
                "score": "high",
                "citation_path": "ст. 1",
                "metadata": {"citation_path": None, "anything": [1, {}]},
                "article_number": 36,
            }
        ],
        "retrieval_trace": {"version": "one", "hits": None, "meta": {"low_confidence": True}},
        "memory_items": [{"content_preview": 1}],
        "memory_summaries": [{}],
        "history": [{"role": 1}],
        "doc_snippets": [{"score": "x"}],
        "query_profile": {"routing_flags": {"other": 1}},
        "doclist_trace": {"extra": []},
        "clarification": {},
        "future_field": {"nested": True},
    }
    result = assess_run(context)
    assert result["source_counts"] == {"law": 1, "memory": 2, "history": 1, "doc": 1}
    assert result["required_citation_refs"] == ["ст. 1"]


def test_parsed_run_keeps_what_u7_reads() -> None:
    run = parse_context(
        {
            "run_id": "r",
            "raw_hits": [{"citation_path": "a", "metadata": {"citation_path": "b"}, "rada_nreg": "n"}],
            "retrieval_trace": {"hits": [], "meta": {"coverage_gap": "weak_evidence"}},
            "query_profile": {"context_mode": "law", "routing_flags": {"context_mode": "mixed"}},
            "doclist_trace": {"corpus_gap_status": "s", "reason_code": "c"},
            "clarification": {"status": "pending"},
        },
        file="f",
        line=3,
    )
    assert run.raw_hits == [("a", "b", "n")]
    assert run.trace_hits == []
    assert (run.context_mode, run.context_mode_top) == ("mixed", "law")
    assert (run.corpus_gap_status, run.meta_coverage_gap, run.reason_code) == ("s", "weak_evidence", "c")
    assert (run.clarification_status, run.file, run.line) == ("pending", "f", 3)
