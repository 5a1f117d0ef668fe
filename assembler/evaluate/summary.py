"""The terminal summary of a run and of its threshold gate (read from the artifact only; ids and
file names escaped and shortened as messages show them)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from assembler.errors import counted, shown, shown_path

__all__ = ["duration", "run_summary", "threshold_summary"]

MAX_CASE_VIOLATIONS = 10


def duration(ms: float) -> str:
    """A wall time for a reader: ``57.3 ms`` below a second, ``1.23 s`` from one.

    >>> duration(57.34), duration(1234.0)
    ('57.3 ms', '1.23 s')
    """
    return f"{ms:.1f} ms" if ms < 1000 else f"{ms / 1000:.2f} s"


def _mean(metrics: Mapping[str, Any], name: str) -> float | None:
    value = metrics.get(name, {}).get("mean")
    return None if value is None else float(value)


def _fmt(value: float | None, digits: int = 3) -> str:
    return "n/a" if value is None else f"{value:.{digits}f}"


def run_summary(artifact: Mapping[str, Any]) -> list[str]:
    """What a run found, a line per lane or family."""
    inputs, metrics, cases = artifact["inputs"], artifact["metrics"], artifact["cases"]
    mode = inputs["mode"]
    policy = f", policy {shown(inputs['policy'])}" if "policy" in inputs else ""
    budget = inputs.get("budget")
    budget_text = (
        "no budget (untruncated baseline)"
        if budget is None
        else f"budget max_items={budget['max_items']} max_bytes={budget['max_bytes']} max_tokens={budget['max_tokens']}"
    )
    structural = sum(1 for case in cases if "structural" in case)
    lines = [
        f"assembler evaluate: {shown_path(inputs['eval']['path'])} over {shown_path(inputs['lanes']['path'])} — "
        f"{counted(len(cases), 'case')}, "
        f"mode {mode}{policy}, {budget_text}",
        f"passage: {len(cases)} ok, 0 failed; structural lane ran on {counted(structural, 'case')}",
    ]
    recall_n = metrics["recall.recall_at_k"]["n"]
    if recall_n:
        lines.append(
            f"recall over {counted(recall_n, 'case')}: recall@k {_fmt(_mean(metrics, 'recall.recall_at_k'))}, "
            f"MRR {_fmt(_mean(metrics, 'recall.mrr'))}, nDCG {_fmt(_mean(metrics, 'recall.ndcg'))}"
        )
    cross = metrics["lanes.both"]
    if cross["n"]:
        parts = ", ".join(
            f"{name} {metrics[f'lanes.{name}']['numerator']}"
            for name in ("structural_hit", "passage_hit", "both", "neither")
        )
        lines.append(f"lanes over {counted(cross['n'], 'case')}: {parts}")
    for name in ("concepts", "labels", "associations"):
        value = metrics[f"coverage.{name}"]
        if value["n"]:
            lines.append(f"coverage.{name} over {counted(value['n'], 'case')}: mean {_fmt(value['mean'])}")
    citations = metrics["citations.recall"]
    if citations["n"]:
        validity = metrics["citations.locator_validity"]
        checked = (
            f"mean locator validity {_fmt(validity['mean'])}, resolved {_fmt(metrics['citations.resolved']['value'])}"
            if validity["n"]
            else "locator validity needs --citations FILE or a live server"
        )
        lines.append(
            f"citations over {counted(citations['n'], 'case')}: mean recall {_fmt(citations['mean'])}, {checked}"
        )
    if budget is not None:
        items, size, tokens = (metrics[f"budget.{k}_used"] for k in ("items", "bytes", "tokens"))
        rate = metrics["budget.omitted_rate"]["value"]
        lines.append(
            f"budget over {counted(items['n'], 'case')}: mean {_fmt(items['mean'], 1)} items / {_fmt(size['mean'], 1)} "
            f"bytes / {_fmt(tokens['mean'], 1)} tokens used, budget-omitted rate {_fmt(rate)}"
        )
    diversity = metrics["diversity.sources"]
    if diversity["n"]:
        lines.append(
            f"diversity over {counted(diversity['n'], 'case')}: mean {_fmt(diversity['mean'], 1)} distinct sources "
            "in admitted evidence"
        )
    evidence = metrics["latency.evidence_ms"]
    if evidence["n"]:
        lines.append(
            f"assembly: {duration(evidence['sum'])} for {counted(evidence['n'], 'case')} in one batch "
            "(each case's latency_ms in the artifact is this time divided evenly)"
        )
    answers = artifact.get("answers", {}).get("metrics", {}).get("answers.in_context")
    if answers is not None and answers["n"]:
        lines.append(
            f"answer-in-context over {counted(answers['n'], 'case')}: mean {_fmt(answers['mean'])} "
            "(a normalized gold answer in the served evidence text)"
        )
    absent = sorted(name for name, value in metrics.items() if "absent" in value)
    if absent:
        lines.append(f"absent (no samples offline, reason in the artifact): {', '.join(absent)}")
    return lines


def threshold_summary(report: Mapping[str, Any]) -> list[str]:
    """``thresholds: PASS`` or ``FAIL`` with the violations (case ones capped at ten)."""
    sha = report["sha256"][:12]
    violations = report.get("violations", [])
    if report["passed"]:
        lines = [f"thresholds: PASS (sha256 {sha}…)"]
    else:
        lines = [f"thresholds: FAIL — {counted(len(violations), 'violation')} (sha256 {sha}…)"]
    case_violations = [v for v in violations if v["scope"] == "case"]
    for violation in violations:
        if violation["scope"] != "case":
            lines.append(f"  [{violation['scope']}] {violation['metric']}: {violation['reason']}")
    for violation in case_violations[:MAX_CASE_VIOLATIONS]:
        lines.append(f"  [case {shown(violation['case_id'])}] {violation['metric']}: {violation['reason']}")
    if len(case_violations) > MAX_CASE_VIOLATIONS:
        lines.append(f"  ... and {counted(len(case_violations) - MAX_CASE_VIOLATIONS, 'more case-scoped violation')}")
    skipped = report.get("skipped", [])
    if skipped:
        lines.append(f"  {counted(len(skipped), 'case threshold')} skipped (not applicable)")
    return lines
