"""``evaluate compare BASE.json HEAD.json``: case classification, aggregate deltas, mismatch warnings.

Both artifacts are read tolerantly (every field optional). Warnings never change the outcome; the
one that matters most is ``budget differs``: recall or diversity compared across different budgets
is not an equal-budget comparison. Modes and policies are not compared (a baseline-vs-assembly or
policy-vs-policy pair at one budget is the intended use); both are printed.

Significance: per case-scoped metric, the cases both artifacts score are paired and the mean
difference ``HEAD - BASE`` gets a 95 % paired bootstrap interval and a paired randomization
(sign-flip) p-value (:mod:`assembler.evaluate.significance`, seeded); the differences whose
Holm-Bonferroni adjusted p-value over every metric tested is at most 0.05 are marked. Answer-in-context
(the artifacts' additive ``answers`` block) is compared, classified and tested like the others
when both artifacts have it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from assembler.contract.jsoninput import read_json
from assembler.contract.wire import ShapeError
from assembler.errors import counted, shown, shown_path
from assembler.evaluate.answers import METRIC as ANSWER_METRIC
from assembler.evaluate.artifact import case_value, generated_at, scalar
from assembler.evaluate.catalog import COMPARISON_METRICS
from assembler.evaluate.errors import EvaluateError
from assembler.evaluate.significance import ALPHA, holm, paired_test

__all__ = ["EPSILON", "Comparison", "Report", "compare_reports", "describe_budget", "load_report"]

EPSILON = 1e-9
RESAMPLES = 10_000
"""Default resamples of the bootstrap and the randomization test (``--resamples``)."""
EVALUATION_VERSION = 1
_STATISTICS = ("distribution", "ratio", "count")
NO_VALUE = "n/a: no value on that side: the metric is absent there (metrics.NAME.absent says why) or unreadable"


@dataclass(frozen=True)
class Report:
    """One artifact as compare reads it (``side`` is ``BASE`` or ``HEAD``)."""

    side: str
    path: str
    data: dict[str, Any]

    def get(self, *keys: str) -> Any:
        """A nested field, or None when any step is missing or not an object."""
        value: Any = self.data
        for key in keys:
            if not isinstance(value, Mapping):
                return None
            value = value.get(key)
        return value

    def identity(self) -> dict[str, Any]:
        """The ``base``/``head`` identity of the changes header."""
        return {
            "path": self.path,
            "context": self.get("inputs", "context"),
            "taguru_evaluation": self.get("taguru_evaluation"),
            "generated_at": self.get("generated_at"),
            "corpus_revision_after": self.get("corpus", "revision_after"),
            "corpus_stable": self.get("corpus", "stable"),
            "thresholds_sha256": self.get("thresholds", "sha256"),
            "mode": self.get("inputs", "mode"),
            "policy": self.get("inputs", "policy"),
            "budget": self.get("inputs", "budget"),
        }


NOT_AN_ARTIFACT = "is not an evaluation artifact (the JSON object 'assembler evaluate --out' writes)"
"""What a compare error says of a file that is not what ``evaluate --out`` writes."""
_OTHER_FILES = {
    "taguru_eval": "an eval file, as --eval reads",
    "taguru_evaluation_changes": "a changes file, as 'evaluate compare --out' writes",
    "taguru_evaluation_sweep": "a sweep table; its folder's runs/ holds the artifacts",
    "taguru_evaluate_thresholds": "a thresholds file, as --thresholds reads",
    "assembler_policy_config": "a policy config, as 'evaluate tune' writes",
}
"""The stamps of the other files the evaluate commands read or write, and what each file is."""


def _kind(value: Any) -> str:
    return {dict: "an object", list: "an array", str: "a string", bool: "a boolean"}.get(
        type(value), "null" if value is None else "a number"
    )


def _json_lines(text: str) -> bool:
    """Whether ``text`` is JSON Lines: its first line is one JSON object on its own."""
    try:
        return isinstance(read_json(text.lstrip().split("\n", 1)[0]), dict)
    except ShapeError:
        return False


def load_report(path: str, side: str) -> Report:
    """Read an artifact; exit-2 errors name the side and the path, and a file that is not an
    artifact (no ``taguru_evaluation`` stamp, JSON Lines, not an object) is said to be one."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise EvaluateError(f"{side} reading {shown_path(path)}: {reason}") from None
    named = f"{side} {shown_path(path)}"
    try:
        data = read_json(text)  # the strict JSON reader: a ShapeError names the field and the rule
    except ShapeError as exc:
        if _json_lines(text):
            raise EvaluateError(f"{named} {NOT_AN_ARTIFACT}: it is JSON Lines (one object per line)") from None
        raise EvaluateError(f"{named}: malformed evaluation.json: {shown(str(exc), limit=None)}") from None
    if not isinstance(data, dict):
        raise EvaluateError(f"{named} {NOT_AN_ARTIFACT}: the top level is {_kind(data)}")
    if "taguru_evaluation" not in data:
        other = next((what for stamp, what in _OTHER_FILES.items() if stamp in data), None)
        found = f" (it is {other})" if other is not None else ""
        raise EvaluateError(f"{named} {NOT_AN_ARTIFACT}: it has no field taguru_evaluation{found}")
    stamp = data["taguru_evaluation"]
    if isinstance(stamp, bool) or not isinstance(stamp, int):
        raise EvaluateError(
            f"{named} {NOT_AN_ARTIFACT}: field taguru_evaluation must be the integer {EVALUATION_VERSION}, "
            f"got {_kind(stamp)} ({shown(json.dumps(stamp))})"
        )
    if not 1 <= stamp <= EVALUATION_VERSION:
        raise EvaluateError(
            f"{named}: field taguru_evaluation is {shown(str(stamp))}: this assembler reads evaluation artifacts of "
            f"version {EVALUATION_VERSION} only"
        )
    return Report(side, path, data)


def describe_budget(budget: Any) -> str:
    """``max_items=A max_bytes=B max_tokens=C`` or ``none (untruncated baseline)``."""
    if not isinstance(budget, Mapping):
        return "none (untruncated baseline)"
    return " ".join(f"{key}={shown(str(budget.get(key)))}" for key in ("max_items", "max_bytes", "max_tokens"))


def _budget_key(budget: Any) -> tuple[Any, ...] | None:
    if not isinstance(budget, Mapping):
        return None
    return tuple(budget.get(key) for key in ("max_items", "max_bytes", "max_tokens"))


def _short_sha(value: Any) -> str:
    return value[:12] if isinstance(value, str) else "none"


@dataclass
class Comparison:
    """The outcome of a comparison: counts, records, aggregate diffs, warnings."""

    base: Report
    head: Report
    counts: dict[str, int] = field(default_factory=dict)
    records: list[dict[str, Any]] = field(default_factory=list)
    aggregate: list[dict[str, Any]] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    significance: dict[str, Any] | None = None

    def header(self) -> dict[str, Any]:
        """Line 1 of ``changes.jsonl``."""
        header: dict[str, Any] = {
            "kind": "header",
            "taguru_evaluation_changes": 1,
            "generated_at": generated_at(),
            "base": self.base.identity(),
            "head": self.head.identity(),
            "counts": self.counts,
            "metrics": self.aggregate,
        }
        if self.significance is not None:
            header["significance"] = self.significance
        if self.warnings:
            header["warnings"] = self.warnings
        return header

    def lines(self) -> list[str]:
        """Every line of ``changes.jsonl`` (compact JSON, without newlines)."""
        return [_compact(self.header()), *(_compact(record) for record in self.records)]

    def summary(self, out: str | None) -> list[str]:
        """The terminal summary; its last line names the changes file ``out``, or, without one,
        says how to write it."""
        c = self.counts
        lines = [
            f"evaluate compare: {counted(c['cases_base'], 'case')} in BASE, {c['cases_head']} in HEAD — "
            f"{c['improved']} improved, {c['regressed']} regressed, {c['added']} added, {c['removed']} removed, "
            f"{c['unchanged']} unchanged"
        ]
        for report in (self.base, self.head):
            identity = report.identity()
            policy = identity["policy"] if identity["mode"] == "assembly" else "-"
            lines.append(
                f"{report.side}: {shown_path(report.path)}: mode {shown(str(identity['mode'] or 'unknown'))}, "
                f"policy {shown(str(policy or 'unknown'))}, "
                f"budget {describe_budget(identity['budget'])}"
            )
        lines.append("aggregate:")
        missing = any(value is None for entry in self.aggregate for value in entry["sides"].values())
        for entry in self.aggregate:
            base, head = entry["sides"]["base"], entry["sides"]["head"]
            left = "n/a" if base is None else f"{base:.3f}"
            right = "n/a" if head is None else f"{head:.3f}"
            delta = "" if entry["delta"] is None else f" (Δ {entry['delta']:+.3f})"
            lines.append(f"  {shown(entry['metric'])}: {left} -> {right}{delta}")
        if missing:
            lines.append(f"  {NO_VALUE}")
        lines.extend(_significance_lines(self.significance))
        regressed = [record for record in self.records if record["kind"] == "regressed"]
        for record in regressed[:10]:
            parts = ", ".join(
                f"{m['metric']} {m['delta']:+.3f}" for m in record["metrics"] if m["direction"] == "regressed"
            )
            lines.append(f"regressed: {shown(record['case_id'])} ({parts})")
        if len(regressed) > 10:
            lines.append(f"... and {counted(len(regressed) - 10, 'more regressed case')}")
        if out is None:
            lines.append("per-case changes not written: give --out FILE to write them (JSON Lines)")
        else:
            lines.append(f"wrote {shown_path(out)}")
        return lines


def _significance_lines(block: Mapping[str, Any] | None) -> list[str]:
    if not block or not block["tests"]:
        return []
    lines = [
        f"significance (paired over cases; 95% bootstrap interval; sign-flip p, Holm-corrected over "
        f"{counted(len(block['tests']), 'metric')}; seed {block['seed']}, {block['resamples']} resamples; "
        "* = survives):"
    ]
    for test in block["tests"]:
        low, high = test["interval"]
        mark = " *" if test["significant"] else ""
        lines.append(
            f"  {test['metric']}: {test['difference']:+.4f} [{low:+.4f}, {high:+.4f}] "
            f"over {counted(test['cases'], 'case')}, "
            f"p {test['p_value']:.4f}, Holm {test['p_holm']:.4f}{mark}"
        )
    return lines


def _compact(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _mismatch_warnings(base: Report, head: Report) -> list[str]:
    warnings = []
    if base.get("inputs", "context") != head.get("inputs", "context"):
        warnings.append(
            f"context differs: BASE '{shown(str(base.get('inputs', 'context')))}' "
            f"vs HEAD '{shown(str(head.get('inputs', 'context')))}'"
        )
    if base.get("corpus", "revision_after") != head.get("corpus", "revision_after"):
        warnings.append("corpus.revision_after differs between BASE and HEAD")
    for report in (base, head):
        if report.get("corpus", "stable") is False:
            warnings.append(f"{shown_path(report.path)}: corpus.stable is false — a write landed mid-run")
    base_sha, head_sha = base.get("thresholds", "sha256"), head.get("thresholds", "sha256")
    if base_sha != head_sha:
        warnings.append(f"thresholds file identity differs: BASE {_short_sha(base_sha)} vs HEAD {_short_sha(head_sha)}")
    base_stamp, head_stamp = base.get("taguru_evaluation"), head.get("taguru_evaluation")
    if base_stamp != head_stamp:
        warnings.append(
            f"taguru_evaluation stamp differs: BASE {shown(str(base_stamp))} vs HEAD {shown(str(head_stamp))}"
        )
    base_budget, head_budget = base.get("inputs", "budget"), head.get("inputs", "budget")
    if _budget_key(base_budget) != _budget_key(head_budget):
        warnings.append(
            f"budget differs: BASE {describe_budget(base_budget)} vs HEAD {describe_budget(head_budget)} — "
            "not an equal-budget comparison"
        )
    return warnings


def _index(report: Report, warnings: list[str]) -> dict[str, Mapping[str, Any]]:
    cases = report.get("cases")
    index: dict[str, Mapping[str, Any]] = {}
    for block in cases if isinstance(cases, list) else []:
        if not isinstance(block, Mapping) or not isinstance(block.get("case_id"), str):
            continue
        case_id = block["case_id"]
        if case_id in index:
            warnings.append(f"{report.side}: duplicate case_id '{shown(case_id)}' — using the last occurrence")
        index[case_id] = block
    return index


def _entry(metric: str, base: float | None, head: float | None, direction: str) -> dict[str, Any]:
    delta = None if base is None or head is None else head - base
    return {"metric": metric, "sides": {"base": base, "head": head}, "delta": delta, "direction": direction}


def _classify(
    base_cases: Mapping[str, Mapping[str, Any]],
    head_cases: Mapping[str, Mapping[str, Any]],
    comparison: Comparison,
    names: Sequence[str] = COMPARISON_METRICS,
) -> None:
    counts = dict.fromkeys(("improved", "regressed", "added", "removed", "unchanged"), 0)
    for case_id in sorted(set(base_cases) | set(head_cases), key=lambda s: s.encode("utf-8")):
        base, head = base_cases.get(case_id), head_cases.get(case_id)
        if base is None or head is None:
            kind = "added" if base is None else "removed"
            block = head if head is not None else base
            assert block is not None
            entries = []
            for metric in names:
                value = case_value(block, metric)
                if value is not None:
                    entries.append(
                        _entry(metric, None, value, "not_comparable")
                        if kind == "added"
                        else _entry(metric, value, None, "not_comparable")
                    )
            counts[kind] += 1
            comparison.records.append({"kind": kind, "case_id": case_id, "metrics": entries})
            continue
        changed = []
        for metric in names:
            old, new = case_value(base, metric), case_value(head, metric)
            if old is None and new is None:
                continue
            if old is None or new is None:
                comparison.warnings.append(
                    f"case '{shown(case_id)}': metric '{metric}' has a value on only one side — "
                    "excluded from classification"
                )
                continue
            delta = new - old
            if delta > EPSILON:
                changed.append(_entry(metric, old, new, "improved"))
            elif delta < -EPSILON:
                changed.append(_entry(metric, old, new, "regressed"))
        if any(entry["direction"] == "regressed" for entry in changed):
            kind = "regressed"
        elif changed:
            kind = "improved"
        else:
            counts["unchanged"] += 1
            continue
        counts[kind] += 1
        comparison.records.append({"kind": kind, "case_id": case_id, "metrics": changed})
    comparison.counts = {**counts, "cases_base": len(base_cases), "cases_head": len(head_cases)}


def _side_scalar(report: Report, metric: str, warnings: list[str]) -> tuple[float | None, str | None]:
    """``(scalar, statistic)`` of one side's aggregate metric, with warnings for what cannot be read."""
    metrics = report.get("metrics")
    if not isinstance(metrics, Mapping) or metric not in metrics:
        return None, None
    definition = report.get("definitions", metric)
    statistic = definition.get("statistic") if isinstance(definition, Mapping) else None
    if definition is None:
        warnings.append(
            f"{report.side}: metric '{shown(metric)}' has no definitions entry — skipped from the aggregate diff"
        )
        return None, None
    if statistic not in _STATISTICS:
        warnings.append(
            f"{report.side}: metric '{shown(metric)}' definitions names unknown statistic '{shown(str(statistic))}'"
        )
        return None, None
    value = metrics[metric]
    key = "mean" if statistic == "distribution" else "value"
    if not isinstance(value, Mapping) or key not in value or "n" not in value:
        warnings.append(
            f"{report.side}: metric '{shown(metric)}' value does not match its statistic '{statistic}' — skipped"
        )
        return None, statistic
    return scalar(value, str(statistic)), str(statistic)


def _answers_scalar(report: Report) -> float | None:
    """The mean answer-in-context of an artifact's ``answers`` block (None without one)."""
    return scalar(report.get("answers", "metrics", ANSWER_METRIC), "distribution")


def _aggregate(base: Report, head: Report, comparison: Comparison) -> None:
    names: set[str] = set()
    for report in (base, head):
        metrics = report.get("metrics")
        if isinstance(metrics, Mapping):
            names.update(name for name in metrics if isinstance(name, str))
    for report in (base, head):
        if isinstance(report.get("answers"), Mapping):
            names.add(ANSWER_METRIC)
    for metric in sorted(names):
        base_stat: str | None
        head_stat: str | None
        if metric == ANSWER_METRIC:
            old, new = _answers_scalar(base), _answers_scalar(head)
            base_stat = head_stat = "distribution"
        else:
            old, base_stat = _side_scalar(base, metric, comparison.warnings)
            new, head_stat = _side_scalar(head, metric, comparison.warnings)
        if old is None and new is None:
            continue
        comparison.aggregate.append(
            {
                "metric": metric,
                "statistic": head_stat or base_stat,
                "sides": {"base": old, "head": new},
                "delta": None if old is None or new is None else new - old,
            }
        )


def _compared_metrics(base: Report, head: Report, warnings: list[str]) -> list[str]:
    """The case-scoped metrics compared: the catalog's, and answer-in-context when both sides
    have an ``answers`` block (one warning when only one side has it)."""
    names = list(COMPARISON_METRICS)
    sides = [isinstance(report.get("answers"), Mapping) for report in (base, head)]
    if all(sides):
        names.append(ANSWER_METRIC)
    elif any(sides):
        only = "BASE" if sides[0] else "HEAD"
        warnings.append(f"{ANSWER_METRIC}: only {only} has an answers block (--answers) — not compared case by case")
    return names


def _significance(
    base_cases: Mapping[str, Mapping[str, Any]],
    head_cases: Mapping[str, Mapping[str, Any]],
    names: Sequence[str],
    resamples: int,
    seed: int,
    budgets: Mapping[str, Any],
) -> dict[str, Any]:
    """Paired tests per metric over the cases both sides score, Holm-corrected across them."""
    rng = np.random.default_rng(seed)
    shared = sorted(set(base_cases) & set(head_cases), key=lambda s: s.encode("utf-8"))
    tests: list[dict[str, Any]] = []
    for metric in names:
        pairs = [(case_value(base_cases[c], metric), case_value(head_cases[c], metric)) for c in shared]
        kept = [(old, new) for old, new in pairs if old is not None and new is not None]
        if not kept:
            continue
        old_values = np.array([old for old, _ in kept], dtype=np.float64)
        new_values = np.array([new for _, new in kept], dtype=np.float64)
        result = paired_test(old_values, new_values, resamples, rng)
        if result is None:
            continue
        tests.append(
            {
                "metric": metric,
                "cases": result.cases,
                "base_mean": float(old_values.mean()),
                "head_mean": float(new_values.mean()),
                "difference": result.mean,
                "interval": [result.low, result.high],
                "p_value": result.p_value,
            }
        )
    for test, adjusted in zip(tests, holm([test["p_value"] for test in tests]), strict=True):
        test["p_holm"] = adjusted
        test["significant"] = adjusted <= ALPHA
    return {
        "method": "paired over the cases both runs score: difference HEAD - BASE; 95% percentile bootstrap "
        "interval of its mean; two-sided sign-flip randomization p-value (exact when 2^cases <= resamples); "
        f"Holm-Bonferroni over the metrics tested, significant when the adjusted p <= {ALPHA}",
        "seed": seed,
        "resamples": resamples,
        "alpha": ALPHA,
        "budget": dict(budgets),
        "tests": tests,
    }


def compare_reports(base: Report, head: Report, *, resamples: int = RESAMPLES, seed: int = 0) -> Comparison:
    """Compare two loaded artifacts (``resamples`` and ``seed``: the significance tests)."""
    comparison = Comparison(base, head)
    comparison.warnings.extend(_mismatch_warnings(base, head))
    base_cases = _index(base, comparison.warnings)
    head_cases = _index(head, comparison.warnings)
    names = _compared_metrics(base, head, comparison.warnings)
    _classify(base_cases, head_cases, comparison, names)
    _aggregate(base, head, comparison)
    budgets = {"base": base.get("inputs", "budget"), "head": head.get("inputs", "budget")}
    comparison.significance = _significance(base_cases, head_cases, names, resamples, seed, budgets)
    return comparison


def compare_paths(base_path: str, head_path: str, *, resamples: int = RESAMPLES, seed: int = 0) -> Comparison:
    """Load both artifacts and compare them."""
    return compare_reports(
        load_report(base_path, "BASE"), load_report(head_path, "HEAD"), resamples=resamples, seed=seed
    )


MAX_WARNINGS = 20
"""At most this many warning lines on stderr (every warning is in the changes file's header)."""


def format_warnings(warnings: Sequence[str], written: bool = True) -> list[str]:
    """The stderr lines of the warnings: the first :data:`MAX_WARNINGS`, then how many more (and
    where they all are: the changes file's header, when one is ``written``)."""
    lines = [f"warning: {warning}" for warning in warnings[:MAX_WARNINGS]]
    if len(warnings) > MAX_WARNINGS:
        where = "all in the changes file's header" if written else "--out FILE writes them all into its header"
        lines.append(f"warning: ... and {len(warnings) - MAX_WARNINGS} more ({where})")
    return lines
