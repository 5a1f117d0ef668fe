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

import copy
import json
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from assembler.pipeline import assemble_batch
from assembler.policy import SelectionPolicy
from assembler.request import Limits

__all__ = ["Assembled", "assemble_case", "evidence_block", "project"]


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


def assemble_case(raw: Mapping[str, Any], limit: int, limits: Limits, policy: SelectionPolicy) -> Assembled:
    """Assemble one lane-dump record as ``evaluate --assembly`` would request it."""
    record = copy.deepcopy(dict(raw))
    record["request"] = {**record["request"], "search_limit": limit}
    overrides = {"max_items": limits.max_items, "max_bytes": limits.max_bytes, "max_tokens": limits.max_tokens}
    start = time.perf_counter()
    text = assemble_batch([record], overrides=overrides, policy=policy).packages[0]
    latency_ms = (time.perf_counter() - start) * 1000.0
    package: dict[str, Any] = json.loads(text)
    return Assembled(package=package, hits=project(package["items"], limit), latency_ms=latency_ms)


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
