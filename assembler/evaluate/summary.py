"""The terminal summary of a run and of its threshold gate (read from the artifact only; ids and
file names escaped and shortened as messages show them)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from assembler.errors import shown, shown_path

__all__ = ["run_summary", "threshold_summary"]

MAX_CASE_VIOLATIONS = 10


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
        f"{len(cases)} case(s), "
        f"mode {mode}{policy}, {budget_text}",
        f"passage: {len(cases)} ok, 0 failed; structural lane ran on {structural} case(s)",
    ]
    recall_n = metrics["recall.recall_at_k"]["n"]
    if recall_n:
        lines.append(
            f"recall over {recall_n} case(s): recall@k {_fmt(_mean(metrics, 'recall.recall_at_k'))}, "
            f"MRR {_fmt(_mean(metrics, 'recall.mrr'))}, nDCG {_fmt(_mean(metrics, 'recall.ndcg'))}"
        )
    cross = metrics["lanes.both"]
    if cross["n"]:
        parts = ", ".join(
            f"{name} {metrics[f'lanes.{name}']['numerator']}"
            for name in ("structural_hit", "passage_hit", "both", "neither")
        )
        lines.append(f"lanes over {cross['n']} case(s): {parts}")
    for name in ("concepts", "labels", "associations"):
        value = metrics[f"coverage.{name}"]
        if value["n"]:
            lines.append(f"coverage.{name} over {value['n']} case(s): mean {_fmt(value['mean'])}")
    citations = metrics["citations.recall"]
    if citations["n"]:
        validity = metrics["citations.locator_validity"]
        checked = (
            f"mean locator validity {_fmt(validity['mean'])}, resolved {_fmt(metrics['citations.resolved']['value'])}"
            if validity["n"]
            else "locator validity needs --citations FILE or a live server"
        )
        lines.append(f"citations over {citations['n']} case(s): mean recall {_fmt(citations['mean'])}, {checked}")
    if budget is not None:
        items, size, tokens = (metrics[f"budget.{k}_used"] for k in ("items", "bytes", "tokens"))
        rate = metrics["budget.omitted_rate"]["value"]
        lines.append(
            f"budget over {items['n']} case(s): mean {_fmt(items['mean'], 1)} item(s) / {_fmt(size['mean'], 1)} "
            f"byte(s) / {_fmt(tokens['mean'], 1)} token(s) used, budget-omitted rate {_fmt(rate)}"
        )
    diversity = metrics["diversity.sources"]
    if diversity["n"]:
        lines.append(
            f"diversity over {diversity['n']} case(s): mean {_fmt(diversity['mean'], 1)} distinct source(s) "
            "in admitted evidence"
        )
    evidence = metrics["latency.evidence_ms"]
    if evidence["n"]:
        lines.append(
            f"assembly step over {evidence['n']} case(s): mean {_fmt(evidence['mean'])} ms, "
            f"p90 {_fmt(evidence['p90'])} ms"
        )
    answers = artifact.get("answers", {}).get("metrics", {}).get("answers.in_context")
    if answers is not None and answers["n"]:
        lines.append(
            f"answer-in-context over {answers['n']} case(s): mean {_fmt(answers['mean'])} "
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
        lines = [f"thresholds: FAIL — {len(violations)} violation(s) (sha256 {sha}…)"]
    case_violations = [v for v in violations if v["scope"] == "case"]
    for violation in violations:
        if violation["scope"] != "case":
            lines.append(f"  [{violation['scope']}] {violation['metric']}: {violation['reason']}")
    for violation in case_violations[:MAX_CASE_VIOLATIONS]:
        lines.append(f"  [case {shown(violation['case_id'])}] {violation['metric']}: {violation['reason']}")
    if len(case_violations) > MAX_CASE_VIOLATIONS:
        lines.append(f"  ... and {len(case_violations) - MAX_CASE_VIOLATIONS} more case-scoped violation(s)")
    skipped = report.get("skipped", [])
    if skipped:
        lines.append(f"  {len(skipped)} case threshold(s) skipped (not applicable)")
    return lines
