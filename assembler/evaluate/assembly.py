"""Assembly mode: assemble each case's lane dump, then project the package into a hit list.

The request is the dump's own, with what ``evaluate`` would send in its place (spec section
3.6): ``search_limit`` = the case limit (the assembler clamps it to 200) and the budget = the run's
resolved limits, applied as overrides. The projection walks ``items`` in package order (admission
order), emitting each item's own locator (passage ``(source, paragraph)``, community
``("community:<id>", paragraph)``, association none) and then its ``citation_refs``, and stops
after ``limit`` locators. Duplicated locators are kept.

>>> items = [{"kind": "association", "citation_refs": [{"source": "a.md", "paragraph": 1}]},
...          {"kind": "passage", "passage": {"source": "b.md", "paragraph": 0}, "citation_refs": []},
...          {"kind": "community", "community": {"community": "L0-1", "paragraph": 2}, "citation_refs": []}]
>>> project(items, 2)
[('a.md', 1), ('b.md', 0)]
>>> project(items, 10)
[('a.md', 1), ('b.md', 0), ('community:L0-1', 2)]
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from assembler.contract.request import Limits, check_overrides
from assembler.run.batch import assemble_table, lines_table
from assembler.run.signals import held_signals
from assembler.selection import SelectionPolicy

__all__ = ["Assembled", "assemble_case", "assemble_cases", "evidence_block", "project"]


@dataclass(frozen=True)
class Assembled:
    """One case's package (parsed), its projected hit list and the wall time of the assembly step."""

    package: dict[str, Any]
    hits: list[tuple[str, int]]
    latency_ms: float


def _own_locator(item: Mapping[str, Any]) -> tuple[str, int] | None:
    kind = item.get("kind")
    if kind == "passage":
        passage = item["passage"]
        return passage["source"], passage["paragraph"]
    if kind == "community":
        community = item["community"]
        return "community:" + community["community"], community["paragraph"]
    return None


def project(items: Sequence[Mapping[str, Any]], limit: int) -> list[tuple[str, int]]:
    """The scored hit list of an assembled package (section 3.6), at most ``limit`` locators."""
    hits: list[tuple[str, int]] = []
    for item in items:
        own = _own_locator(item)
        locators = ([own] if own is not None else []) + [
            (ref["source"], ref["paragraph"]) for ref in item.get("citation_refs", [])
        ]
        for locator in locators:
            if len(hits) >= limit:
                return hits
            hits.append(locator)
    return hits


def case_request(raw: Mapping[str, Any], limit: int) -> dict[str, Any]:
    """The lane-dump record as ``evaluate --assembly`` requests it: ``search_limit`` = case limit."""
    return {**raw, "request": {**raw["request"], "search_limit": limit}}


def case_line(raw: Mapping[str, Any], limit: int, text: str | None = None) -> str:
    """:func:`case_request` as one JSON line (no newline): ``text``, the record's own JSON text,
    when the case asks for the record's own search limit (the same record: writing it again took
    a tenth of a call), else the request written anew."""
    if text is not None and raw["request"].get("search_limit") == limit:
        return text
    return json.dumps(case_request(raw, limit), ensure_ascii=False)


def limit_overrides(limits: Limits) -> dict[str, int]:
    """All three resolved limits, as budget overrides."""
    return {"max_items": limits.max_items, "max_bytes": limits.max_bytes, "max_tokens": limits.max_tokens}


def assembled(text: str, limit: int, latency_ms: float) -> Assembled:
    """A package text and its projection into the hit list (section 3.6)."""
    package: dict[str, Any] = json.loads(text)
    return Assembled(package=package, hits=project(package["items"], limit), latency_ms=latency_ms)


def assemble_cases(
    records: Sequence[tuple[Mapping[str, Any], int]],
    limits: Limits,
    policy: SelectionPolicy,
    texts: Sequence[str] | None = None,
) -> list[Assembled]:
    """Every case assembled in one :func:`~assembler.run.batch.assemble_table` call, in case order.

    ``records`` pairs each lane-dump record with its case limit; ``texts``, when given, are the
    records' JSON texts as read (:func:`case_line`). The pipeline works on every query
    at once and a query's package does not depend on the others in its batch, so the packages are
    those of one call per case, at a fraction of the cost; the per-case latency is the batch's
    wall time divided by the number of cases (as on Ray).
    """
    if not records:
        return []
    start = time.perf_counter()
    # As JSON Lines, so that the columnar reader takes them (the dumps were read from JSON text).
    given = texts if texts is not None else [None] * len(records)
    lines = [case_line(raw, limit, text).encode() for (raw, limit), text in zip(records, given, strict=True)]
    checked = check_overrides(limit_overrides(limits))
    with held_signals():  # a Ctrl-C inside Polars' native code would come out as another error
        texts = assemble_table(lines_table(lines), overrides=checked, policy=policy, on_error="stop").batch.packages
    per_case_ms = (time.perf_counter() - start) * 1000.0 / len(records)
    return [assembled(text, limit, per_case_ms) for text, (_, limit) in zip(texts, records, strict=True)]


def assemble_case(raw: Mapping[str, Any], limit: int, limits: Limits, policy: SelectionPolicy) -> Assembled:
    """Assemble one lane-dump record as ``evaluate --assembly`` would request it."""
    return assemble_cases([(raw, limit)], limits, policy)[0]


def assemble_cases_on_ray(
    records: Sequence[tuple[Mapping[str, Any], int]], limits: Limits, policy_name: str, address: str | None
) -> list[Assembled]:
    """Every case assembled in one Ray Data job (``evaluate --engine ray``), in case order.

    Goes through the same engine as ``assemble --engine ray`` (so the same packages, byte for byte);
    the per-case latency is the job's wall time divided by the number of cases.
    """
    import tempfile
    from pathlib import Path

    from assembler.run.options import RunOptions
    from assembler.run.ray import run_ray_assembly

    with tempfile.TemporaryDirectory() as folder:
        source, target = Path(folder) / "cases.jsonl", Path(folder) / "packages.jsonl"
        source.write_text(
            "".join(case_line(raw, limit) + "\n" for raw, limit in records),
            encoding="utf-8",
        )
        start = time.perf_counter()
        options = RunOptions(overrides=limit_overrides(limits), policy=policy_name)
        run_ray_assembly(source, target, options, address=address)
        per_case_ms = (time.perf_counter() - start) * 1000.0 / max(1, len(records))
        lines = target.read_text(encoding="utf-8").splitlines()
    # Each output line is {"query_id":..,"package":<package>}, in input order.
    texts = [line[line.index(',"package":') + len(',"package":') : -1] for line in lines]
    return [assembled(text, limit, per_case_ms) for text, (_, limit) in zip(texts, records, strict=True)]


def _evidence_locator(item: Mapping[str, Any]) -> dict[str, Any]:
    locator: dict[str, Any] = {
        "candidate_id": item["candidate_id"],
        "kind": item["kind"],
        "fused_rank": item["fused_rank"],
    }
    own = _own_locator(item)
    if own is not None:
        locator["source"], locator["paragraph"] = own
    locator["citation_refs"] = [
        {"source": ref["source"], "paragraph": ref["paragraph"]} for ref in item.get("citation_refs", [])
    ]
    return locator


def evidence_block(assembled: Assembled) -> dict[str, Any]:
    """The per-case ``evidence`` block (``outcome: assembled``): locators only, never text."""
    package = assembled.package
    block: dict[str, Any] = {
        "outcome": "assembled",
        "latency_ms": round(assembled.latency_ms, 3),
        "items": [_evidence_locator(item) for item in package["items"]],
    }
    if package.get("omitted_by_reason"):
        block["omitted_by_reason"] = dict(package["omitted_by_reason"])
    plan = package.get("plan", {})
    block["selection"] = dict(plan.get("selection", {}))
    block["reranker"] = dict(plan.get("reranker", {}))
    return block
