"""``assembler evaluate tune``: choose the quality policy's settings on a labelled set, and adopt
them only where cross-validation says they carry over to cases the search did not see.

The search is a grid (like ranx's ``optimize_fusion`` over fusion weights): the fact lag (None =
facts after every passage), the statement share (None = no statement test), the source guard on
and off and, when the dump's facts come from more than one graph lane, which lanes' facts may
join the passages (``QualityPolicy.lane_offsets``). Every setting is scored once per case and
budget (the lanes are fixed: :mod:`assembler.evaluate.reselect` fuses once and selects per
setting) on every metric: recall@k, nDCG, MRR and, with answers, answer-in-context; the folds
only choose among those scores.

**The objective** (``objective``) is one of those metrics or a weighted sum of them
(``recall_at_k=0.5,ndcg=0.5``); a case is scored when every weighted metric is.

**Choosing** (on some cases): the setting must score at least the fixed-limit baseline at every
budget on them (the policy's standing promise), and among those the best mean objective over the
budgets wins; ties go to the untuned settings, then to grid order. With ``folds`` K the cases are
split into K folds (a seeded permutation): each fold's setting is chosen on the other K - 1 and
scored on it, so every case gets a held-out score from a choice made without it. The
**candidate** is the setting chosen on every case.

**Adopting.** The candidate is written for use only where the held-out scores support it; the
rule, at every budget, on the objective:

1. the mean held-out gain over the untuned ``quality`` is positive, and its paired bootstrap
   95 % interval's lower bound is at least ``-margin`` (a gain that the cases do not make
   uncertain by more than the margin);
2. the held-out mean is not below the baseline's by more than ``margin``, on the objective and on
   each metric it weighs (the standing promise, checked on cases the choice did not see).

Otherwise the untuned ``quality`` settings are written, and the file and the summary say which
check failed. The held-out scores are those of the choosing procedure (each fold's own choice):
they estimate what tuning buys, which is what adopting its result stakes. ``margin`` defaults
to :data:`DEFAULT_MARGIN`. The file also reports how stable the choice was (the setting of each
fold and how many chose the candidate) and every metric for the written, untuned, contract and
baseline modes, so a gain on one metric bought with another is visible.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import numpy.typing as npt

from assembler.errors import counted
from assembler.evaluate import metrics
from assembler.evaluate.answers import Answers, in_context, items_in_context, normalized_items
from assembler.evaluate.dump import CaseLanes
from assembler.evaluate.errors import EvaluateError
from assembler.evaluate.harness import Progress, counter
from assembler.evaluate.loader import EvalSet
from assembler.evaluate.reselect import Prepared, admitted_hits, baseline_served, policy_admitted, prepare
from assembler.evaluate.sweep import Budget
from assembler.selection import CONTRACT, QualityPolicy, SelectionPolicy
from assembler.selection.quality import CONFIG_VERSION, LANES_WITH_FACTS

__all__ = [
    "ANSWER_METRIC",
    "DEFAULT_LAGS",
    "DEFAULT_MARGIN",
    "DEFAULT_SHARES",
    "METRICS",
    "MODES",
    "Decision",
    "FoldResult",
    "Interval",
    "TuneResult",
    "decide",
    "describe",
    "grid",
    "parse_objective",
    "tune",
]

METRICS = ("recall_at_k", "ndcg", "mrr")
"""Per-case scores of the ``recall`` block a search can optimize."""
ANSWER_METRIC = "answer_in_context"
"""The per-case answer-in-context score (needs answers)."""
_ALIASES = {"recall": "recall_at_k", "recall@k": "recall_at_k", "answer": ANSWER_METRIC, "answers": ANSWER_METRIC}
MODES = ("tuned", "quality", "contract", "baseline")
DEFAULT_LAGS: tuple[int | None, ...] = (None, -1, 0, 1, 2, 3, 4, 5, 6, 8)
DEFAULT_SHARES: tuple[float | None, ...] = (None, 0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.8)
DEFAULT_MARGIN = 0.01
"""The held-out loss tolerated by the adoption rule: a bootstrap lower bound of the gain over the
untuned quality down to -0.01, and a held-out mean down to 0.01 below the baseline's. About half
of what one case moves a mean of 50 cases by: noise of less than a case is not read as a loss,
one case lost is."""
RESAMPLES = 2000
TUNED_NAME = "quality-tuned"
RULE = (
    "adopt the candidate only if, at every budget, on the cases each fold held out (each scored by its own "
    "fold's choice): the mean gain of the objective over the untuned quality is positive and its 95% paired "
    "bootstrap lower bound is at least -margin; and the held-out mean is not below the baseline's by more than "
    "the margin, on the objective and on each metric it weighs. Otherwise write the untuned quality settings"
)

Scores = npt.NDArray[np.float64]
"""Per case (NaN where the case has no score), one row per budget."""


def parse_objective(text: str, *, answers: bool = False) -> dict[str, float]:
    """``recall_at_k``, ``ndcg``, ``mrr``, ``answer_in_context`` (aliases ``recall``, ``answer``), or
    ``NAME=WEIGHT`` pairs joined by ``,`` (positive weights): the metric weights.

    >>> parse_objective("recall=0.5,ndcg=0.5")
    {'recall_at_k': 0.5, 'ndcg': 0.5}
    >>> parse_objective("mrr")
    {'mrr': 1.0}
    """
    known = (*METRICS, ANSWER_METRIC)
    weights: dict[str, float] = {}
    for raw in text.split(","):
        part = raw.strip()
        name, sep, value = part.partition("=")
        name = _ALIASES.get(name.strip().lower(), name.strip().lower())
        if name not in known:
            raise EvaluateError(
                f"--objective {text!r}: unknown metric {name!r} (use {', '.join(known)}, or NAME=WEIGHT pairs)"
            )
        if name in weights:
            raise EvaluateError(f"--objective {text!r}: {name} given twice")
        weight = 1.0
        if sep:
            try:
                weight = float(value)
            except ValueError:
                weight = math.nan
            if not (math.isfinite(weight) and weight > 0):
                raise EvaluateError(f"--objective {text!r}: the weight of {name} must be a positive number")
        weights[name] = weight
    if ANSWER_METRIC in weights and not answers:
        raise EvaluateError(f"--objective {text!r}: {ANSWER_METRIC} needs --answers FILE")
    return weights


def objective_label(weights: Mapping[str, float]) -> str:
    """``recall_at_k`` for one metric of weight 1, else ``name=weight`` pairs."""
    if len(weights) == 1 and next(iter(weights.values())) == 1.0:
        return next(iter(weights))
    return ",".join(f"{name}={weight:g}" for name, weight in weights.items())


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


def _recall_scores(evalset: EvalSet, hit_lists: Sequence[Sequence[metrics.Hit]]) -> dict[str, list[float]]:
    """Per metric of the ``recall`` block, per case (NaN where the case has no expected source)."""
    values: dict[str, list[float]] = {metric: [] for metric in METRICS}
    for case, hits in zip(evalset.cases, hit_lists, strict=True):
        block = metrics.score_recall(case.expected_sources, hits)
        for metric in METRICS:
            values[metric].append(math.nan if block is None else float(block[metric]))
    return values


def _floats(values: Sequence[int | None]) -> list[float]:
    return [math.nan if value is None else float(value) for value in values]


@dataclass(frozen=True)
class FoldResult:
    """One fold: the setting chosen on the other folds, and every mode's mean objective per
    budget on the training cases and on the held-out fold (None where no case is scored)."""

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

    def to_json(self) -> dict[str, Any]:
        """``{mean, low, high, cases}``, numbers rounded to 6 places."""
        return {
            "mean": _round(self.mean),
            "low": _round(self.low),
            "high": _round(self.high),
            "cases": self.cases,
        }


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 6)


@dataclass(frozen=True)
class Decision:
    """Whether the candidate is written, and why: per budget, the held-out gain of the objective
    over the untuned quality and the held-out differences from the baseline (the objective's and
    each weighted metric's)."""

    adopted: bool
    reason: str
    gain: Sequence[Interval]
    versus_baseline: Mapping[str, Sequence[Interval]]

    def to_json(self, budgets: Sequence[Budget], margin: float) -> dict[str, Any]:
        """The file's ``decision`` object."""
        return {
            "adopted": self.adopted,
            "reason": self.reason,
            "rule": RULE,
            "margin": margin,
            "per_budget": [
                {
                    "budget": budget.label,
                    "gain_over_quality": self.gain[index].to_json(),
                    "versus_baseline": {name: rows[index].to_json() for name, rows in self.versus_baseline.items()},
                }
                for index, budget in enumerate(budgets)
            ],
        }


def _bootstrap(diffs: Scores, rng: np.random.Generator) -> Interval:
    values = diffs[~np.isnan(diffs)]
    if values.size == 0:
        return Interval(None, None, None, 0)
    draws = values[rng.integers(0, values.size, size=(RESAMPLES, values.size))].mean(axis=1)
    low, high = np.percentile(draws, [2.5, 97.5])
    return Interval(float(values.mean()), float(low), float(high), int(values.size))


def decide(
    candidate_is_untuned: bool,
    held_out: Scores,
    quality: Scores,
    baseline: Mapping[str, tuple[Scores, Scores]],
    labels: Sequence[str],
    margin: float,
    rng: np.random.Generator,
) -> Decision:
    """The adoption rule (module docstring). ``held_out`` and ``quality``: the objective per
    budget and case (the cross-validated choice's and the untuned quality's); ``baseline``: for
    the objective and each weighted metric, the pair (cross-validated, baseline); ``labels``: the
    budgets' names, for the reason."""
    gain = [_bootstrap(held_out[b] - quality[b], rng) for b in range(held_out.shape[0])]
    versus = {
        name: [_bootstrap(tuned[b] - base[b], rng) for b in range(tuned.shape[0])]
        for name, (tuned, base) in baseline.items()
    }
    if candidate_is_untuned:
        return Decision(False, "no setting beat the untuned quality on every case together", gain, versus)
    failures = []
    for label, interval in zip(labels, gain, strict=True):
        if interval.mean is None or interval.low is None:
            failures.append(f"{label}: no held-out case is scored")
        elif not interval.mean > 0:
            failures.append(f"{label}: held-out gain over the untuned quality {interval.mean:+.4f} is not positive")
        elif interval.low < -margin:
            failures.append(
                f"{label}: the held-out gain's 95% lower bound {interval.low:+.4f} is below -margin ({-margin:+.4f})"
            )
    for name, rows in versus.items():
        for label, interval in zip(labels, rows, strict=True):
            if interval.mean is not None and interval.mean < -margin:
                failures.append(
                    f"{label}: held out {interval.mean:+.4f} against the baseline on {name}, more than the margin "
                    f"({margin:g}) below it"
                )
    if failures:
        return Decision(False, "cross-validation does not support the candidate: " + "; ".join(failures), gain, versus)
    return Decision(True, "held out, the candidate's choice beats the untuned quality at every budget", gain, versus)


@dataclass(frozen=True)
class TuneResult:
    """What :func:`tune` found: the setting written (the candidate, or the untuned quality where
    the held-out scores do not support it), the candidate, the decision, the per-fold record and
    the pooled held-out comparison (each case scored by the setting its fold chose)."""

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
    candidate: QualityPolicy | None = None
    decision: Decision | None = None
    objective: Mapping[str, float] | None = None
    by_metric: Mapping[str, Mapping[str, Mapping[str, Sequence[float | None]]]] | None = None
    """``{"all_cases" | "held_out": {metric: {mode: [mean per budget]}}}``: every metric."""

    @property
    def adopted(self) -> bool:
        """Whether the written setting is the candidate (not the untuned fallback)."""
        return self.decision is not None and self.decision.adopted

    def stability(self) -> dict[str, Any]:
        """How the folds chose: each fold's setting, and how many chose the candidate."""
        candidate = self.candidate or self.setting
        chosen = [_setting_json(fold.setting) for fold in self.folds]
        return {
            "folds": len(self.folds),
            "candidate_chosen_in": sum(fold.setting == candidate for fold in self.folds),
            "distinct_settings": len({json_key(setting) for setting in chosen}),
            "per_fold": chosen,
        }

    def recovery(self) -> list[float | None]:
        """Per budget, the share of the contract's held-out gain over the baseline that the tuned
        setting keeps (None where the contract gains nothing, or no case is scored)."""
        return [share for share, _ in self._recovery()]

    def _recovery(self) -> list[tuple[float | None, str | None]]:
        """:meth:`recovery` per budget, with the reason where there is no share."""
        shares: list[tuple[float | None, str | None]] = []
        for tuned, contract, base in zip(
            self.held_out["tuned"], self.held_out["contract"], self.held_out["baseline"], strict=True
        ):
            if tuned is None or contract is None or base is None:
                shares.append((None, NOT_SCORED))
            elif contract - base <= 0:
                shares.append((None, "the contract does not beat the baseline held out, so it has no gain to keep"))
            else:
                shares.append(((tuned - base) / (contract - base), None))
        return shares

    def to_json(self, evalset: EvalSet, lanes: CaseLanes, answers: Answers | None = None) -> dict[str, Any]:
        """The tuned file: a policy config (:func:`~assembler.selection.load_policy_config` reads
        it) whose ``tuning`` object records how the setting was found and whether it was adopted.
        No clock, no absolute paths beyond those given: the same inputs and seed give the same bytes."""

        def numbers(values: Sequence[float | None]) -> list[float | None]:
            return [_round(value) for value in values]

        def by_mode(table: Mapping[str, Sequence[float | None]]) -> dict[str, list[float | None]]:
            return {mode: numbers(values) for mode, values in table.items()}

        tuning: dict[str, Any] = {
            "eval": {"path": evalset.path, "name": evalset.name, "cases": len(evalset.cases)},
            "lanes": {"path": lanes.path, "sha256": lanes.sha256},
        }
        if answers is not None:
            tuning["answers"] = {"path": answers.path, "sha256": answers.sha256, "cases": answers.scored}
        tuning |= {
            "metric": self.metric,
            "objective": dict(self.objective or {self.metric: 1.0}),
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
                "rule": "choose: at least the baseline at every budget on the cases chosen on; best mean objective "
                "over the budgets; ties to the untuned quality. " + RULE,
            },
            "candidate": _setting_json(self.candidate or self.setting),
            "adopted": self.adopted,
        }
        if self.decision is not None:
            tuning["decision"] = self.decision.to_json(self.budgets, self.margin)
        tuning |= {
            "stability": self.stability(),
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
                name: [interval.to_json() for interval in intervals] for name, intervals in self.differences.items()
            },
            "recovery_of_contract_gain": numbers(self.recovery()),
        }
        if self.by_metric is not None:
            tuning["metrics"] = {
                part: {metric: by_mode(table) for metric, table in tables.items()}
                for part, tables in self.by_metric.items()
            }
        return {"assembler_policy_config": CONFIG_VERSION, "policy": self.setting.to_config(), "tuning": tuning}

    def summary(self) -> list[str]:
        """One screen: the decision, the stability, then per budget the held-out means and
        differences, and every metric for every mode."""
        candidate = self.candidate or self.setting
        stability = self.stability()
        lines = [
            f"tuned on {self.metric}, {counted(len(self.folds), 'fold')} (seed {self.seed}), "
            f"{counted(self.settings_searched, 'setting')}; candidate (chosen on every case): {describe(candidate)}",
        ]
        if self.decision is not None:
            verdict = "adopted" if self.adopted else "NOT adopted: wrote the untuned quality settings"
            lines.append(f"{verdict} (margin {self.margin:g}): {self.decision.reason}")
        lines += [
            f"stability: the candidate was chosen by {stability['candidate_chosen_in']} of {len(self.folds)} folds; "
            f"{counted(stability['distinct_settings'], 'distinct setting')}",
            "per fold: " + "; ".join(f"{fold.fold}: {describe(fold.setting)}" for fold in self.folds),
            f"held out ({self.metric}; tuned = each fold's own choice):",
            f"{'budget':<28} " + " ".join(f"{mode:>9}" for mode in MODES) + "   tuned-baseline [95% CI]"
            "   tuned-quality [95% CI]",
        ]
        missing = False
        for index, budget in enumerate(self.budgets):
            values = [self.held_out[mode][index] for mode in MODES]
            intervals = [self.differences[name][index] for name in ("tuned-baseline", "tuned-quality")]
            missing |= None in values or any(interval.mean is None for interval in intervals)
            lines.append(
                f"{budget.label:<28} " + " ".join(map(_cell, values)) + "   " + "   ".join(map(_interval, intervals))
            )
        lines += _not_scored(missing)
        recovery = self._recovery()
        kept = ", ".join(
            f"{budget.label} {'n/a' if share is None else f'{share:.0%}'}"
            for budget, (share, _) in zip(self.budgets, recovery, strict=True)
        )
        reasons = list(dict.fromkeys(reason for _, reason in recovery if reason is not None))
        why = f" (n/a: {'; '.join(reasons)})" if reasons else ""
        lines.append(f"share of the contract's held-out gain over the baseline kept: {kept}{why}")
        if self.by_metric is not None:
            held = self.by_metric["held_out"]
            lines.append("every metric, held out (a trade between metrics shows here):")
            lines.append(f"{'budget':<28} {'metric':<18} " + " ".join(f"{mode:>9}" for mode in MODES))
            missing = False
            for index, budget in enumerate(self.budgets):
                for metric, table in held.items():
                    values = [table[mode][index] for mode in MODES]
                    missing |= None in values
                    lines.append(f"{budget.label:<28} {metric:<18} " + " ".join(map(_cell, values)))
            lines += _not_scored(missing)
        return lines


def json_key(setting: Mapping[str, Any]) -> str:
    """A setting's JSON object as a hashable key."""
    return repr(sorted(setting.items()))


NOT_SCORED = (
    "no case is scored there: none has an expected source of relevance >= 1 (or, for answer_in_context, a gold answer)"
)
"""What an ``n/a`` of the summary's tables means."""


def _not_scored(missing: bool) -> list[str]:
    """The line under a table that says what its ``n/a`` cells mean (none without one)."""
    return [f"  n/a: {NOT_SCORED}"] if missing else []


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


def fold_assignment(cases: int, folds: int, seed: int) -> list[npt.NDArray[np.int64]]:
    """The held-out cases of each fold: a seeded permutation dealt round-robin (deterministic).

    >>> [list(f) for f in fold_assignment(5, 2, seed=0)] == [list(f) for f in fold_assignment(5, 2, seed=0)]
    True
    """
    order = np.random.default_rng(seed).permutation(cases)
    return [np.sort(order[fold::folds]).astype(np.int64) for fold in range(folds)]


class _Scorer:
    """Every metric per case of a selection, at each budget (answer-in-context with answers)."""

    def __init__(self, evalset: EvalSet, prepared: Sequence[Prepared], answers: Answers | None) -> None:
        self.evalset = evalset
        self.prepared = prepared
        self.answers = answers
        self.items = (
            [normalized_items(answers, p.fused) for p in prepared] if answers is not None else [None] * len(prepared)
        )

    @property
    def metrics(self) -> tuple[str, ...]:
        return (*METRICS, ANSWER_METRIC) if self.answers is not None else METRICS

    def policy(self, policy: SelectionPolicy) -> dict[str, Scores]:
        """``{metric: budgets x cases}`` of ``policy``."""
        rows: dict[str, list[list[float]]] = {metric: [] for metric in self.metrics}
        for p, items in zip(self.prepared, self.items, strict=True):
            admitted = policy_admitted(p, policy)
            for metric, values in _recall_scores(self.evalset, admitted_hits(p, admitted)).items():
                rows[metric].append(values)
            if self.answers is not None and items is not None:
                rows[ANSWER_METRIC].append(_floats(items_in_context(self.answers, admitted, items)))
        return {metric: np.array(values, dtype=np.float64) for metric, values in rows.items()}

    def baseline(self, lanes: CaseLanes, budgets: Sequence[Budget]) -> dict[str, Scores]:
        """``{metric: budgets x cases}`` of the fixed-limit baseline."""
        rows: dict[str, list[list[float]]] = {metric: [] for metric in self.metrics}
        for budget in budgets:
            hits, texts = baseline_served(self.evalset, lanes, budget.limits)
            for metric, values in _recall_scores(self.evalset, hits).items():
                rows[metric].append(values)
            if self.answers is not None:
                rows[ANSWER_METRIC].append(_floats(in_context(self.answers, texts)))
        return {metric: np.array(values, dtype=np.float64) for metric, values in rows.items()}


def _weighted(tables: Mapping[str, Scores], weights: Mapping[str, float]) -> Scores:
    """The objective: the weighted sum (NaN where a weighted metric is NaN)."""
    total: Scores | None = None
    for metric, weight in weights.items():
        part = weight * tables[metric]
        total = part if total is None else total + part
    assert total is not None
    return total


def tune(
    evalset: EvalSet,
    lanes: CaseLanes,
    budgets: Sequence[Budget],
    *,
    folds: int = 5,
    seed: int = 0,
    metric: str | None = None,
    objective: str | Mapping[str, float] = "recall_at_k",
    lags: Sequence[int | None] = DEFAULT_LAGS,
    shares: Sequence[float | None] = DEFAULT_SHARES,
    margin: float = DEFAULT_MARGIN,
    answers: Answers | None = None,
    progress: Progress | None = None,
) -> TuneResult:
    """Search the quality policy's settings on ``evalset`` and decide whether to adopt the
    candidate (see the module docstring). ``metric`` is the older name of a one-metric
    ``objective``; ``answers`` adds answer-in-context to the metrics (and to what the objective
    may weigh); ``progress`` is told of the settings scored (nearly all of the time), then the folds.

    Raises :class:`~assembler.evaluate.errors.EvaluateError` when the objective is unknown,
    ``folds`` is below 2 or above the number of cases, no budget is given, or the margin is negative.
    """
    if metric is not None:
        objective = metric
    weights = parse_objective(objective, answers=answers is not None) if isinstance(objective, str) else dict(objective)
    if not budgets:
        raise EvaluateError("budgets must name at least one budget")
    if not 2 <= folds <= len(evalset.cases):
        raise EvaluateError(f"folds must be from 2 to the number of cases ({len(evalset.cases)}), got {folds}")
    if not margin >= 0:
        raise EvaluateError(f"margin must be at least 0, got {margin}")
    prepared: list[Prepared] = [prepare(evalset, lanes, budget.limits) for budget in budgets]
    fact_lanes = sorted(
        set(prepared[0].fused.filter(kind="association")["lane"].unique().to_list()) & set(LANES_WITH_FACTS)
    )
    settings = grid(lags, shares, fact_lanes=fact_lanes)
    scorer = _Scorer(evalset, prepared, answers)
    scored = counter(progress, "settings scored", len(settings))
    by_setting = []
    for setting in settings:
        by_setting.append(scorer.policy(setting))
        scored(1)
    per_metric = {name: np.stack([tables[name] for tables in by_setting]) for name in scorer.metrics}
    fixed_metric = {
        "quality": scorer.policy(QualityPolicy()),
        "contract": scorer.policy(CONTRACT),
        "baseline": scorer.baseline(lanes, budgets),
    }
    scores = _weighted(per_metric, weights)  # settings x budgets x cases
    fixed = {mode: _weighted(tables, weights) for mode, tables in fixed_metric.items()}
    everyone = np.arange(len(evalset.cases), dtype=np.int64)
    chosen = _choose(scores, fixed["baseline"], everyone, 0.0)
    results: list[FoldResult] = []
    pooled = np.full((len(budgets), len(evalset.cases)), np.nan)
    pooled_metric = {name: np.full((len(budgets), len(evalset.cases)), np.nan) for name in scorer.metrics}
    folded = counter(progress, "folds", folds)
    for fold, held in enumerate(fold_assignment(len(evalset.cases), folds, seed)):
        train = np.setdiff1d(everyone, held)
        pick = _choose(scores, fixed["baseline"], train, 0.0)
        pooled[:, held] = scores[pick][:, held]
        for name in scorer.metrics:
            pooled_metric[name][:, held] = per_metric[name][pick][:, held]
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
        folded(1)
    label = objective_label(weights)
    guarded = {label: (pooled, fixed["baseline"])}
    if len(weights) > 1:
        guarded |= {name: (pooled_metric[name], fixed_metric["baseline"][name]) for name in weights}
    decision = decide(
        chosen == 0,
        pooled,
        fixed["quality"],
        guarded,
        [budget.label for budget in budgets],
        margin,
        np.random.default_rng([seed, 1]),
    )
    written = chosen if decision.adopted else 0
    rng = np.random.default_rng(seed)
    differences = {
        f"tuned-{other}": [_bootstrap(pooled[b] - fixed[other][b], rng) for b in range(len(budgets))]
        for other in ("baseline", "quality", "contract")
    }
    every = {"tuned": scores[written], "candidate": scores[chosen], **fixed}
    by_metric = {
        "all_cases": {
            name: {
                mode: _means(table, everyone)
                for mode, table in {
                    "tuned": per_metric[name][written],
                    **{m: t[name] for m, t in fixed_metric.items()},
                }.items()
            }
            for name in scorer.metrics
        },
        "held_out": {
            name: {
                mode: _means(table, everyone)
                for mode, table in {
                    "tuned": pooled_metric[name],
                    **{m: t[name] for m, t in fixed_metric.items()},
                }.items()
            }
            for name in scorer.metrics
        },
    }
    return TuneResult(
        setting=settings[written],
        metric=label,
        budgets=list(budgets),
        folds=results,
        seed=seed,
        settings_searched=len(settings),
        train_all={mode: _means(table, everyone) for mode, table in every.items()},
        held_out={mode: _means(table, everyone) for mode, table in {"tuned": pooled, **fixed}.items()},
        differences=differences,
        lags=list(lags),
        shares=list(shares),
        margin=margin,
        candidate=settings[chosen],
        decision=decision,
        objective=weights,
        by_metric=by_metric,
    )
