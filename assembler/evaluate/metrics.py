"""Scores from positions and labels only (spec sections 2.2, 3.3): per case, then aggregated.

Hits are ``(source, paragraph)`` locators in rank order; a hit's score is never read.

Worked example of section 2.2:

>>> from assembler.evaluate.loader import ExpectedSource
>>> block = score_recall([ExpectedSource("a.md", (), 3), ExpectedSource("b.md", (), 1)],
...                      [("a.md", 0), ("a.md", 1), ("b.md", 4)])
>>> block["recall_at_k"], block["mrr"], round(block["ndcg"], 4)
(1.0, 1.0, 0.9639)
>>> distribution([3.0, 1.0, 2.0])["p50"], distribution([])["mean"]
(2.0, None)
>>> ratio(1, 4)
{'value': 0.25, 'n': 4, 'numerator': 1}
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any

from assembler.evaluate.loader import ExpectedSource

__all__ = [
    "MISSED_CAP",
    "Hit",
    "cap_missed",
    "citation_recall",
    "coverage_counts",
    "distribution",
    "diversity",
    "percentile",
    "ratio",
    "satisfies",
    "score_recall",
]

Hit = tuple[str, int]
MISSED_CAP = 3


def satisfies(entry: ExpectedSource, hit: Hit) -> bool:
    """Same source (exact) and, when the entry names paragraphs, one of them."""
    return hit[0] == entry.source and (not entry.paragraphs or hit[1] in entry.paragraphs)


def _first_position(entry: ExpectedSource, hits: Sequence[Hit]) -> int | None:
    return next((position for position, hit in enumerate(hits) if satisfies(entry, hit)), None)


def score_recall(entries: Sequence[ExpectedSource], hits: Sequence[Hit]) -> dict[str, Any] | None:
    """The ``recall`` block, or None when no entry has relevance >= 1."""
    evidence = [entry for entry in entries if entry.relevance >= 1]
    if not evidence:
        return None
    firsts = [_first_position(entry, hits) for entry in evidence]
    matched = sum(1 for position in firsts if position is not None)
    first_any = next((position for position, hit in enumerate(hits) if any(satisfies(e, hit) for e in evidence)), None)
    dcg = sum(
        entry.relevance / math.log2(position + 2)
        for entry, position in zip(evidence, firsts, strict=True)
        if position is not None
    )
    ideal = sorted((entry.relevance for entry in evidence), reverse=True)
    idcg = sum(relevance / math.log2(i + 2) for i, relevance in enumerate(ideal))
    return {
        "recall_at_k": matched / len(evidence),
        "mrr": 0.0 if first_any is None else 1.0 / (first_any + 1),
        "ndcg": min(1.0, dcg / idcg),
        "expected_total": len(evidence),
        "matched": matched,
    }


def coverage_counts(expected: int, matched: int) -> dict[str, Any] | None:
    """``{expected, matched, value}``, or None for an empty expectation list."""
    if expected == 0:
        return None
    return {"expected": expected, "matched": matched, "value": matched / expected}


def citation_recall(served: Sequence[bool]) -> dict[str, Any]:
    """``{expected_total, matched, value}`` over the declared citations' served bits."""
    matched = sum(served)
    return {"expected_total": len(served), "matched": matched, "value": matched / len(served)}


def diversity(hits: Iterable[Hit]) -> int:
    """Distinct source strings among the hits."""
    return len({source for source, _ in hits})


def cap_missed(entries: Sequence[str]) -> tuple[list[str], int]:
    """The first three misses, and how many were dropped."""
    return list(entries[:MISSED_CAP]), max(0, len(entries) - MISSED_CAP)


def percentile(ordered: Sequence[float], p: int) -> float:
    """Nearest rank on an ascending list: 1-based index ``ceil(p*n/100)`` clamped to 1..n."""
    n = len(ordered)
    index = min(max(math.ceil(p * n / 100), 1), n)
    return ordered[index - 1]


def distribution(samples: Iterable[float]) -> dict[str, Any]:
    """``{n, min, p50, p90, p99, max, mean, sum}`` of the finite samples; all null when none."""
    values = sorted(float(v) for v in samples if math.isfinite(v))
    if not values:
        return dict.fromkeys(("n", "min", "p50", "p90", "p99", "max", "mean", "sum")) | {"n": 0}
    total = math.fsum(values)
    return {
        "n": len(values),
        "min": values[0],
        "p50": percentile(values, 50),
        "p90": percentile(values, 90),
        "p99": percentile(values, 99),
        "max": values[-1],
        "mean": total / len(values),
        "sum": total,
    }


def ratio(numerator: int, n: int) -> dict[str, Any]:
    """``{value, n, numerator}``; value and numerator null when ``n == 0``."""
    if n == 0:
        return {"value": None, "n": 0, "numerator": None}
    return {"value": numerator / n, "n": n, "numerator": numerator}
