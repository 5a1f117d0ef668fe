"""Every score formula on hand-computed cases (spec sections 2.2, 2.6, 3.3)."""

from __future__ import annotations

import math

import pytest

from assembler.contract.text import normalize_entry, trim
from assembler.evaluate.loader import ExpectedSource
from assembler.evaluate.metrics import (
    cap_missed,
    citation_recall,
    coverage_counts,
    distribution,
    diversity,
    percentile,
    ratio,
    score_recall,
)


def src(source: str, relevance: int = 1, paragraphs: tuple[int, ...] = ()) -> ExpectedSource:
    return ExpectedSource(source, paragraphs, relevance)


def test_the_worked_ndcg_example() -> None:
    block = score_recall([src("a.md", 3), src("b.md", 1)], [("a.md", 0), ("a.md", 1), ("b.md", 4)])
    assert block is not None
    dcg = 3 / math.log2(2) + 1 / math.log2(4)
    idcg = 3 / math.log2(2) + 1 / math.log2(3)
    assert dcg == 3.5 and idcg == pytest.approx(3.6309, abs=1e-4)
    assert block == {
        "recall_at_k": 1.0,
        "mrr": 1.0,
        "ndcg": pytest.approx(dcg / idcg),
        "expected_total": 2,
        "matched": 2,
    }
    assert block["ndcg"] == pytest.approx(0.9639, abs=1e-4)


def test_ideal_relevance_order_gives_ndcg_one() -> None:
    block = score_recall([src("a.md", 3), src("b.md", 2)], [("a.md", 0), ("b.md", 0)])
    assert block is not None and block["ndcg"] == 1.0


def test_the_higher_relevance_hit_ranked_lower_drops_ndcg() -> None:
    block = score_recall([src("a.md", 3), src("b.md", 1)], [("b.md", 0), ("a.md", 0)])
    assert block is not None
    expected = (1 / 1 + 3 / math.log2(3)) / (3 / 1 + 1 / math.log2(3))
    assert block["ndcg"] == pytest.approx(expected) and block["ndcg"] < 1
    assert block["mrr"] == 1.0  # the first hit satisfies *an* entry


def test_recall_and_mrr_on_a_partial_match() -> None:
    block = score_recall([src("a.md"), src("b.md"), src("c.md")], [("x.md", 0), ("y.md", 0), ("c.md", 3)])
    assert block is not None
    assert (block["recall_at_k"], block["mrr"], block["matched"], block["expected_total"]) == (1 / 3, 1 / 3, 1, 3)
    assert block["ndcg"] == pytest.approx((1 / 2) / (1 + 1 / math.log2(3) + 1 / 2))


def test_a_relevance_zero_entry_is_dropped_from_every_rank_metric() -> None:
    with_zero = score_recall([src("a.md", 2), src("z.md", 0)], [("z.md", 0), ("a.md", 0)])
    without = score_recall([src("a.md", 2)], [("z.md", 0), ("a.md", 0)])
    assert with_zero == without
    assert with_zero is not None and with_zero["expected_total"] == 1 and with_zero["mrr"] == 0.5


def test_no_recall_block_when_every_entry_has_relevance_zero_or_none_is_declared() -> None:
    assert score_recall([src("z.md", 0)], [("z.md", 0)]) is None
    assert score_recall([], [("a.md", 0)]) is None


def test_an_empty_hit_list_scores_zero_not_absent() -> None:
    assert score_recall([src("a.md", 2)], []) == {
        "recall_at_k": 0.0,
        "mrr": 0.0,
        "ndcg": 0.0,
        "expected_total": 1,
        "matched": 0,
    }


def test_a_paragraph_restricted_entry_needs_its_paragraph() -> None:
    entry = src("a.md", 1, (1,))
    assert score_recall([entry], [("a.md", 0)])["matched"] == 0  # type: ignore[index]
    assert score_recall([entry], [("a.md", 0), ("a.md", 1)])["mrr"] == 0.5  # type: ignore[index]


def test_sources_match_exactly_without_normalization() -> None:
    assert score_recall([src("A.md")], [("a.md", 0)])["matched"] == 0  # type: ignore[index]


def test_two_entries_credited_at_one_hit_clamp_ndcg_to_one() -> None:
    # A wildcard and a paragraph-restricted entry on one source are both credited at position 0.
    block = score_recall([src("a.md", 3), src("a.md", 3, (0,)), src("b.md", 3)], [("a.md", 0), ("b.md", 0)])
    assert block is not None
    assert block["ndcg"] <= 1.0 and block["recall_at_k"] == 1.0
    clamped = score_recall([src("a.md", 1), src("a.md", 3, (0,))], [("a.md", 0)])
    assert clamped is not None and clamped["ndcg"] == 1.0


def test_ties_do_not_exist_position_is_the_rank_and_duplicates_count_once_per_entry() -> None:
    # The same locator twice: the entry is credited at its first position only.
    block = score_recall([src("a.md", 2), src("b.md", 1)], [("a.md", 0), ("a.md", 0), ("b.md", 0)])
    assert block is not None
    assert block["ndcg"] == pytest.approx((2 + 1 / math.log2(4)) / (2 + 1 / math.log2(3)))
    # Duplicated expectations are kept (|E| = 2), each credited at the same hit.
    twice = score_recall([src("a.md"), src("a.md")], [("a.md", 0)])
    assert twice is not None and twice["expected_total"] == 2 and twice["ndcg"] == 1.0


def test_coverage_counts() -> None:
    assert coverage_counts(0, 0) is None
    assert coverage_counts(2, 1) == {"expected": 2, "matched": 1, "value": 0.5}


def test_citation_recall_counts_served_checks() -> None:
    assert citation_recall([True, False]) == {"expected_total": 2, "matched": 1, "value": 0.5}


def test_diversity_counts_distinct_sources() -> None:
    assert diversity([("a.md", 0), ("a.md", 1), ("community:L0", 2)]) == 2
    assert diversity([]) == 0


def test_missed_is_capped_at_three_with_the_number_dropped() -> None:
    assert cap_missed(["a", "b", "c", "d"]) == (["a", "b", "c"], 1)
    assert cap_missed(["a", "b", "c"]) == (["a", "b", "c"], 0)


def test_nearest_rank_percentiles() -> None:
    ordered = [float(v) for v in range(1, 11)]
    assert [percentile(ordered, p) for p in (50, 90, 99)] == [5.0, 9.0, 10.0]
    assert percentile([7.0], 1) == 7.0


def test_distribution_drops_non_finite_samples_and_is_all_null_when_empty() -> None:
    assert distribution([2.0, float("nan"), 4.0, float("inf")]) == {
        "n": 2,
        "min": 2.0,
        "p50": 2.0,
        "p90": 4.0,
        "p99": 4.0,
        "max": 4.0,
        "mean": 3.0,
        "sum": 6.0,
    }
    empty = distribution([])
    assert empty["n"] == 0 and all(empty[key] is None for key in empty if key != "n")


def test_ratio_shapes() -> None:
    assert ratio(3, 4) == {"value": 0.75, "n": 4, "numerator": 3}
    assert ratio(0, 0) == {"value": None, "n": 0, "numerator": None}


@pytest.mark.parametrize(
    ("left", "right"),
    [("\uff21\uff50\uff50\uff4c\uff45", "apple"), ("リンゴ", "りんご"), ("\uff71\uff6f\uff8c\uff9f\uff99", "あっぷる")],
)
def test_normalize_entry_folds_width_case_and_kana(left: str, right: str) -> None:
    assert normalize_entry(left) == normalize_entry(right)


def test_normalize_entry_lowercases_per_character_without_final_sigma() -> None:
    assert normalize_entry("ΟΔΟΣ") == "οδοσ"
    assert normalize_entry(" a ") == " a "  # callers trim
    assert trim("\u3000a\u00a0") == "a" and trim("\x1ca") == "\x1ca"
