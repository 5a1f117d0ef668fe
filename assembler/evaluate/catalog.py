"""The metric catalog (spec section 2.3): 31 keys, their definitions, and which are case-scoped.

>>> len(METRICS), len(CASE_SCOPED), len(COMPARISON_METRICS)
(31, 10, 9)
>>> sorted(DEFINITIONS) == sorted(METRICS)
True
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

__all__ = [
    "CASE_SCOPED",
    "COMPARISON_METRICS",
    "DEFINITIONS",
    "METRICS",
    "MetricDef",
    "Statistic",
    "definitions_block",
]

Statistic = Literal["distribution", "ratio", "count"]


@dataclass(frozen=True)
class MetricDef:
    """One ``definitions`` entry."""

    unit: str
    statistic: Statistic
    scope: Literal["case", "run"]
    description: str
    source: str
    caveat: str | None = None

    def as_json(self) -> dict[str, Any]:
        """The artifact's shape: ``{unit, statistic, scopes, description, source, caveat}``."""
        return {
            "unit": self.unit,
            "statistic": self.statistic,
            "scopes": [self.scope],
            "description": self.description,
            "source": self.source,
            "caveat": self.caveat,
        }


_PASSAGE = "passage lane: the lane dump's passage hits (baseline) or the assembled package projected to hits (assembly)"
_STRUCTURAL = "structural lane, offline: the lane dump's graph_query and graph_activate lanes"
_LIVE_CITATIONS = "citation lane: POST /contexts/{ctx}/citations (live server only)"
_OFFLINE_CAVEAT = "needs a live server; an offline run reports it as absent (n=0) with a reason"

DEFINITIONS: dict[str, MetricDef] = {
    "budget.bytes_used": MetricDef(
        "byte",
        "distribution",
        "case",
        "UTF-8 bytes of the (real or emulated) evidence package per case",
        "budget block",
        "empty in a baseline run without --max-* flags; always present under --assembly",
    ),
    "budget.items_used": MetricDef(
        "item",
        "distribution",
        "case",
        "items admitted per case",
        "budget block",
        "empty in a baseline run without --max-* flags; always present under --assembly",
    ),
    "budget.omitted_rate": MetricDef(
        "ratio",
        "ratio",
        "run",
        "budget-dropped candidates / (omitted_total + items_used), pooled over cases with a budget block",
        "budget block; assembly counts budget_exceeded + contradiction_group_exceeds_budget",
        "near-duplicate drops count in the denominator only",
    ),
    "budget.tokens_used": MetricDef(
        "token",
        "distribution",
        "case",
        "estimated tokens (quarter-token rule) of the package per case",
        "budget block",
        "empty in a baseline run without --max-* flags; always present under --assembly",
    ),
    "citations.locator_validity": MetricDef(
        "ratio",
        "distribution",
        "case",
        "per case: valid citation checks / declared citations",
        _LIVE_CITATIONS,
        _OFFLINE_CAVEAT,
    ),
    "citations.no_paragraph": MetricDef(
        "ratio",
        "ratio",
        "run",
        "citation checks unresolved with code no_paragraph / all checks",
        _LIVE_CITATIONS,
        _OFFLINE_CAVEAT,
    ),
    "citations.no_source": MetricDef(
        "ratio",
        "ratio",
        "run",
        "citation checks unresolved with code no_source / all checks",
        _LIVE_CITATIONS,
        _OFFLINE_CAVEAT,
    ),
    "citations.other": MetricDef(
        "ratio",
        "ratio",
        "run",
        "citation checks unresolved for any other reason / all checks",
        _LIVE_CITATIONS,
        _OFFLINE_CAVEAT,
    ),
    "citations.quote_match": MetricDef(
        "ratio",
        "ratio",
        "run",
        "resolved checks whose quote matched / resolved checks that declared a quote",
        _LIVE_CITATIONS,
        _OFFLINE_CAVEAT,
    ),
    "citations.recall": MetricDef(
        "ratio",
        "distribution",
        "case",
        "per case: declared citations whose (source, paragraph) was served / declared citations",
        "served set = final passage hits + attributions of the matched structural associations",
    ),
    "citations.resolved": MetricDef(
        "ratio", "ratio", "run", "resolved citation checks / all citation checks", _LIVE_CITATIONS, _OFFLINE_CAVEAT
    ),
    "citations.section_match": MetricDef(
        "ratio",
        "ratio",
        "run",
        "resolved checks whose section matched / resolved checks that declared a section",
        _LIVE_CITATIONS,
        _OFFLINE_CAVEAT,
    ),
    "coverage.associations": MetricDef(
        "ratio",
        "distribution",
        "case",
        "per case: expected associations present in the structural lane / expected associations",
        _STRUCTURAL,
        "offline: each position matched with normalize_entry against the graph lanes' associations",
    ),
    "coverage.concepts": MetricDef(
        "ratio",
        "distribution",
        "case",
        "per case: expected concepts named in the structural lane / expected concepts",
        _STRUCTURAL,
        "offline: matched with normalize_entry against every subject, object and activation path name",
    ),
    "coverage.labels": MetricDef(
        "ratio",
        "distribution",
        "case",
        "per case: expected labels named in the structural lane / expected labels",
        _STRUCTURAL,
        "offline: matched with normalize_entry against every association label",
    ),
    "diversity.sources": MetricDef(
        "source",
        "distribution",
        "case",
        "distinct source strings among the case's final hit list",
        _PASSAGE,
        "assembly: counted over the first `limit` projected locators",
    ),
    "lanes.both": MetricDef(
        "ratio",
        "ratio",
        "run",
        "cases where both the structural and the passage lane hit / eligible cases",
        "lane_cross blocks",
    ),
    "lanes.neither": MetricDef(
        "ratio", "ratio", "run", "cases where neither lane hit / eligible cases", "lane_cross blocks"
    ),
    "lanes.passage_hit": MetricDef(
        "ratio",
        "ratio",
        "run",
        "cases whose passage lane matched an expected source / eligible cases",
        "lane_cross blocks",
    ),
    "lanes.structural_hit": MetricDef(
        "ratio",
        "ratio",
        "run",
        "cases whose structural lane matched any expectation / eligible cases",
        "lane_cross blocks",
    ),
    "latency.citation_ms": MetricDef(
        "ms", "distribution", "case", "wall time per citation call", _LIVE_CITATIONS, _OFFLINE_CAVEAT
    ),
    "latency.evidence_ms": MetricDef(
        "ms",
        "distribution",
        "case",
        "wall time of the assembly step per case (assemble_batch on one record)",
        "assembly mode",
        "local time in fractional milliseconds, not an HTTP round trip",
    ),
    "latency.passage_ms": MetricDef(
        "ms",
        "distribution",
        "case",
        "wall time of the passage lane per case; under --assembly the assembly step",
        _PASSAGE,
        "offline baseline has no search call: absent; assembly: local time in fractional milliseconds",
    ),
    "latency.query_ms": MetricDef(
        "ms",
        "distribution",
        "case",
        "wall time per structural query call",
        "POST /query (live server only)",
        _OFFLINE_CAVEAT,
    ),
    "latency.resolve_ms": MetricDef(
        "ms",
        "distribution",
        "case",
        "wall time per resolve call",
        "POST /resolve, /resolve_label (live server only)",
        _OFFLINE_CAVEAT,
    ),
    "passage.failure_rate": MetricDef(
        "ratio",
        "ratio",
        "run",
        "failed passage lanes / cases",
        _PASSAGE,
        "offline the passage lane cannot fail: a case without a lane-dump record is an input error",
    ),
    "recall.mrr": MetricDef(
        "ratio",
        "distribution",
        "case",
        "per case: 1/(r+1) for the first hit satisfying an expected source, else 0",
        _PASSAGE,
        "relevance-0 entries are ignored",
    ),
    "recall.ndcg": MetricDef(
        "ratio",
        "distribution",
        "case",
        "per case: linear-gain nDCG, one credit per expected source at its first satisfying hit, clamped to 1",
        _PASSAGE,
        "relevance-0 entries are ignored",
    ),
    "recall.recall_at_k": MetricDef(
        "ratio",
        "distribution",
        "case",
        "per case: expected sources satisfied by some hit / expected sources",
        _PASSAGE,
        "k is the hit count (the case limit or fewer); relevance-0 entries are ignored",
    ),
    "rerank.ran": MetricDef(
        "ratio",
        "ratio",
        "run",
        "cases where the reranker ran / cases where reranking was attempted",
        "evidence reranker (needs --rerank)",
        "offline runs have no reranker provider: absent",
    ),
    "structural.case_rate": MetricDef(
        "ratio",
        "ratio",
        "run",
        "cases that ran the structural lane / cases",
        _STRUCTURAL,
        "offline the structural lane runs when the case declares concepts, labels or associations",
    ),
}

METRICS: tuple[str, ...] = tuple(sorted(DEFINITIONS))

CASE_SCOPED: tuple[str, ...] = (
    "recall.recall_at_k",
    "recall.mrr",
    "recall.ndcg",
    "coverage.concepts",
    "coverage.labels",
    "coverage.associations",
    "citations.recall",
    "citations.locator_validity",
    "latency.passage_ms",
    "diversity.sources",
)

COMPARISON_METRICS: tuple[str, ...] = tuple(name for name in CASE_SCOPED if name != "latency.passage_ms")


def definitions_block() -> dict[str, dict[str, Any]]:
    """The artifact's ``definitions`` (sorted by key)."""
    return {name: DEFINITIONS[name].as_json() for name in METRICS}
