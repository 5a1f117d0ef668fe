"""Paired statistics over cases: a bootstrap interval of the mean difference, a sign-flip
(paired randomization) test, and the Holm-Bonferroni correction across several tests.

Two runs of one eval set score the same cases, so each case gives one difference ``head - base``
and the question is whether the mean difference is told apart from zero. Both resampling
procedures work on the whole matrix of resamples at once (NumPy), in blocks that bound memory.

* :func:`bootstrap_interval`: resample the cases with replacement, take the 2.5th and 97.5th
  percentiles of the resampled means (a 95 % percentile interval).
* :func:`sign_flip_p`: under the null hypothesis the two runs are exchangeable within a case, so
  each difference's sign is a coin flip. Two-sided p-value as :func:`scipy.stats.permutation_test`
  computes it for paired samples (``permutation_type="samples"``, statistic the mean difference):
  every sign vector when ``2**n <= resamples`` (exact), else ``resamples`` random ones, the
  observed statistic counted once (``(k + 1) / (resamples + 1)``); ``p = min(1, 2 * min(P(T <=
  t), P(T >= t)))`` with scipy's relative tolerance for ties.
* :func:`holm`: the step-down adjusted p-values; a difference "survives" when its adjusted value
  is at most ``alpha``.

>>> import numpy as np
>>> sign_flip_p(np.array([1.0, 1.0, 1.0]), 1000, np.random.default_rng(0))  # exact: 2 of 8 as extreme
0.25
>>> holm([0.01, 0.04, 0.03])
[0.03, 0.06, 0.06]
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

__all__ = ["ALPHA", "PairedTest", "bootstrap_interval", "holm", "paired_test", "sign_flip_p"]

ALPHA = 0.05
_BLOCK = 1 << 22  # resampled values per block (32 MiB of float64)
_TIE = float(np.finfo(np.float64).eps) * 100  # scipy.stats.permutation_test's relative tolerance

Values = npt.NDArray[np.float64]


def _blocks(resamples: int, n: int) -> list[int]:
    """Row counts of the resample blocks: each at most ``_BLOCK`` values."""
    rows = max(1, _BLOCK // max(1, n))
    return [min(rows, resamples - start) for start in range(0, resamples, rows)]


def bootstrap_interval(diffs: Values, resamples: int, rng: np.random.Generator) -> tuple[float, float]:
    """The 95 % percentile bootstrap interval of ``diffs.mean()`` (cases resampled with replacement)."""
    n = diffs.size
    means = np.concatenate([diffs[rng.integers(0, n, size=(rows, n))].mean(axis=1) for rows in _blocks(resamples, n)])
    low, high = np.percentile(means, [2.5, 97.5])
    return float(low), float(high)


def _flipped_means(diffs: Values, resamples: int, rng: np.random.Generator) -> tuple[Values, bool]:
    """The null distribution of the mean under sign flips, and whether it is exact."""
    n = diffs.size
    if n < 63 and 2**n <= resamples:
        codes = np.arange(2**n, dtype=np.int64)[:, None]
        signs = 1.0 - 2.0 * ((codes >> np.arange(n, dtype=np.int64)) & 1)
        return (signs * diffs).mean(axis=1), True
    parts = [((1.0 - 2.0 * rng.integers(0, 2, size=(rows, n))) * diffs).mean(axis=1) for rows in _blocks(resamples, n)]
    return np.concatenate(parts), False


def sign_flip_p(diffs: Values, resamples: int, rng: np.random.Generator) -> float:
    """Two-sided paired randomization p-value of ``diffs.mean()`` (see the module docstring)."""
    observed = float(diffs.mean())
    null, exact = _flipped_means(diffs, resamples, rng)
    adjustment = 0 if exact else 1
    total = null.size + adjustment
    gamma = abs(_TIE * observed)
    less = (int(np.count_nonzero(null <= observed + gamma)) + adjustment) / total
    greater = (int(np.count_nonzero(null >= observed - gamma)) + adjustment) / total
    return float(min(1.0, 2.0 * min(less, greater)))


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm-Bonferroni adjusted p-values, in the input order (each at most 1)."""
    m = len(p_values)
    order = sorted(range(m), key=lambda i: p_values[i])
    adjusted = [0.0] * m
    running = 0.0
    for rank, index in enumerate(order):
        running = max(running, min(1.0, (m - rank) * p_values[index]))
        adjusted[index] = running
    return adjusted


@dataclass(frozen=True)
class PairedTest:
    """One paired comparison: cases, the mean difference, its interval and the p-value."""

    cases: int
    mean: float
    low: float
    high: float
    p_value: float


def paired_test(base: Values, head: Values, resamples: int, rng: np.random.Generator) -> PairedTest | None:
    """:func:`bootstrap_interval` and :func:`sign_flip_p` of ``head - base`` over the cases where
    both are finite (None when there is none)."""
    diffs = (head - base)[np.isfinite(head) & np.isfinite(base)]
    if diffs.size == 0:
        return None
    low, high = bootstrap_interval(diffs, resamples, rng)
    return PairedTest(int(diffs.size), float(diffs.mean()), low, high, sign_flip_p(diffs, resamples, rng))
