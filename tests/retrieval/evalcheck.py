"""A small checker of the ``taguru_eval: 1`` rules (evaluate spec sections 1.1-1.4), fail-fast."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

HEADER = {"taguru_eval", "name", "default_target"}
CASE = {
    "case_id",
    "query",
    "cues",
    "expected_sources",
    "expected_concepts",
    "expected_labels",
    "expected_associations",
    "expected_citations",
    "options",
}
SOURCE = {"source", "paragraphs", "relevance"}
CITATION = {"source", "paragraph", "section", "quote"}
OPTIONS = {"limit", "floor", "tags", "since", "until"}


class EvalFileError(ValueError):
    """The first broken rule, as ``path: line N: message``."""


def _uint(value: Any, maximum: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= maximum


def _text(value: Any) -> bool:
    return isinstance(value, str) and bool(value.strip())


def _strings(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(v, str) for v in value)


def _case(case: Any, seen: set[str]) -> str | None:
    if not isinstance(case, dict) or set(case) - CASE:
        return "not a valid eval case: unknown key or not an object"
    if not isinstance(case.get("case_id"), str) or not isinstance(case.get("query"), str):
        return "not a valid eval case: case_id and query must be strings"
    cid = case["case_id"]
    if not cid.strip():
        return "case_id must not be empty"
    if not case["query"].strip():
        return f"case '{cid}': query must not be empty"
    if cid in seen:
        return f"duplicate case_id '{cid}'"
    seen.add(cid)
    if "cues" in case and not _strings(case["cues"]):
        return f"case '{cid}': cues must be a list of strings"
    if "expected_concepts" in case and not _strings(case["expected_concepts"]):
        return f"case '{cid}': expected_concepts must be a list of strings"
    for entry in case.get("expected_sources", []):
        if not isinstance(entry, dict) or set(entry) - SOURCE or not isinstance(entry.get("source"), str):
            return f"case '{cid}': not a valid eval case: expected_sources entry"
        if not entry["source"].strip():
            return f"case '{cid}': expected_sources: source must not be empty"
        if not all(_uint(p, 2**32 - 1) for p in entry.get("paragraphs", [])):
            return f"case '{cid}': expected_sources: paragraphs must be u32"
        if not _uint(entry.get("relevance", 1), 3):
            return f"case '{cid}': expected_sources relevance must be 0..=3"
    labels = case.get("expected_labels") or []
    if not _strings(labels) or not all(_text(v) for v in labels):
        return f"case '{cid}': expected_labels: entries must not be empty"
    for entry in case.get("expected_associations") or []:
        if not isinstance(entry, dict) or set(entry) != {"subject", "label", "object"}:
            return f"case '{cid}': expected_associations: subject, label and object are required"
        if not all(_text(entry[k]) for k in entry):
            return f"case '{cid}': expected_associations: subject/label/object must not be empty"
    for entry in case.get("expected_citations") or []:
        if not isinstance(entry, dict) or set(entry) - CITATION or not _uint(entry.get("paragraph"), 2**32 - 1):
            return f"case '{cid}': expected_citations: wrong type"
        if not _text(entry.get("source")):
            return f"case '{cid}': expected_citations: source must not be empty"
        if "section" in entry and entry["section"] is not None and not isinstance(entry["section"], str):
            return f"case '{cid}': expected_citations: section must be a string or null"
        if "quote" in entry and not _text(entry["quote"]):
            return f"case '{cid}': expected_citations: quote must not be empty"
    options = case.get("options") or {}
    if not isinstance(options, dict) or set(options) - OPTIONS:
        return f"case '{cid}': not a valid eval case: options"
    limit = options.get("limit")
    if limit is not None and not (_uint(limit, 1000) and limit >= 1):
        return f"case '{cid}': options.limit must be 1..=1000, got {limit}"
    floor = options.get("floor")
    if floor is not None and not (isinstance(floor, (int, float)) and 0.0 <= floor <= 1.0):
        return f"case '{cid}': options.floor must be 0.0..=1.0"
    return None


def check_eval_file(path: Path) -> list[dict[str, Any]]:
    """Validate ``path``; return its cases; raise :class:`EvalFileError` at the first problem."""
    text = path.read_bytes().decode("utf-8")
    header: dict[str, Any] | None = None
    cases: list[dict[str, Any]] = []
    seen: set[str] = set()
    for number, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        try:
            value = json.loads(line)
        except json.JSONDecodeError as exc:
            raise EvalFileError(f"{path}: line {number}: not JSON: {exc}") from None
        if header is None:
            stamp = value.get("taguru_eval") if isinstance(value, dict) else None
            if not isinstance(value, dict) or set(value) - HEADER or not _uint(stamp, 2**64 - 1):
                raise EvalFileError(f"{path}: line {number}: not a valid eval header")
            if stamp != 1:
                raise EvalFileError(f"{path}: line {number}: taguru_eval must be 1, got {stamp}")
            if value.get("name") is not None and not isinstance(value["name"], str):
                raise EvalFileError(f"{path}: line {number}: not a valid eval header: name")
            header = value
            continue
        problem = _case(value, seen)
        if problem:
            raise EvalFileError(f"{path}: line {number}: {problem}")
        cases.append(value)
    if header is None:
        raise EvalFileError(f"{path}: empty file: expected a taguru_eval header line")
    if not cases:
        raise EvalFileError(f"{path}: no cases: expected at least one case line after the header")
    return cases
