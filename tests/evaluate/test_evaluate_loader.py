"""The eval file loader: every rule of spec section 1.4 with its message, file and line."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from evalkit import EVAL, dumps

from assembler.evaluate.errors import EvaluateError
from assembler.evaluate.loader import check_limits, load_eval, parse_eval_text

HEADER = '{"taguru_eval":1}'
CASE: dict[str, Any] = {"case_id": "c1", "query": "青嶺"}


def load(*lines: str, path: str = "e.jsonl") -> Any:
    return parse_eval_text("\n".join(lines) + "\n", path)


def error(*lines: str) -> str:
    with pytest.raises(EvaluateError) as caught:
        load(*lines)
    assert len(caught.value.lines) == 1
    return caught.value.lines[0]


def case_error(case: dict[str, Any] | str) -> str:
    return error(HEADER, case if isinstance(case, str) else dumps(case))


def test_a_well_formed_file_loads_its_name_and_cases() -> None:
    evalset = load('{"taguru_eval":1,"name":"set","default_target":{"any":1}}', dumps(CASE))
    assert evalset.name == "set"
    [case] = evalset.cases
    assert (case.case_id, case.query, case.limit, case.line) == ("c1", "青嶺", 10, 2)
    assert not case.declares_structural


def test_every_field_is_typed() -> None:
    full = {
        "case_id": "c",
        "query": "q",
        "cues": ["a"],
        "expected_sources": [{"source": "s.md", "paragraphs": [1, 2], "relevance": 0}, {"source": "t.md"}],
        "expected_concepts": ["x"],
        "expected_labels": ["l"],
        "expected_associations": [{"subject": "s", "label": "l", "object": "o"}],
        "expected_citations": [
            {"source": "s.md", "paragraph": 0},
            {"source": "s.md", "paragraph": 1, "section": None},
            {"source": "s.md", "paragraph": 2, "section": "由来", "quote": "引用"},
        ],
        "options": {"limit": 5, "floor": 0.4, "tags": ["蔵"], "since": 100, "until": 200},
    }
    case = load(HEADER, dumps(full)).cases[0]
    assert case.expected_sources[0].paragraphs == (1, 2) and case.expected_sources[0].relevance == 0
    assert case.expected_sources[1].relevance == 1 and case.evidence_sources == (case.expected_sources[1],)
    absent, null, named = case.expected_citations
    assert (absent.section_declared, null.section_declared, null.section, named.section) == (False, True, None, "由来")
    assert named.quote == "引用"
    options = case.options
    assert (options.limit, options.tags, options.since, options.until) == (5, ("蔵",), 100, 200)
    assert options.floor == pytest.approx(0.4)
    assert options.retrieval_filters() == ["floor", "tags", "since", "until"]
    assert case.declares_structural


def test_null_extension_fields_count_as_absent() -> None:
    case = {
        **CASE,
        "expected_labels": None,
        "expected_associations": None,
        "expected_citations": None,
        "options": {"limit": None, "floor": None, "tags": None, "since": None, "until": None},
    }
    loaded = load(HEADER, dumps(case)).cases[0]
    assert loaded.expected_labels == () and loaded.limit == 10 and loaded.options.retrieval_filters() == []


def test_blank_lines_are_skipped_anywhere_and_crlf_is_tolerated() -> None:
    evalset = parse_eval_text("\n  \n" + HEADER + "\r\n\n" + dumps(CASE) + "\r\n\t\n", "e.jsonl")
    assert evalset.cases[0].line == 5


@pytest.mark.parametrize(
    ("lines", "message"),
    [
        ((), "e.jsonl: empty file: expected a taguru_eval header line"),
        (("  ",), "e.jsonl: empty file: expected a taguru_eval header line"),
        ((HEADER,), "e.jsonl: no cases: expected at least one case line after the header"),
        (("{nope",), "e.jsonl: line 1: invalid JSON at column 2: "),
        (('{"taguru_eval":2}',), "e.jsonl: line 1: taguru_eval must be 1, got 2"),
        (('{"taguru_eval":"1"}',), "e.jsonl: line 1: not a valid eval header: taguru_eval: must be a non-negative"),
        (('{"name":"x"}',), "e.jsonl: line 1: not a valid eval header: taguru_eval: is required but missing"),
        ((dumps(CASE),), "e.jsonl: line 1: not a valid eval header: case_id: unknown field"),
        (('{"taguru_eval":1,"name":3}',), "e.jsonl: line 1: not a valid eval header: name: must be a string"),
    ],
)
def test_file_and_header_rules(lines: tuple[str, ...], message: str) -> None:
    with pytest.raises(EvaluateError) as caught:
        load(*lines)
    assert caught.value.lines[0].startswith(message)


@pytest.mark.parametrize(
    ("case", "message"),
    [
        ("[1,", "line 2: invalid JSON at column 4: "),
        ('{"case_id":"c","query":NaN}', "line 2: query: must be a finite number (NaN is not a JSON number)"),
        ('{"case_id":"c","query":"q","options":{"floor":1e400}}', "line 2: options.floor: number out of range"),
        ("[]", "line 2: not a valid eval case: : must be an object"),
        ({"query": "q"}, "line 2: not a valid eval case: case_id: is required but missing"),
        ({"case_id": "c"}, "line 2: not a valid eval case: query: is required but missing"),
        ({"case_id": 7, "query": "q"}, "line 2: not a valid eval case: case_id: must be a string"),
        ({**CASE, "querry": "typo"}, "line 2: not a valid eval case: querry: unknown field"),
        ({**CASE, "cues": "a"}, "line 2: not a valid eval case: cues: must be an array of strings"),
        ({**CASE, "cues": None}, "line 2: not a valid eval case: cues: must be an array of strings, got null"),
        ({**CASE, "expected_concepts": [1]}, "line 2: not a valid eval case: expected_concepts[0]: must be a string"),
        ({**CASE, "expected_sources": {}}, "line 2: not a valid eval case: expected_sources: must be an array"),
        (
            {**CASE, "expected_sources": [{"source": "a", "weight": 1}]},
            "line 2: not a valid eval case: expected_sources[0].weight: unknown field",
        ),
        (
            {**CASE, "expected_sources": [{"paragraphs": [0]}]},
            "line 2: not a valid eval case: expected_sources[0].source: is required but missing",
        ),
        (
            {**CASE, "expected_sources": [{"source": "a", "paragraphs": [-1]}]},
            "line 2: not a valid eval case: expected_sources[0].paragraphs[0]: must be an integer from 0 to 4294967295",
        ),
        (
            {**CASE, "expected_sources": [{"source": "a", "paragraphs": [2**32]}]},
            "line 2: not a valid eval case: expected_sources[0].paragraphs[0]: must be an integer from 0 to",
        ),
        (
            {**CASE, "expected_sources": [{"source": "a", "relevance": 256}]},
            "line 2: not a valid eval case: expected_sources[0].relevance: must be an integer from 0 to 255, got 256",
        ),
        (
            {**CASE, "expected_sources": [{"source": "a", "relevance": 1.5}]},
            "line 2: not a valid eval case: expected_sources[0].relevance: must be a non-negative integer",
        ),
        (
            {**CASE, "options": {"sources": ["a.md"]}},
            "line 2: not a valid eval case: options.sources: unknown field (options.sources is retired",
        ),
        ({**CASE, "options": {"limt": 3}}, "line 2: not a valid eval case: options.limt: unknown field"),
        ({**CASE, "options": {"limit": 2.0}}, "line 2: not a valid eval case: options.limit: must be a non-negative"),
        ({**CASE, "options": None}, "line 2: not a valid eval case: options: must be an object, got null"),
        ('{"case_id":"c","query":"q","query":"r"}', "line 2: query: duplicate field"),
        ({**CASE, "expected_labels": "l"}, "line 2: case 'c1': expected_labels: must be an array of strings"),
        ({**CASE, "expected_associations": 42}, "line 2: case 'c1': expected_associations: must be an array"),
        (
            {**CASE, "expected_associations": [{"subject": "s", "label": "l"}]},
            "line 2: case 'c1': expected_associations[0].object: is required but missing",
        ),
        (
            {**CASE, "expected_associations": [{"subject": "s", "label": "l", "object": "o", "w": 1}]},
            "line 2: case 'c1': expected_associations[0].w: unknown field",
        ),
        ({**CASE, "expected_citations": 42}, "line 2: case 'c1': expected_citations: must be an array"),
        (
            {**CASE, "expected_citations": [{"source": "s"}]},
            "line 2: case 'c1': expected_citations[0].paragraph: is required",
        ),
        (
            {**CASE, "expected_citations": [{"source": "s", "paragraph": 0, "section": 3}]},
            "line 2: case 'c1': expected_citations[0].section: must be a string",
        ),
        ({**CASE, "options": {"floor": "high"}}, "line 2: case 'c1': options.floor: must be a number"),
        ({**CASE, "options": {"tags": "蔵"}}, "line 2: case 'c1': options.tags: must be an array of strings"),
        ({**CASE, "options": {"since": -1}}, "line 2: case 'c1': options.since: must be an integer from 0"),
        ({**CASE, "options": {"until": "x"}}, "line 2: case 'c1': options.until: must be a non-negative integer"),
        ({"case_id": " \u3000", "query": "q"}, "line 2: case_id must not be empty"),
        ({"case_id": "c", "query": "\t"}, "line 2: case 'c': query must not be empty"),
        (
            {**CASE, "expected_sources": [{"source": " "}]},
            "line 2: case 'c1': expected_sources: source must not be empty (entry 0)",
        ),
        (
            {**CASE, "expected_sources": [{"source": "a", "relevance": 4}]},
            "line 2: case 'c1': expected_sources relevance must be 0..=3, got 4 (entry 0)",
        ),
        (
            {**CASE, "expected_labels": ["ok", " "]},
            "line 2: case 'c1': expected_labels: entries must not be empty (entry 1)",
        ),
        (
            {**CASE, "expected_associations": [{"subject": "s", "label": "", "object": "o"}]},
            "line 2: case 'c1': expected_associations: subject/label/object must not be empty (entry 0: label)",
        ),
        (
            {**CASE, "expected_citations": [{"source": "", "paragraph": 0}]},
            "line 2: case 'c1': expected_citations: source must not be empty (entry 0)",
        ),
        (
            {**CASE, "expected_citations": [{"source": "s", "paragraph": 0, "quote": " "}]},
            "line 2: case 'c1': expected_citations: quote must not be empty (entry 0)",
        ),
        ({**CASE, "options": {"floor": 1.5}}, "line 2: case 'c1': options.floor must be 0.0..=1.0, got 1.5"),
        ({**CASE, "options": {"floor": -0.25}}, "line 2: case 'c1': options.floor must be 0.0..=1.0, got -0.25"),
    ],
)
def test_case_rules(case: dict[str, Any] | str, message: str) -> None:
    assert case_error(case).startswith("e.jsonl: " + message)


def test_a_duplicate_case_id_names_the_second_line() -> None:
    assert error(HEADER, dumps(CASE), "", dumps(CASE)) == "e.jsonl: line 4: duplicate case_id 'c1'"


def test_case_ids_are_compared_as_raw_strings() -> None:
    assert len(load(HEADER, dumps(CASE), dumps({**CASE, "case_id": "c1 "})).cases) == 2


def test_the_first_problem_wins() -> None:
    message = error(HEADER, dumps({**CASE, "bogus": 1}), "{")
    assert message.startswith("e.jsonl: line 2: not a valid eval case: bogus")


@pytest.mark.parametrize("limit", [0, 1001])
def test_options_limit_is_checked_after_loading(limit: int) -> None:
    evalset = load(HEADER, dumps(CASE), dumps({"case_id": "c2", "query": "q", "options": {"limit": limit}}))
    with pytest.raises(EvaluateError) as caught:
        check_limits(evalset)
    assert caught.value.lines == [f"e.jsonl: line 3: case 'c2': options.limit must be 1..=1000, got {limit}"]


def test_limits_at_the_edges_pass() -> None:
    check_limits(
        load(
            HEADER,
            dumps({**CASE, "options": {"limit": 1}}),
            dumps({**CASE, "case_id": "c2", "options": {"limit": 1000}}),
        )
    )


def test_an_unreadable_file_is_named(tmp_path: Path) -> None:
    missing = tmp_path / "nope.jsonl"
    with pytest.raises(EvaluateError) as caught:
        load_eval(str(missing))
    assert caught.value.lines[0].startswith(f"cannot read {missing}: ")


def test_invalid_utf8_names_the_line(tmp_path: Path) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_bytes(HEADER.encode() + b'\n{"case_id":"c","query":"\xff"}\n')
    with pytest.raises(EvaluateError) as caught:
        load_eval(str(path))
    assert caught.value.lines[0].startswith(f"cannot read {path}: line 2: not valid UTF-8")


def test_the_committed_mini_set_loads() -> None:
    evalset = load_eval(str(EVAL))
    check_limits(evalset)
    assert evalset.name == "brewery-mini" and len(evalset.cases) == 11
