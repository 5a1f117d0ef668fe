"""``assembler evaluate tune``: choose the quality policy's settings on a labelled set, with
cross-validation, so the held-out figures say whether the choice generalizes.

The search is a grid (like ranx's ``optimize_fusion`` over fusion weights): the fact lag (None =
facts after every passage), the statement share (None = no statement test), the source guard on
and off and, when the dump's facts come from more than one graph lane, which lanes' facts may
join the passages (``QualityPolicy.lane_offsets``). Every setting is scored once per case and
budget (the lanes are fixed: :mod:`assembler.evaluate.reselect` fuses once and selects per
setting); the folds only choose among those scores.

The rule that chooses (on the training cases): the setting must score at least the fixed-limit
baseline at every budget (the policy's standing promise), and among those the best mean over the
budgets wins; it replaces the untuned ``quality`` only when it beats it by more than ``margin``
(ties go to the untuned settings, then to grid order). With ``folds`` K the cases are split
into K folds (a seeded permutation): each fold's setting is chosen on the other K - 1 and scored
on it; the setting written for use is chosen on every case.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import numpy.typing as npt

from assembler.evaluate import metrics
from assembler.evaluate.dump import CaseLanes
from assembler.evaluate.errors import EvaluateError
from assembler.evaluate.loader import EvalSet
from assembler.evaluate.reselect import Prepared, baseline_hits, policy_hits, prepare
from assembler.evaluate.sweep import Budget
from assembler.selection import CONTRACT, QualityPolicy
from assembler.selection.quality import CONFIG_VERSION, LANES_WITH_FACTS

__all__ = [
    "DEFAULT_LAGS",
    "DEFAULT_SHARES",
    "METRICS",
    "MODES",
    "FoldResult",
    "TuneResult",
    "grid",
    "tune",
]

METRICS = ("recall_at_k", "ndcg", "mrr")
"""Per-case scores of the ``recall`` block a search can optimize."""
MODES = ("tuned", "quality", "contract", "baseline")
DEFAULT_LAGS: tuple[int | None, ...] = (None, -1, 0, 1, 2, 3, 4, 5, 6, 8)
DEFAULT_SHARES: tuple[float | None, ...] = (None, 0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.8)
RESAMPLES = 2000
TUNED_NAME = "quality-tuned"

Scores = npt.NDArray[np.float64]
"""Per case (NaN where the case has no score), one row per budget."""


def grid(
    lags: Sequence[int | None] = DEFAULT_LAGS,
    shares: Sequence[float | None] = DEFAULT_SHARES,
    guards: Sequence[bool] = (True, False),
    fact_lanes: Sequence[str] = (),
) -> list[QualityPolicy]:
    """The settings searched, the untuned ``quality`` first (it wins ties), no two alike.

    ``fact_lanes`` are the graph lanes whose facts the dump holds; with two or more, each
    combination of them letting facts join early (offset 0) or not (None) is searched too.

    >>> len(grid(lags=(None, 2, 3), shares=(None, 0.4), guards=(True,)))
    5
    """
    untuned = QualityPolicy(name=TUNED_NAME)
    offsets: list[tuple[tuple[str, int | None], ...]] = [()]
    lanes = sorted(set(fact_lanes))
    if len(lanes) >= 2:
        combos = itertools.product((0, None), repeat=len(lanes))
        offsets += [tuple(zip(lanes, combo, strict=True)) for combo in combos if any(v is not None for v in combo)]
        offsets.remove(tuple((lane, 0) for lane in lanes))  # the same as no offsets
    found: list[QualityPolicy] = [untuned]
    for lag in lags:
        for share, guard, lane_offsets in itertools.product(shares, guards, offsets):
            if lag is None:  # facts last: the other settings do not matter
                share, guard, lane_offsets = untuned.statement_share, untuned.guard, ()
            setting = replace(untuned, fact_lag=lag, statement_share=share, guard=guard, lane_offsets=lane_offsets)
            if setting not in found:
                found.append(setting)
    return found


def _mean(values: Scores) -> float | None:
    """Mean of the scored cases (None when none is scored)."""
    scored = values[~np.isnan(values)]
    return float(scored.mean()) if scored.size else None


def _case_scores(evalset: EvalSet, hit_lists: Sequence[Sequence[metrics.Hit]], metric: str) -> list[float]:
    values = []
    for case, hits in zip(evalset.cases, hit_lists, strict=True):
        block = metrics.score_recall(case.expected_sources, hits)
        values.append(math.nan if block is None else float(block[metric]))
    return values


@dataclass(frozen=True)
class FoldResult:
    """One fold: the setting chosen on the other folds, and every mode's mean per budget on the
    training cases and on the held-out fold (None where no case is scored)."""

    fold: int
    train_cases: int
    held_out_cases: int
    setting: QualityPolicy
    train: Mapping[str, Sequence[float | None]]
    held_out: Mapping[str, Sequence[float | None]]


@dataclass(frozen=True)
class Interval:
    """A held-out mean difference per case and its seeded bootstrap interval (95 %)."""

    mean: float | None
    low: float | None
    high: float | None
    cases: int


@dataclass(frozen=True)
class TuneResult:
    """What :func:`tune` found: the setting chosen on every case, the per-fold record and the
    pooled held-out comparison (each case scored by the setting its fold chose)."""

    setting: QualityPolicy
    metric: str
    budgets: Sequence[Budget]
    folds: Sequence[FoldResult]
    seed: int
    settings_searched: int
    train_all: Mapping[str, Sequence[float | None]]
    held_out: Mapping[str, Sequence[float | None]]
    differences: Mapping[str, Sequence[Interval]]
    lags: Sequence[int | None]
    shares: Sequence[float | None]
    margin: float

    def recovery(self) -> list[float | None]:
        """Per budget, the share of the contract's held-out gain over the baseline that the tuned
        setting keeps (None where the contract gains nothing)."""
        shares: list[float | None] = []
        for tuned, contract, base in zip(
            self.held_out["tuned"], self.held_out["contract"], self.held_out["baseline"], strict=True
        ):
            if tuned is None or contract is None or base is None or contract - base <= 0:
                shares.append(None)
            else:
                shares.append((tuned - base) / (contract - base))
        return shares

    def to_json(self, evalset: EvalSet, lanes: CaseLanes) -> dict[str, Any]:
        """The tuned file: a policy config (:func:`~assembler.selection.load_policy_config` reads
        it) whose ``tuning`` object records how the setting was found. No clock, no absolute
        paths beyond those given: the same inputs and seed give the same bytes."""

        def numbers(values: Sequence[float | None]) -> list[float | None]:
            return [None if value is None else round(value, 6) for value in values]

        def by_mode(table: Mapping[str, Sequence[float | None]]) -> dict[str, list[float | None]]:
            return {mode: numbers(table[mode]) for mode in MODES}

        return {
            "assembler_policy_config": CONFIG_VERSION,
            "policy": self.setting.to_config(),
            "tuning": {
                "eval": {"path": evalset.path, "name": evalset.name, "cases": len(evalset.cases)},
                "lanes": {"path": lanes.path, "sha256": lanes.sha256},
                "metric": self.metric,
                "budgets": [
                    {
                        "budget": b.label,
                        "max_items": b.limits.max_items,
                        "max_bytes": b.limits.max_bytes,
                        "max_tokens": b.limits.max_tokens,
                    }
                    for b in self.budgets
                ],
                "folds": len(self.folds),
                "seed": self.seed,
                "search": {
                    "settings": self.settings_searched,
                    "fact_lag": list(self.lags),
                    "statement_share": list(self.shares),
                    "guard": [True, False],
                    "margin": self.margin,
                    "rule": "at least the baseline at every budget on the training cases; best mean over the "
                    "budgets; the untuned quality unless beaten by more than the margin",
                },
                "all_cases": by_mode(self.train_all),
                "per_fold": [
                    {
                        "fold": fold.fold,
                        "train_cases": fold.train_cases,
                        "held_out_cases": fold.held_out_cases,
                        "setting": _setting_json(fold.setting),
                        "train": by_mode(fold.train),
                        "held_out": by_mode(fold.held_out),
                    }
                    for fold in self.folds
                ],
                "held_out": by_mode(self.held_out),
                "held_out_differences": {
                    name: [
                        {
                            "mean": None if i.mean is None else round(i.mean, 6),
                            "low": None if i.low is None else round(i.low, 6),
                            "high": None if i.high is None else round(i.high, 6),
                            "cases": i.cases,
                        }
                        for i in intervals
                    ]
                    for name, intervals in self.differences.items()
                },
                "recovery_of_contract_gain": numbers(self.recovery()),
            },
        }

    def summary(self) -> list[str]:
        """One screen: the chosen setting, then per budget the held-out means and differences."""
        lines = [
            f"tuned on {self.metric}, {len(self.folds)} folds (seed {self.seed}), "
            f"{self.settings_searched} settings: {describe(self.setting)}",
            "per fold: " + "; ".join(f"{fold.fold}: {describe(fold.setting)}" for fold in self.folds),
            f"held out ({self.metric}):",
            f"{'budget':<28} " + " ".join(f"{mode:>9}" for mode in MODES) + "   tuned-baseline [95% CI]"
            "   tuned-quality [95% CI]",
        ]
        for index, budget in enumerate(self.budgets):
            cells = [_cell(self.held_out[mode][index]) for mode in MODES]
            diffs = [_interval(self.differences[name][index]) for name in ("tuned-baseline", "tuned-quality")]
            lines.append(f"{budget.label:<28} " + " ".join(cells) + "   " + "   ".join(diffs))
        recovery = ", ".join("n/a" if r is None else f"{r:.0%}" for r in self.recovery())
        lines.append(f"share of the contract's held-out gain over the baseline kept: {recovery}")
        return lines


def _cell(value: float | None) -> str:
    return f"{'n/a':>9}" if value is None else f"{value:>9.4f}"


def _interval(interval: Interval) -> str:
    if interval.mean is None or interval.low is None or interval.high is None:
        return f"{'n/a':>22}"
    return f"{interval.mean:+.4f} [{interval.low:+.4f}, {interval.high:+.4f}]"


def _setting_json(setting: QualityPolicy) -> dict[str, Any]:
    config = setting.to_config()
    return {key: config[key] for key in ("fact_lag", "statement_share", "guard", "lane_offsets")}


def describe(setting: QualityPolicy) -> str:
    """The searched settings in a few words: ``lag 3, share 0.4, guard on``."""
    if setting.fact_lag is None:
        return "facts last"
    share = "no statement test" if setting.statement_share is None else f"share {setting.statement_share:g}"
    text = f"lag {setting.fact_lag}, {share}, guard {'on' if setting.guard else 'off'}"
    if setting.lane_offsets:
        text += ", " + ", ".join(f"{lane} {'late' if v is None else v}" for lane, v in setting.lane_offsets)
    return text


def _choose(scores: Scores, baseline: Scores, cases: npt.NDArray[np.int64], margin: float) -> int:
    """The index of the setting the rule picks on ``cases`` (``scores``: settings x budgets x cases)."""
    picked = scores[:, :, cases]
    scored = ~np.isnan(picked[0, 0])
    if not scored.any():
        return 0
    means = picked[:, :, scored].mean(axis=2)  # settings x budgets
    floor = baseline[:, cases][:, scored].mean(axis=1)
    objective = means.mean(axis=1)
    admissible = (means >= floor[None, :] - 1e-12).all(axis=1)
    if not admissible.any():
        return 0
    best = int(np.argmax(np.where(admissible, objective, -np.inf)))  # first of equals: grid order
    return best if objective[best] > objective[0] + margin else 0


def _means(table: Scores, cases: npt.NDArray[np.int64]) -> list[float | None]:
    return [_mean(row[cases]) for row in table]


def _bootstrap(diffs: Scores, rng: np.random.Generator) -> Interval:
    values = diffs[~np.isnan(diffs)]
    if values.size == 0:
        return Interval(None, None, None, 0)
    draws = values[rng.integers(0, values.size, size=(RESAMPLES, values.size))].mean(axis=1)
    low, high = np.percentile(draws, [2.5, 97.5])
    return Interval(float(values.mean()), float(low), float(high), int(values.size))


def fold_assignment(cases: int, folds: int, seed: int) -> list[npt.NDArray[np.int64]]:
    """The held-out cases of each fold: a seeded permutation dealt round-robin (deterministic).

    >>> [list(f) for f in fold_assignment(5, 2, seed=0)] == [list(f) for f in fold_assignment(5, 2, seed=0)]
    True
    """
    order = np.random.default_rng(seed).permutation(cases)
    return [np.sort(order[fold::folds]).astype(np.int64) for fold in range(folds)]


def tune(
    evalset: EvalSet,
    lanes: CaseLanes,
    budgets: Sequence[Budget],
    *,
    folds: int = 5,
    seed: int = 0,
    metric: str = "recall_at_k",
    lags: Sequence[int | None] = DEFAULT_LAGS,
    shares: Sequence[float | None] = DEFAULT_SHARES,
    margin: float = 0.0,
) -> TuneResult:
    """Search the quality policy's settings on ``evalset`` (see the module docstring).

    Raises :class:`~assembler.evaluate.errors.EvaluateError` when ``metric`` is unknown, ``folds``
    is below 2 or above the number of cases, or no budget is given.
    """
    if metric not in METRICS:
        raise EvaluateError(f"metric must be one of {', '.join(METRICS)}, got {metric!r}")
    if not budgets:
        raise EvaluateError("budgets must name at least one budget")
    if not 2 <= folds <= len(evalset.cases):
        raise EvaluateError(f"folds must be from 2 to the number of cases ({len(evalset.cases)}), got {folds}")
    if margin < 0:
        raise EvaluateError(f"margin must be at least 0, got {margin}")
    prepared: list[Prepared] = [prepare(evalset, lanes, budget.limits) for budget in budgets]
    fact_lanes = sorted(
        set(prepared[0].fused.filter(kind="association")["lane"].unique().to_list()) & set(LANES_WITH_FACTS)
    )
    settings = grid(lags, shares, fact_lanes=fact_lanes)
    scores = np.array(
        [[_case_scores(evalset, policy_hits(p, setting), metric) for p in prepared] for setting in settings]
    )
    fixed = {
        "quality": np.array([_case_scores(evalset, policy_hits(p, QualityPolicy()), metric) for p in prepared]),
        "contract": np.array([_case_scores(evalset, policy_hits(p, CONTRACT), metric) for p in prepared]),
        "baseline": np.array([_case_scores(evalset, baseline_hits(evalset, lanes, b.limits), metric) for b in budgets]),
    }
    everyone = np.arange(len(evalset.cases), dtype=np.int64)
    chosen = _choose(scores, fixed["baseline"], everyone, margin)
    results: list[FoldResult] = []
    pooled = np.full((len(budgets), len(evalset.cases)), np.nan)
    for fold, held in enumerate(fold_assignment(len(evalset.cases), folds, seed)):
        train = np.setdiff1d(everyone, held)
        pick = _choose(scores, fixed["baseline"], train, margin)
        pooled[:, held] = scores[pick][:, held]
        tables = {"tuned": scores[pick], **fixed}
        results.append(
            FoldResult(
                fold=fold,
                train_cases=int(train.size),
                held_out_cases=int(held.size),
                setting=settings[pick],
                train={mode: _means(tables[mode], train) for mode in MODES},
                held_out={mode: _means(tables[mode], held) for mode in MODES},
            )
        )
    rng = np.random.default_rng(seed)
    differences = {
        f"tuned-{other}": [_bootstrap(pooled[b] - fixed[other][b], rng) for b in range(len(budgets))]
        for other in ("baseline", "quality", "contract")
    }
    pooled_tables = {"tuned": pooled, **fixed}
    return TuneResult(
        setting=settings[chosen],
        metric=metric,
        budgets=list(budgets),
        folds=results,
        seed=seed,
        settings_searched=len(settings),
        train_all={mode: _means(table, everyone) for mode, table in {"tuned": scores[chosen], **fixed}.items()},
        held_out={mode: _means(table, everyone) for mode, table in pooled_tables.items()},
        differences=differences,
        lags=list(lags),
        shares=list(shares),
        margin=margin,
    )
