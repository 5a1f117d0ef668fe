"""The thresholds file (every problem at once) and the gate (spec section 4)."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import pytest
from evalkit import dumps

from assembler.evaluate.errors import EvaluateError
from assembler.evaluate.thresholds import Bound, Thresholds, evaluate_gate, load_thresholds


def write(tmp_path: Path, value: Any) -> str:
    path = tmp_path / "t.json"
    path.write_text(value if isinstance(value, str) else dumps(value), encoding="utf-8")
    return str(path)


def problems(tmp_path: Path, value: Any, case_ids: tuple[str, ...] = ("c1",)) -> str:
    path = write(tmp_path, value)
    with pytest.raises(EvaluateError) as caught:
        load_thresholds(path, case_ids)
    [line] = caught.value.lines
    assert line.startswith(f"{path}: ")
    return line[len(path) + 2 :]


def test_a_full_file_loads_and_hashes_its_raw_bytes(tmp_path: Path) -> None:
    text = (
        '{"taguru_evaluate_thresholds": 1, "aggregate": {"recall.ndcg": {"min": 0.5}},\n'
        ' "cases": {"default": {"diversity.sources": {"min": 2, "max": 9}},'
        ' "overrides": {"c1": {"recall.mrr": {"max": 1}}}}, "allow_unstable_corpus": true}'
    )
    path = write(tmp_path, text)
    loaded = load_thresholds(path, ["c1"])
    assert loaded.sha256 == hashlib.sha256(text.encode()).hexdigest()
    assert loaded.aggregate == {"recall.ndcg": Bound(0.5, None)}
    assert loaded.default == {"diversity.sources": Bound(2.0, 9.0)}
    assert loaded.overrides == {"c1": {"recall.mrr": Bound(None, 1.0)}}
    assert loaded.allow_unstable_corpus


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ({"taguru_evaluate_thresholds": 2}, "taguru_evaluate_thresholds must be 1, got 2"),
        ({"aggregate": {}}, "taguru_evaluate_thresholds must be 1, got nothing (the key is missing)"),
        ({"taguru_evaluate_thresholds": True}, "taguru_evaluate_thresholds must be 1, got true"),
        ("[1]", "must be a JSON object, got an array"),
        (
            '{"taguru_evaluate_thresholds": 1,',
            "invalid JSON at column 34: Expecting property name enclosed in double quotes; the line ends before the "
            "object is closed (cut short?)",
        ),
        (
            '{"taguru_evaluate_thresholds": 1, "aggregate": {"recall.ndcg": {"min": 1e400}}}',
            "aggregate.recall.ndcg.min: number out of range (beyond what an f64 holds)",
        ),
    ],
)
def test_errors_reported_alone(tmp_path: Path, value: Any, message: str) -> None:
    assert problems(tmp_path, value) == message


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (
            {"bogus": 1},
            "unknown field 'bogus' (known: taguru_evaluate_thresholds, aggregate, cases, allow_unstable_corpus)",
        ),
        ({"aggregate": {"recall.bogus": {"min": 1}}}, "aggregate: unknown metric name 'recall.bogus'"),
        ({"aggregate": []}, "aggregate: must be an object of metric bounds, got an array"),
        (
            {"cases": {"default": {"latency.resolve_ms": {"max": 1}}}},
            "cases.default: unknown (or not case-scoped) metric name 'latency.resolve_ms'",
        ),
        ({"cases": {"overrides": {"ghost": {}}}}, "cases.overrides: unknown case_id 'ghost'"),
        (
            {"cases": {"overrides": {"c1": {"budget.items_used": {"max": 1}}}}},
            "cases.overrides.c1: unknown (or not case-scoped) metric name 'budget.items_used'",
        ),
        ({"cases": {"defaults": {}}}, "cases: unknown field 'defaults' (known: default, overrides)"),
        ({"cases": 3}, "cases: must be an object with default and/or overrides, got a number"),
        ({"aggregate": {"recall.ndcg": {}}}, "aggregate: 'recall.ndcg': needs at least one of min/max"),
        ({"aggregate": {"recall.ndcg": {"min": None}}}, "aggregate: 'recall.ndcg': needs at least one of min/max"),
        (
            {"aggregate": {"recall.ndcg": {"min": 0.9, "max": 0.5}}},
            "aggregate: 'recall.ndcg': min 0.9 must be <= max 0.5",
        ),
        (
            {"aggregate": {"recall.ndcg": {"min": "0.5"}}},
            "aggregate: 'recall.ndcg': min must be a number, got a string",
        ),
        (
            {"aggregate": {"recall.ndcg": {"min": 0.5, "mean": 1}}},
            "aggregate: 'recall.ndcg': unknown field 'mean' (known: min, max)",
        ),
        ({"aggregate": {"recall.ndcg": 0.5}}, "aggregate: 'recall.ndcg': must be an object with min and/or max"),
        ({"allow_unstable_corpus": "yes"}, "allow_unstable_corpus: must be a boolean, got a string"),
    ],
)
def test_each_rule_and_its_message(tmp_path: Path, value: dict[str, Any], message: str) -> None:
    assert problems(tmp_path, {"taguru_evaluate_thresholds": 1, **value}).startswith(message)


def test_a_bound_too_large_for_a_float_is_a_problem_not_an_overflow_error(tmp_path: Path) -> None:
    """Found by the loader fuzz test: an integer bound of 400 digits raised OverflowError."""
    value = {"taguru_evaluate_thresholds": 1, "aggregate": {"recall.ndcg": {"max": 10**400}}}
    assert problems(tmp_path, value) == "aggregate: 'recall.ndcg': max: number out of range (beyond what an f64 holds)"


def test_every_problem_in_a_file_is_reported_together(tmp_path: Path) -> None:
    found = problems(
        tmp_path,
        {
            "taguru_evaluate_thresholds": 1,
            "extra": True,
            "aggregate": {"nope": {"min": 1}, "recall.mrr": {"min": 2, "max": 1}},
            "cases": {"default": {"passage.failure_rate": {"max": 0}}, "overrides": {"ghost": {}}},
        },
    )
    assert found.split("; ") == [
        "unknown field 'extra' (known: taguru_evaluate_thresholds, aggregate, cases, allow_unstable_corpus)",
        "aggregate: unknown metric name 'nope'",
        "aggregate: 'recall.mrr': min 2 must be <= max 1",
        "cases.default: unknown (or not case-scoped) metric name 'passage.failure_rate'",
        "cases.overrides: unknown case_id 'ghost'",
    ]


def test_an_unreadable_file(tmp_path: Path) -> None:
    with pytest.raises(EvaluateError) as caught:
        load_thresholds(str(tmp_path / "none.json"), [])
    assert caught.value.lines[0].startswith(f"cannot read {tmp_path / 'none.json'}: ")


# --- the gate --------------------------------------------------------------------------------------


def artifact(**metrics: Any) -> dict[str, Any]:
    return {
        "corpus": {"stable": True},
        "metrics": metrics,
        "cases": [
            {"case_id": "c1", "recall": {"recall_at_k": 0.5, "mrr": 1.0, "ndcg": 0.75}, "diversity_sources": 2},
            {"case_id": "c2", "diversity_sources": 4, "passage": {"latency_ms": None}},
        ],
    }


def gate(thresholds: Thresholds, report: dict[str, Any]) -> dict[str, Any]:
    return evaluate_gate(thresholds, report)


def test_a_distribution_is_gated_by_its_mean_and_a_ratio_by_its_value() -> None:
    thresholds = Thresholds("t", "ab" * 32, aggregate={"recall.ndcg": Bound(0.75), "lanes.both": Bound(0.75)})
    report = gate(
        thresholds, artifact(**{"recall.ndcg": {"n": 2, "mean": 0.75}, "lanes.both": {"value": 0.75, "n": 4}})
    )
    assert report == {"sha256": "ab" * 32, "passed": True, "allow_unstable_corpus": False}


def test_a_metric_with_no_samples_is_a_violation_with_its_absence_reason() -> None:
    thresholds = Thresholds("t", "0" * 64, aggregate={"citations.resolved": Bound(0.5)})
    value = {"value": None, "n": 0, "numerator": None, "absent": "needs a live server"}
    report = gate(thresholds, artifact(**{"citations.resolved": value}))
    assert not report["passed"]
    assert report["violations"] == [
        {
            "scope": "aggregate",
            "metric": "citations.resolved",
            "actual": None,
            "reason": "no samples for this metric (n=0): needs a live server",
        }
    ]


def test_bounds_min_then_max_and_equality_passes() -> None:
    thresholds = Thresholds(
        "t",
        "0" * 64,
        aggregate={"recall.mrr": Bound(0.9), "recall.ndcg": Bound(None, 0.5), "diversity.sources": Bound(2.0, 2.0)},
    )
    report = gate(
        thresholds,
        artifact(
            **{
                "recall.mrr": {"n": 1, "mean": 0.5},
                "recall.ndcg": {"n": 1, "mean": 0.75},
                "diversity.sources": {"n": 1, "mean": 2.0},
            }
        ),
    )
    assert [(v["metric"], v["bound"], v["threshold"], v["actual"], v["reason"]) for v in report["violations"]] == [
        ("recall.mrr", "min", 0.9, 0.5, "0.500000 < min 0.900000"),
        ("recall.ndcg", "max", 0.5, 0.75, "0.750000 > max 0.500000"),
    ]


def test_case_bounds_merge_overrides_and_skip_what_a_case_lacks() -> None:
    thresholds = Thresholds(
        "t",
        "0" * 64,
        default={"recall.recall_at_k": Bound(0.6), "diversity.sources": Bound(3.0)},
        overrides={"c2": {"diversity.sources": Bound(4.0)}},
    )
    report = gate(thresholds, artifact())
    assert [(v["scope"], v["case_id"], v["metric"]) for v in report["violations"]] == [
        ("case", "c1", "diversity.sources"),
        ("case", "c1", "recall.recall_at_k"),
    ]
    assert report["skipped"] == [
        "case 'c2': 'recall.recall_at_k' not applicable — the case did not declare the matching expectation, "
        "or its lane did not complete"
    ]


def test_a_null_baseline_latency_is_skipped_not_violated() -> None:
    thresholds = Thresholds("t", "0" * 64, default={"latency.passage_ms": Bound(None, 1.0)})
    report = gate(thresholds, artifact())
    assert report["passed"] and len(report["skipped"]) == 2


def test_an_unstable_corpus_violates_unless_allowed() -> None:
    unstable = {**artifact(), "corpus": {"stable": False}}
    report = gate(Thresholds("t", "0" * 64), unstable)
    assert report["violations"][0]["scope"] == "corpus" and "allow_unstable_corpus" in report["violations"][0]["reason"]
    assert gate(Thresholds("t", "0" * 64, allow_unstable_corpus=True), unstable)["passed"]
