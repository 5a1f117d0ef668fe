"""The thresholds file and the gate (spec section 4).

Validation collects every problem of the file and reports them together in one message (exit 2;
the first :data:`MAX_PROBLEMS`, then how many more), except a JSON syntax error or a wrong stamp,
which are reported alone. The gate checks aggregate bounds (a metric without samples is a
violation), then case bounds (a case without the value is skipped, not violated), then the corpus
stability rule.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from assembler.contract.jsoninput import read_json
from assembler.contract.wire import OUT_OF_RANGE_RULE, ShapeError
from assembler.errors import shown, shown_path
from assembler.evaluate.artifact import case_value, scalar
from assembler.evaluate.catalog import CASE_SCOPED, DEFINITIONS, METRICS
from assembler.evaluate.errors import EvaluateError

__all__ = ["Bound", "Thresholds", "evaluate_gate", "load_thresholds"]

_TOP_KEYS = ("taguru_evaluate_thresholds", "aggregate", "cases", "allow_unstable_corpus")
_CASES_KEYS = ("default", "overrides")
_BOUND_KEYS = ("min", "max")
MAX_PROBLEMS = 10
"""At most this many problems of a thresholds file in its one message (then ``... and N more``)."""


@dataclass(frozen=True)
class Bound:
    """``min`` and/or ``max`` (inclusive)."""

    min: float | None = None
    max: float | None = None


@dataclass(frozen=True)
class Thresholds:
    """A validated thresholds file and the SHA-256 of its raw bytes."""

    path: str
    sha256: str
    aggregate: dict[str, Bound] = field(default_factory=dict)
    default: dict[str, Bound] = field(default_factory=dict)
    overrides: dict[str, dict[str, Bound]] = field(default_factory=dict)
    allow_unstable_corpus: bool = False


def _num(value: float) -> str:
    """A number as Rust's ``Display`` writes an f64 (``1`` not ``1.0``)."""
    text = repr(value)
    return text[:-2] if text.endswith(".0") else text


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    return {
        bool: "a boolean",
        int: "a number",
        float: "a number",
        str: "a string",
        list: "an array",
        dict: "an object",
    }[type(value)]


def _known_keys(value: dict[str, Any], known: Sequence[str], where: str, problems: list[str]) -> None:
    for key in value:
        if key not in known:
            problems.append(f"{where}unknown field '{shown(key)}' (known: {', '.join(known)})")


def _bounds(value: Any, scope: str, allowed: Sequence[str], what: str, problems: list[str]) -> dict[str, Bound]:
    """A ``{metric: Bound}`` map; problems are appended, good entries returned."""
    if not isinstance(value, dict):
        problems.append(f"{scope}: must be an object of metric bounds, got {_kind(value)}")
        return {}
    out: dict[str, Bound] = {}
    for metric, raw in value.items():
        if metric not in allowed:
            problems.append(f"{scope}: unknown {what}metric name '{shown(metric)}'")
            continue
        bound = _bound(raw, f"{scope}: '{metric}'", problems)
        if bound is not None:
            out[metric] = bound
    return out


def _bound(raw: Any, where: str, problems: list[str]) -> Bound | None:
    if not isinstance(raw, dict):
        problems.append(f"{where}: must be an object with min and/or max, got {_kind(raw)}")
        return None
    before = len(problems)
    _known_keys(raw, _BOUND_KEYS, f"{where}: ", problems)
    limits: dict[str, float | None] = {}
    for key in _BOUND_KEYS:
        value = raw.get(key)
        if value is None:
            limits[key] = None
        elif isinstance(value, bool) or not isinstance(value, (int, float)):
            problems.append(f"{where}: {key} must be a number, got {_kind(value)}")
            limits[key] = None
        else:
            try:
                number = float(value)
            except OverflowError:  # an integer past a float's range
                problems.append(f"{where}: {key}: {OUT_OF_RANGE_RULE}")
                limits[key] = None
                continue
            limits[key] = number
            if not math.isfinite(number):
                problems.append(f"{where}: {key} {_num(number)} must be finite")
    low, high = limits["min"], limits["max"]
    if len(problems) == before:
        if low is None and high is None:
            problems.append(f"{where}: needs at least one of min/max")
        elif low is not None and high is not None and low > high:
            problems.append(f"{where}: min {_num(low)} must be <= max {_num(high)}")
    return Bound(low, high) if len(problems) == before else None


def load_thresholds(path: str, case_ids: Sequence[str]) -> Thresholds:
    """Read and validate; raise :class:`EvaluateError` (exit 2) naming every problem."""
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise EvaluateError(f"cannot read {shown_path(path)}: {exc.strerror or exc}") from None
    try:
        value = read_json(data.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise EvaluateError(f"{shown_path(path)}: not valid UTF-8 (byte {exc.start})") from None
    except ShapeError as exc:  # the strict JSON reader: syntax, numbers, depth, repeated keys, lone surrogates
        raise EvaluateError(f"{shown_path(path)}: {shown(str(exc), limit=None)}") from None
    if not isinstance(value, dict):
        raise EvaluateError(f"{shown_path(path)}: must be a JSON object, got {_kind(value)}")
    stamp = value.get("taguru_evaluate_thresholds")
    if stamp != 1 or isinstance(stamp, bool):
        got = "nothing (the key is missing)" if "taguru_evaluate_thresholds" not in value else shown(json.dumps(stamp))
        raise EvaluateError(f"{shown_path(path)}: taguru_evaluate_thresholds must be 1, got {got}")
    problems: list[str] = []
    _known_keys(value, _TOP_KEYS, "", problems)
    aggregate = _bounds(value.get("aggregate", {}), "aggregate", METRICS, "", problems)
    default: dict[str, Bound] = {}
    overrides: dict[str, dict[str, Bound]] = {}
    cases = value.get("cases", {})
    if not isinstance(cases, dict):
        problems.append(f"cases: must be an object with default and/or overrides, got {_kind(cases)}")
    else:
        _known_keys(cases, _CASES_KEYS, "cases: ", problems)
        default = _bounds(cases.get("default", {}), "cases.default", CASE_SCOPED, "(or not case-scoped) ", problems)
        raw_overrides = cases.get("overrides", {})
        if not isinstance(raw_overrides, dict):
            problems.append(f"cases.overrides: must be an object keyed by case_id, got {_kind(raw_overrides)}")
        else:
            known_ids = set(case_ids)
            for case_id, bounds in raw_overrides.items():
                if case_id not in known_ids:
                    problems.append(f"cases.overrides: unknown case_id '{shown(case_id)}'")
                    continue
                overrides[case_id] = _bounds(
                    bounds, f"cases.overrides.{shown(case_id)}", CASE_SCOPED, "(or not case-scoped) ", problems
                )
    allow = value.get("allow_unstable_corpus", False)
    if not isinstance(allow, bool):
        problems.append(f"allow_unstable_corpus: must be a boolean, got {_kind(allow)}")
        allow = False
    if problems:
        more = [f"... and {len(problems) - MAX_PROBLEMS} more"] if len(problems) > MAX_PROBLEMS else []
        raise EvaluateError(f"{shown_path(path)}: {'; '.join([*problems[:MAX_PROBLEMS], *more])}")
    return Thresholds(
        path=path,
        sha256=hashlib.sha256(data).hexdigest(),
        aggregate=aggregate,
        default=default,
        overrides=overrides,
        allow_unstable_corpus=allow,
    )


def _check(actual: float, bound: Bound) -> tuple[str, float, str] | None:
    """``(bound, threshold, reason)`` of a violation, or None."""
    if bound.min is not None and actual < bound.min:
        return "min", bound.min, f"{actual:.6f} < min {bound.min:.6f}"
    if bound.max is not None and actual > bound.max:
        return "max", bound.max, f"{actual:.6f} > max {bound.max:.6f}"
    return None


def evaluate_gate(thresholds: Thresholds, artifact: Mapping[str, Any]) -> dict[str, Any]:
    """The ``thresholds`` report of the artifact: ``{sha256, passed, allow_unstable_corpus, ...}``."""
    violations: list[dict[str, Any]] = []
    skipped: list[str] = []
    metrics = artifact.get("metrics", {})
    for metric in sorted(thresholds.aggregate):
        bound = thresholds.aggregate[metric]
        value = metrics.get(metric, {})
        actual = scalar(value, DEFINITIONS[metric].statistic)
        if actual is None:
            reason = "no samples for this metric (n=0)"
            if isinstance(value, Mapping) and value.get("absent"):
                reason += f": {value['absent']}"
            violations.append({"scope": "aggregate", "metric": metric, "actual": None, "reason": reason})
            continue
        found = _check(actual, bound)
        if found is not None:
            side, threshold, reason = found
            violations.append(
                {
                    "scope": "aggregate",
                    "metric": metric,
                    "bound": side,
                    "threshold": threshold,
                    "actual": actual,
                    "reason": reason,
                }
            )
    for block in artifact.get("cases", []):
        case_id = block.get("case_id")
        merged = {**thresholds.default, **thresholds.overrides.get(case_id, {})}
        for metric in sorted(merged):
            actual = case_value(block, metric)
            if actual is None:
                skipped.append(
                    f"case '{shown(str(case_id))}': '{metric}' not applicable — the case did not declare the matching "
                    "expectation, or its lane did not complete"
                )
                continue
            found = _check(actual, merged[metric])
            if found is not None:
                side, threshold, reason = found
                violations.append(
                    {
                        "scope": "case",
                        "case_id": case_id,
                        "metric": metric,
                        "bound": side,
                        "threshold": threshold,
                        "actual": actual,
                        "reason": reason,
                    }
                )
    corpus = artifact.get("corpus", {})
    if not corpus.get("stable", True) and not thresholds.allow_unstable_corpus:
        violations.append(
            {
                "scope": "corpus",
                "metric": "corpus.stable",
                "actual": None,
                "reason": "the corpus changed during the run; set allow_unstable_corpus to accept that",
            }
        )
    report: dict[str, Any] = {
        "sha256": thresholds.sha256,
        "passed": not violations,
        "allow_unstable_corpus": thresholds.allow_unstable_corpus,
    }
    if violations:
        report["violations"] = violations
    if skipped:
        report["skipped"] = skipped
    return report
