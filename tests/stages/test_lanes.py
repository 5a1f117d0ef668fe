"""Lane-dump record validation (parse_record): one test per broken rule, plus the accepted edge cases."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import pytest

from assembler.errors import InputError, RecordError
from assembler.pipeline import assemble
from assembler.stages.lanes import parse_record

if TYPE_CHECKING:
    from tests.conftest import RecordFactory, Rejector

SECRET = "SECRET-CANDIDATE-TEXT-7f3a"


def passage(source: str, paragraph: int, text: str, rank: int) -> dict[str, Any]:
    """A minimal valid PassageHit at BM25 rank ``rank``."""
    return {
        "source": source,
        "paragraph": paragraph,
        "score": 0.5,
        "text": text,
        "lanes": {"bm25": {"rank": rank, "score": 0.5}},
    }


def assert_error(error: RecordError, field: str, rule: str, query_id: str | None = "bad") -> None:
    assert error.query_id == query_id
    assert error.field == field
    assert rule in error.rule, error.rule


# --- record-level rules ----------------------------------------------------------------------------


def test_record_that_is_not_an_object_is_rejected(reject: Rejector) -> None:
    assert_error(reject("[1, 2]"), "", "must be a JSON object", query_id=None)


def test_missing_query_id_is_rejected_without_a_query_id(make_record: RecordFactory, reject: Rejector) -> None:
    record = make_record()
    del record["query_id"]
    assert_error(reject(record), "query_id", "is required", query_id=None)


def test_non_string_query_id_is_rejected_without_a_query_id(make_record: RecordFactory, reject: Rejector) -> None:
    record = make_record()
    record["query_id"] = 7
    assert_error(reject(record), "query_id", "must be a string", query_id=None)


def test_missing_context_is_rejected(make_record: RecordFactory, reject: Rejector) -> None:
    record = make_record("bad")
    del record["context"]
    assert_error(reject(record), "context", "is required")


def test_missing_lanes_is_rejected(make_record: RecordFactory, reject: Rejector) -> None:
    record = make_record("bad")
    del record["lanes"]
    assert_error(reject(record), "lanes", "is required")


def test_missing_request_is_rejected(make_record: RecordFactory, reject: Rejector) -> None:
    record = make_record("bad")
    del record["request"]
    assert_error(reject(record), "request", "is required")


def test_lanes_that_is_not_an_object_is_rejected(make_record: RecordFactory, reject: Rejector) -> None:
    record = make_record("bad")
    record["lanes"] = []
    assert_error(reject(record), "lanes", "must be an object")


# --- lane rules ------------------------------------------------------------------------------------


def test_unknown_lane_name_is_rejected(make_record: RecordFactory, reject: Rejector) -> None:
    record = make_record("bad")
    record["lanes"]["grpah_query"] = []
    assert_error(reject(record), "lanes.grpah_query", "unknown lane")


def test_lane_that_is_not_an_array_is_rejected(make_record: RecordFactory, reject: Rejector) -> None:
    record = make_record("bad")
    record["lanes"]["passages"] = {"source": "a.md"}
    assert_error(reject(record), "lanes.passages", "must be an array")


def test_passage_missing_text_is_rejected(make_record: RecordFactory, reject: Rejector) -> None:
    record = make_record("bad")
    del record["lanes"]["passages"][0]["text"]
    assert_error(reject(record), "lanes.passages[0].text", "is required but missing")


def test_string_score_is_rejected(make_record: RecordFactory, reject: Rejector) -> None:
    record = make_record("bad")
    record["lanes"]["passages"][0]["score"] = "0.5"
    assert_error(reject(record), "lanes.passages[0].score", "must be a number, got a string")


def test_fractional_paragraph_is_rejected(make_record: RecordFactory, reject: Rejector) -> None:
    record = make_record("bad")
    record["lanes"]["passages"][0]["paragraph"] = 1.5
    assert_error(reject(record), "lanes.passages[0].paragraph", "must be a non-negative integer, got the number 1.5")


def test_boolean_paragraph_is_rejected(make_record: RecordFactory, reject: Rejector) -> None:
    record = make_record("bad")
    record["lanes"]["passages"][0]["paragraph"] = True
    assert_error(reject(record), "lanes.passages[0].paragraph", "got a boolean")


def test_paragraph_past_u32_is_rejected(make_record: RecordFactory, reject: Rejector) -> None:
    record = make_record("bad")
    record["lanes"]["passages"][0]["paragraph"] = 2**32
    assert_error(reject(record), "lanes.passages[0].paragraph", "from 0 to 4294967295")


def test_negative_attribution_paragraph_is_rejected(make_record: RecordFactory, reject: Rejector) -> None:
    record = make_record("bad")
    record["lanes"]["graph_query"][0]["attributions"][0]["paragraph"] = -1
    assert_error(reject(record), "lanes.graph_query[0].attributions[0].paragraph", "got -1")


def test_null_association_weight_is_rejected(make_record: RecordFactory, reject: Rejector) -> None:
    record = make_record("bad")
    record["lanes"]["graph_query"][0]["weight"] = None
    assert_error(reject(record), "lanes.graph_query[0].weight", "must not be null")


def test_lone_surrogate_in_passage_text_is_not_valid_unicode(make_record: RecordFactory, reject: Rejector) -> None:
    record = make_record("bad")
    record["lanes"]["passages"][0]["text"] = "PLACEHOLDER"
    line = json.dumps(record, ensure_ascii=False).replace("PLACEHOLDER", "ok \\ud800 ok")
    assert "\\ud800" in line
    assert_error(reject(line), "lanes.passages[0].text", "not valid Unicode")


def test_lone_surrogate_in_query_id_is_not_valid_unicode(make_record: RecordFactory, reject: Rejector) -> None:
    line = json.dumps(make_record("PLACEHOLDER"), ensure_ascii=False).replace("PLACEHOLDER", "\\udc00")
    error = reject(line)
    assert error.field == "query_id"
    assert "not valid Unicode" in error.rule


def test_unknown_plan_lane_is_rejected(make_record: RecordFactory, reject: Rejector) -> None:
    record = make_record("bad")
    record["plan_lanes"] = {"passages": {"ran": True}, "rerank": {"ran": False}}
    assert_error(reject(record), "plan_lanes.rerank", "unknown lane")


def test_plan_lane_without_ran_is_rejected(make_record: RecordFactory, reject: Rejector) -> None:
    record = make_record("bad")
    record["plan_lanes"] = {"passages": {"reason": "x"}}
    assert_error(reject(record), "plan_lanes.passages.ran", "is required")


def test_error_never_carries_candidate_text(make_record: RecordFactory, reject: Rejector) -> None:
    record = make_record("bad")
    record["lanes"]["passages"][0]["text"] = SECRET
    record["lanes"]["passages"][0]["score"] = SECRET
    error = reject(record)
    assert error.field == "lanes.passages[0].score"
    assert SECRET not in str(error)
    assert SECRET not in json.dumps(error.as_dict())


# --- accepted edge cases ---------------------------------------------------------------------------


def test_null_and_absent_lanes_contribute_nothing(make_record: RecordFactory) -> None:
    record = make_record()
    record["lanes"] = {"passages": None}
    parsed = parse_record(record)
    assert parsed.lanes == dict.fromkeys(("graph_query", "graph_activate", "passages", "communities", "citations"))


def test_unknown_keys_never_reach_the_package(make_record: RecordFactory) -> None:
    plain = make_record()
    noisy = make_record()
    noisy["extra_top"] = {"x": 1}
    noisy["request"]["extra_request"] = [1, 2]
    noisy["lanes"]["passages"][0]["extra_passage"] = "ZZ-UNKNOWN-1"
    noisy["lanes"]["passages"][0]["lanes"]["bm25"]["extra_evidence"] = 3
    noisy["lanes"]["graph_query"][0]["extra_assoc"] = "ZZ-UNKNOWN-2"
    noisy["lanes"]["graph_query"][0]["attributions"][0]["extra_attr"] = True
    noisy["lanes"]["citations"][0]["citation"]["extra_citation"] = None
    expected = assemble(plain)
    assert assemble(noisy) == expected
    assert "ZZ-UNKNOWN" not in expected
    assert '"passage":{"source":"kura.md"' in expected  # the passage made it into the package


def test_integer_weight_is_written_as_float(make_record: RecordFactory) -> None:
    record = make_record()
    record["lanes"]["graph_query"][0]["weight"] = 1
    record["lanes"]["graph_query"][0]["attributions"][0]["weight"] = 2
    package = assemble(record)
    assert '"weight":1.0,"count":1,"attributions":[{"source":"kura.md","weight":2.0,' in package


def test_fields_are_reemitted_in_contract_order(make_record: RecordFactory) -> None:
    record = make_record()
    hit = record["lanes"]["passages"][0]
    record["lanes"]["passages"][0] = {key: hit[key] for key in reversed(list(hit))}
    package = assemble(record)
    assert '"passage":{"source":"kura.md","paragraph":0,"score":0.86304635,"text":' in package


def test_passages_past_search_limit_are_cut(make_record: RecordFactory) -> None:
    record = make_record()
    record["request"]["search_limit"] = 5
    record["lanes"]["passages"] = [passage(f"p{i}.md", i, f"distinct text number {i}", i + 1) for i in range(7)]
    parsed = parse_record(record)
    passages = parsed.lanes["passages"]
    assert passages is not None
    assert [hit["source"] for hit in passages] == [f"p{i}.md" for i in range(5)]
    assert parsed.search_limit_cuts == 2
    package = json.loads(assemble(record))
    seen = [entry["candidate_id"] for entry in package["items"] + package["omitted"] if entry["kind"] == "passage"]
    assert sorted(seen) == [f"passage\x00ctx\x00p{i}.md\x00{i}" for i in range(5)]


def test_communities_past_search_limit_are_cut(make_record: RecordFactory) -> None:
    record = make_record()
    record["request"].update(search_limit=1, include_communities=True)
    record["lanes"]["passages"] = []
    record["lanes"]["communities"] = [
        {"community": f"L0-{i}", "score": 0.5, "text": f"community {i}", "paragraph": 0} for i in range(3)
    ]
    parsed = parse_record(record)
    assert parsed.lanes["communities"] is not None
    assert len(parsed.lanes["communities"]) == 1
    assert parsed.search_limit_cuts == 2


def test_overrides_reach_the_resolved_limits(make_record: RecordFactory) -> None:
    record = make_record()
    record["request"]["budget"] = {"max_items": 3}
    assert parse_record(record, overrides={"max_items": 1}).limits.max_items == 1
    assert parse_record(record).limits.max_items == 3


def test_parse_record_error_names_the_given_file_and_line(make_record: RecordFactory) -> None:
    record = make_record("bad")
    record["lanes"]["passages"][0]["score"] = "x"
    with pytest.raises(InputError) as caught:
        parse_record(record, file="dump.jsonl", line=17)
    error = caught.value.error
    assert error == RecordError("dump.jsonl", 17, "bad", "lanes.passages[0].score", error.rule)
    assert str(error).startswith("dump.jsonl:17: query_id 'bad' field lanes.passages[0].score: must be a number")
