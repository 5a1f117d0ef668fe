"""``evaluate compare``: classification, aggregate deltas, mismatch warnings (spec section 5)."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from evalkit import dumps

from assembler.evaluate.compare import Report, compare_reports, load_report
from assembler.evaluate.errors import EvaluateError

BUDGET = {"max_items": 5, "max_bytes": 65536, "max_tokens": 1500}


def report(
    cases: list[dict[str, Any]] | None = None,
    *,
    budget: Any = BUDGET,
    mode: str = "baseline",
    **top: Any,
) -> dict[str, Any]:
    inputs: dict[str, Any] = {"context": "ctx", "mode": mode}
    if budget is not None:
        inputs["budget"] = budget
    if mode == "assembly":
        inputs["policy"] = "contract"
    value: dict[str, Any] = {
        "taguru_evaluation": 1,
        "generated_at": "2025-01-01T00:00:00Z",
        "inputs": inputs,
        "corpus": {"revision_after": {"lanes_sha256": "x"}, "stable": True},
        "thresholds": None,
        "definitions": {
            "recall.ndcg": {"statistic": "distribution"},
            "lanes.both": {"statistic": "ratio"},
        },
        "metrics": {"recall.ndcg": {"n": 1, "mean": 0.5}, "lanes.both": {"value": 0.25, "n": 4, "numerator": 1}},
        "cases": cases if cases is not None else [{"case_id": "c1", "recall": {"ndcg": 0.5}}],
    }
    value.update(top)
    return value


def compare(base: dict[str, Any], head: dict[str, Any]) -> Any:
    return compare_reports(Report("BASE", "base.json", base), Report("HEAD", "head.json", head))


def case(case_id: str, **values: Any) -> dict[str, Any]:
    block: dict[str, Any] = {"case_id": case_id}
    recall = {key: values.pop(key) for key in ("recall_at_k", "mrr", "ndcg") if key in values}
    if recall:
        block["recall"] = recall
    if "diversity" in values:
        block["diversity_sources"] = values.pop("diversity")
    if "citations" in values:
        block["citations"] = {"recall": {"value": values.pop("citations")}}
    assert not values
    return block


def test_an_increase_is_improved_and_a_decrease_regressed() -> None:
    result = compare(
        report([case("a", ndcg=0.5), case("b", ndcg=0.5)]), report([case("a", ndcg=0.8), case("b", ndcg=0.2)])
    )
    assert [(r["kind"], r["case_id"]) for r in result.records] == [("improved", "a"), ("regressed", "b")]
    improved = result.records[0]["metrics"][0]
    assert improved["metric"] == "recall.ndcg" and improved["delta"] == pytest.approx(0.3)
    assert improved["sides"] == {"base": 0.5, "head": 0.8} and improved["direction"] == "improved"
    assert result.warnings == []


def test_a_mixed_case_is_regressed_and_lists_both_directions() -> None:
    result = compare(report([case("a", ndcg=0.5, diversity=2)]), report([case("a", ndcg=0.4, diversity=3)]))
    [record] = result.records
    assert record["kind"] == "regressed"
    assert [(m["metric"], m["direction"]) for m in record["metrics"]] == [
        ("recall.ndcg", "regressed"),
        ("diversity.sources", "improved"),
    ]


def test_identical_and_sub_epsilon_changes_are_unchanged_and_write_no_record() -> None:
    result = compare(report([case("a", ndcg=0.5)]), report([case("a", ndcg=0.5 + 1e-12)]))
    assert result.records == [] and result.counts["unchanged"] == 1


def test_a_value_on_one_side_only_warns_and_is_excluded() -> None:
    result = compare(report([case("a", ndcg=0.5, citations=1.0)]), report([case("a", ndcg=0.5)]))
    assert result.warnings == [
        "case 'a': metric 'citations.recall' has a value on only one side — excluded from classification"
    ]
    assert result.counts["unchanged"] == 1


def test_added_and_removed_cases_list_their_metrics_as_not_comparable() -> None:
    result = compare(report([case("gone", mrr=1.0)]), report([case("new", recall_at_k=1.0, mrr=0.5, ndcg=0.5)]))
    removed, added = result.records  # sorted case ids: "gone" < "new"
    assert (added["kind"], removed["kind"]) == ("added", "removed")
    assert [m["metric"] for m in added["metrics"]] == ["recall.recall_at_k", "recall.mrr", "recall.ndcg"]
    assert all(m["direction"] == "not_comparable" and m["delta"] is None for m in added["metrics"])
    assert added["metrics"][0]["sides"] == {"base": None, "head": 1.0}
    assert removed["metrics"] == [
        {"metric": "recall.mrr", "sides": {"base": 1.0, "head": None}, "delta": None, "direction": "not_comparable"}
    ]
    assert result.counts == {
        "improved": 0,
        "regressed": 0,
        "added": 1,
        "removed": 1,
        "unchanged": 0,
        "cases_base": 1,
        "cases_head": 1,
    }


def test_a_duplicate_case_id_keeps_the_last_occurrence_and_warns() -> None:
    result = compare(report([case("a", ndcg=0.1), case("a", ndcg=0.9)]), report([case("a", ndcg=0.9)]))
    assert result.counts["unchanged"] == 1
    assert result.warnings == ["BASE: duplicate case_id 'a' — using the last occurrence"]


def test_cases_are_visited_in_byte_order() -> None:
    result = compare(report([]), report([case("b", mrr=1.0), case("B", mrr=1.0), case("á", mrr=1.0)]))
    assert [r["case_id"] for r in result.records] == ["B", "b", "á"]


def test_aggregate_delta_reads_each_side_by_its_statistic() -> None:
    base = report()
    head = report()
    head["metrics"] = {"recall.ndcg": {"n": 1, "mean": 0.7}, "lanes.both": {"value": 0.0968, "n": 31, "numerator": 3}}
    result = compare(base, head)
    by_metric = {entry["metric"]: entry for entry in result.aggregate}
    assert by_metric["recall.ndcg"]["delta"] == pytest.approx(0.2)
    assert by_metric["lanes.both"]["sides"] == {"base": 0.25, "head": 0.0968}
    assert by_metric["lanes.both"]["statistic"] == "ratio"


def test_aggregate_warnings_for_missing_or_unknown_definitions_and_dropped_nulls() -> None:
    base = report()
    base["metrics"]["x.undefined"] = {"n": 1, "mean": 1.0}
    base["metrics"]["y.weird"] = {"n": 1, "mean": 1.0}
    base["definitions"]["y.weird"] = {"statistic": "histogram"}
    base["metrics"]["recall.ndcg"] = {"n": 0, "mean": None}
    head = report()
    head["metrics"]["recall.ndcg"] = {"n": 0, "mean": None}
    result = compare(base, head)
    assert "BASE: metric 'x.undefined' has no definitions entry — skipped from the aggregate diff" in result.warnings
    assert "BASE: metric 'y.weird' definitions names unknown statistic 'histogram'" in result.warnings
    assert [entry["metric"] for entry in result.aggregate] == ["lanes.both"]  # null on both sides: dropped


def test_budget_mismatch_warns_including_one_side_without_a_budget() -> None:
    warned = compare(report(budget=None), report(budget=BUDGET, mode="assembly")).warnings
    assert warned == [
        "budget differs: BASE none (untruncated baseline) vs HEAD max_items=5 max_bytes=65536 max_tokens=1500 — "
        "not an equal-budget comparison"
    ]
    other = {**BUDGET, "max_tokens": 4000}
    assert (
        compare(report(budget=BUDGET), report(budget=other))
        .warnings[0]
        .startswith(
            "budget differs: BASE max_items=5 max_bytes=65536 max_tokens=1500 vs HEAD max_items=5 max_bytes=65536 "
            "max_tokens=4000"
        )
    )


def test_baseline_against_assembly_at_the_same_budget_does_not_warn() -> None:
    result = compare(report(), report(mode="assembly"))
    assert result.warnings == []
    summary = result.summary("changes.jsonl")
    assert "BASE: base.json: mode baseline, policy -, budget max_items=5 max_bytes=65536 max_tokens=1500" in summary
    assert (
        "HEAD: head.json: mode assembly, policy contract, budget max_items=5 max_bytes=65536 max_tokens=1500" in summary
    )


def test_the_mismatch_warnings_in_order() -> None:
    head = report(
        budget=None,
        taguru_evaluation=2,
        corpus={"revision_after": {"lanes_sha256": "y"}, "stable": False},
        thresholds={"sha256": "abcdef0123456789" * 4},
    )
    head["inputs"]["context"] = "other"
    warnings = compare(report(), head).warnings
    assert warnings == [
        "context differs: BASE 'ctx' vs HEAD 'other'",
        "corpus.revision_after differs between BASE and HEAD",
        "head.json: corpus.stable is false — a write landed mid-run",
        "thresholds file identity differs: BASE none vs HEAD abcdef012345",
        "taguru_evaluation stamp differs: BASE 1 vs HEAD 2",
        "budget differs: BASE max_items=5 max_bytes=65536 max_tokens=1500 vs HEAD none (untruncated baseline) — "
        "not an equal-budget comparison",
    ]


def test_an_aggregate_without_a_value_on_one_side_is_explained_once() -> None:
    head = report(mode="assembly")
    head["definitions"]["latency.evidence_ms"] = {"statistic": "distribution"}
    head["metrics"]["latency.evidence_ms"] = {"n": 1, "mean": 2.5}
    summary = compare(report(), head).summary(None)
    assert "  latency.evidence_ms: n/a -> 2.500" in summary
    legend = "  n/a: no value on that side: the metric is absent there (metrics.NAME.absent says why) or unreadable"
    assert summary.count(legend) == 1 and summary[summary.index(legend) - 1].startswith("  recall.ndcg: ")
    assert legend not in compare(report(), report()).summary(None)


def test_changes_lines_are_json_header_first_and_carry_no_text() -> None:
    base = report([case("a", ndcg=0.5), case("b", mrr=1.0)])
    head = report([case("a", ndcg=0.9), case("b", mrr=1.0)], budget=None)
    lines = compare(base, head).lines()
    parsed = [json.loads(line) for line in lines]
    header = parsed[0]
    assert header["kind"] == "header" and header["taguru_evaluation_changes"] == 1
    assert header["counts"]["improved"] == 1 and header["counts"]["unchanged"] == 1
    assert header["base"]["budget"] == BUDGET and header["head"]["budget"] is None
    assert header["warnings"][0].startswith("budget differs")
    assert [p["kind"] for p in parsed[1:]] == ["improved"]
    for forbidden in ('"text"', '"quote"', '"section"', '"hits"'):
        assert all(forbidden not in line for line in lines)


NOT_AN_ARTIFACT = "BASE {path} is not an evaluation artifact (the JSON object 'assembler evaluate --out' writes): "


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "BASE reading {path}: "),
        ("{", "BASE {path}: malformed evaluation.json: "),
        (
            {"taguru_evaluation": 2},
            "BASE {path}: field taguru_evaluation is 2: this assembler reads evaluation artifacts of version 1 only",
        ),
    ],
)
def test_load_errors(tmp_path: Path, content: Any, message: str) -> None:
    path = tmp_path / "base.json"
    if content is not None:
        path.write_text(content if isinstance(content, str) else dumps(content), encoding="utf-8")
    with pytest.raises(EvaluateError) as caught:
        load_report(str(path), "BASE")
    assert caught.value.lines[0].startswith(message.format(path=path))


@pytest.mark.parametrize(
    ("content", "why"),
    [
        ("[]", "the top level is an array"),
        ({}, "it has no field taguru_evaluation"),
        ({"taguru_evaluation": "1"}, 'field taguru_evaluation must be the integer 1, got a string ("1")'),
        ({"taguru_evaluation": True}, "field taguru_evaluation must be the integer 1, got a boolean (true)"),
        (
            {"assembler_policy_config": 1, "policy": {}},
            "it has no field taguru_evaluation (it is a policy config, as 'evaluate tune' writes)",
        ),
        (
            {"taguru_evaluation_sweep": 1},
            "it has no field taguru_evaluation (it is a sweep table; its folder's runs/ holds the artifacts)",
        ),
        (
            '{"kind":"header","taguru_evaluation_changes":1}\n{"kind":"improved"}\n',
            "it is JSON Lines (one object per line)",
        ),
    ],
)
def test_a_file_that_is_not_an_artifact_is_named_as_such_with_what_is_wrong(
    tmp_path: Path, content: Any, why: str
) -> None:
    path = tmp_path / "base.json"
    path.write_text(content if isinstance(content, str) else dumps(content), encoding="utf-8")
    with pytest.raises(EvaluateError) as caught:
        load_report(str(path), "BASE")
    assert caught.value.lines == [NOT_AN_ARTIFACT.format(path=path) + why]


def test_a_well_formed_report_loads_tolerantly(tmp_path: Path) -> None:
    path = tmp_path / "r.json"
    path.write_text(dumps({"taguru_evaluation": 1}), encoding="utf-8")
    loaded = load_report(str(path), "HEAD")
    result = compare_reports(loaded, copy.deepcopy(loaded))
    assert result.records == [] and result.aggregate == [] and result.counts["cases_base"] == 0


def test_a_metric_integer_past_a_float_is_not_applicable_not_an_overflow() -> None:
    """A hand-edited artifact may hold an integer no float holds (json reads any length): compare
    treats it as no value, as it treats a string, instead of an OverflowError traceback."""
    huge = 10**400
    base = report([case("a", ndcg=huge)])
    base["metrics"]["recall.ndcg"]["mean"] = huge
    result = compare(base, report([case("a", ndcg=0.5)]))
    ndcg = next(row for row in result.aggregate if row["metric"] == "recall.ndcg")
    assert ndcg["sides"] == {"base": None, "head": 0.5} and ndcg["delta"] is None
    as_text = report([case("a", ndcg="x")])
    as_text["metrics"]["recall.ndcg"]["mean"] = "x"
    assert compare(as_text, report([case("a", ndcg=0.5)])).records == result.records
