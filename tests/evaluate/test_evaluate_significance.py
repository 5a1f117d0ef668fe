"""Paired significance (``assembler/evaluate/significance.py``) against SciPy, and in ``compare``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from evalkit import dumps

from assembler.cli import main
from assembler.evaluate.compare import Report, compare_reports
from assembler.evaluate.significance import bootstrap_interval, holm, paired_test, sign_flip_p

stats = pytest.importorskip("scipy.stats")


def scipy_p(base: np.ndarray, head: np.ndarray, resamples: int, seed: int) -> float:
    def statistic(x: np.ndarray, y: np.ndarray, axis: int) -> np.ndarray:
        return np.mean(x - y, axis=axis)

    result = stats.permutation_test(
        (head, base),
        statistic,
        permutation_type="samples",
        vectorized=True,
        n_resamples=resamples,
        alternative="two-sided",
        rng=np.random.default_rng(seed),
    )
    return float(result.pvalue)


@pytest.mark.parametrize("seed", range(5))
def test_the_exact_sign_flip_test_equals_scipys_paired_permutation_test(seed: int) -> None:
    rng = np.random.default_rng(seed)
    base = rng.integers(0, 2, size=11).astype(np.float64)
    head = np.clip(base + rng.choice([-1.0, 0.0, 1.0], size=11, p=[0.2, 0.4, 0.4]), 0, 1)
    mine = sign_flip_p(head - base, 4096, np.random.default_rng(99))  # 2**11 <= 4096: every sign vector
    assert mine == pytest.approx(scipy_p(base, head, 4096, 0), abs=1e-12)


def test_the_randomized_sign_flip_test_agrees_with_scipy_within_resampling_error() -> None:
    rng = np.random.default_rng(7)
    base = rng.random(60)
    head = base + rng.normal(0.05, 0.2, size=60)
    mine = sign_flip_p(head - base, 20_000, np.random.default_rng(1))
    theirs = scipy_p(base, head, 20_000, 2)
    assert 0.001 < theirs < 0.5  # a p-value that resampling error could move
    assert mine == pytest.approx(theirs, abs=0.01)  # 3 standard errors of a p near 0.1 at 20,000 draws


def test_the_bootstrap_interval_agrees_with_scipys_percentile_bootstrap() -> None:
    rng = np.random.default_rng(3)
    diffs = rng.normal(0.1, 0.3, size=80)
    low, high = bootstrap_interval(diffs, 20_000, np.random.default_rng(0))
    ref = stats.bootstrap((diffs,), np.mean, n_resamples=20_000, method="percentile", rng=np.random.default_rng(1))
    assert low == pytest.approx(ref.confidence_interval.low, abs=0.01)
    assert high == pytest.approx(ref.confidence_interval.high, abs=0.01)
    assert low < diffs.mean() < high


def test_no_difference_gives_p_one_and_a_zero_interval() -> None:
    result = paired_test(np.ones(30), np.ones(30), 1000, np.random.default_rng(0))
    assert result is not None and result.p_value == 1.0 and (result.low, result.high) == (0.0, 0.0)
    assert paired_test(np.array([np.nan]), np.array([1.0]), 1000, np.random.default_rng(0)) is None


def test_holm_steps_down_and_keeps_the_order() -> None:
    assert holm([0.04, 0.001, 0.03, 0.5]) == pytest.approx([0.09, 0.004, 0.09, 0.5])
    assert holm([]) == []
    assert holm([0.9, 0.8]) == [1.0, 1.0]  # capped at 1


def test_the_same_seed_gives_the_same_numbers() -> None:
    diffs = np.random.default_rng(0).normal(size=200)
    first = paired_test(np.zeros(200), diffs, 2000, np.random.default_rng(5))
    second = paired_test(np.zeros(200), diffs, 2000, np.random.default_rng(5))
    assert first == second


# --- in compare -----------------------------------------------------------------------------------


def artifact(ndcg: list[float], mrr: list[float], answers: list[int] | None = None) -> dict[str, Any]:
    cases = []
    for i, (n, m) in enumerate(zip(ndcg, mrr, strict=True)):
        block: dict[str, Any] = {"case_id": f"c{i:02d}", "recall": {"ndcg": n, "mrr": m}}
        if answers is not None:
            block["answer_in_context"] = answers[i]
        cases.append(block)
    value: dict[str, Any] = {
        "taguru_evaluation": 1,
        "inputs": {"context": "ctx", "mode": "baseline", "budget": {"max_items": 5}},
        "definitions": {"recall.ndcg": {"statistic": "distribution"}},
        "metrics": {"recall.ndcg": {"n": len(ndcg), "mean": sum(ndcg) / len(ndcg)}},
        "cases": cases,
    }
    if answers is not None:
        value["answers"] = {"metrics": {"answers.in_context": {"n": len(answers), "mean": sum(answers) / len(answers)}}}
    return value


def by_metric(result: Any) -> dict[str, dict[str, Any]]:
    return {test["metric"]: test for test in result.significance["tests"]}


def test_compare_marks_only_the_differences_that_survive_holm() -> None:
    rng = np.random.default_rng(0)
    base_ndcg = list(rng.uniform(0.2, 0.6, size=40))
    mrr = list(rng.uniform(0, 1, size=40))
    head_ndcg = [v + 0.2 for v in base_ndcg]  # every case better
    head_mrr = [v + (0.01 if i % 2 else -0.01) for i, v in enumerate(mrr)]  # noise
    answers = [1] * 20 + [0] * 20
    base = Report("BASE", "b.json", artifact(base_ndcg, mrr, answers))
    head = Report("HEAD", "h.json", artifact(head_ndcg, head_mrr, [*answers[:19], 0, 1, *answers[21:]]))
    result = compare_reports(base, head, resamples=2000, seed=1)
    found = by_metric(result)
    assert set(found) == {"recall.ndcg", "recall.mrr", "answers.in_context"}
    assert found["recall.ndcg"]["significant"] and found["recall.ndcg"]["difference"] == pytest.approx(0.2)
    assert found["recall.ndcg"]["p_holm"] == pytest.approx(3 * 2 / 2001)  # the smallest two-sided randomized p, times 3
    assert not found["recall.mrr"]["significant"] and not found["answers.in_context"]["significant"]
    assert found["answers.in_context"]["difference"] == 0.0 and found["answers.in_context"]["cases"] == 40
    low, high = found["recall.ndcg"]["interval"]
    assert low == pytest.approx(0.2) and high == pytest.approx(0.2)
    assert result.significance["budget"] == {"base": {"max_items": 5}, "head": {"max_items": 5}}
    summary = "\n".join(result.summary("changes.jsonl"))
    assert "recall.ndcg: +0.2000 [+0.2000, +0.2000] over 40 cases," in summary and "*" in summary
    header = json.loads(result.lines()[0])
    assert header["significance"]["tests"] == result.significance["tests"]
    aggregate = {entry["metric"]: entry for entry in result.aggregate}
    assert aggregate["answers.in_context"]["sides"] == {"base": 0.5, "head": 0.5}


def test_answers_on_one_side_only_warn_once_and_are_not_tested() -> None:
    base = Report("BASE", "b.json", artifact([0.5] * 5, [1.0] * 5))
    head = Report("HEAD", "h.json", artifact([0.5] * 5, [1.0] * 5, [1] * 5))
    result = compare_reports(base, head, resamples=200)
    assert "answers.in_context" not in by_metric(result)
    assert [w for w in result.warnings if "answers" in w] == [
        "answers.in_context: only HEAD has an answers block (--answers) — not compared case by case"
    ]
    assert result.counts["unchanged"] == 5


def test_compare_flags_seed_and_resamples(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rng = np.random.default_rng(2)
    values = list(rng.uniform(size=25))
    base, head = tmp_path / "b.json", tmp_path / "h.json"
    base.write_text(dumps(artifact(values, values)), encoding="utf-8")
    head.write_text(dumps(artifact([v + rng.normal(0, 0.1) for v in values], values)), encoding="utf-8")
    outs = []
    for name in ("a", "b"):
        out = tmp_path / f"{name}.jsonl"
        assert (
            main(["evaluate", "compare", str(base), str(head), "--seed", "4", "--resamples", "500", "--out", str(out)])
            == 0
        )
        header = json.loads(out.read_text(encoding="utf-8").splitlines()[0])
        assert header["significance"]["seed"] == 4 and header["significance"]["resamples"] == 500
        outs.append(header["significance"])
    assert outs[0] == outs[1]
    other = tmp_path / "c.jsonl"
    assert main(["evaluate", "compare", str(base), str(head), "--seed", "5", "--out", str(other)]) == 0
    assert json.loads(other.read_text(encoding="utf-8").splitlines()[0])["significance"] != outs[0]
    capsys.readouterr()
    with pytest.raises(SystemExit) as caught:
        main(["evaluate", "compare", str(base), str(head), "--resamples", "10", "--out", str(other)])
    assert caught.value.code == 2 and "--resamples" in capsys.readouterr().err
