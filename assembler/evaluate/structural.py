"""The structural lane, offline: concept, label and association expectations against graph lanes.

A live run resolves cues and queries pinned triples over HTTP. Offline, the lane dump's graph
lanes (``graph_query`` and ``graph_activate``) are the structural evidence retrieved for the case,
so an expectation counts as covered when it is present there, compared with ``normalize_entry``
after trimming (what lexical resolution does):

* a concept: any subject, object or activation ``path`` name;
* a label: any association label;
* an association: an association whose subject, label and object all match; its attributions
  with a paragraph join the served set (as a live query's attributions do).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from assembler.contract.text import normalize_entry, trim
from assembler.evaluate.loader import EvalCase, ExpectedAssociation
from assembler.stages.lanes import LaneRecord

__all__ = ["Probe", "Structural", "graph_associations", "run_structural"]


def _key(text: str) -> str:
    return normalize_entry(trim(text))


@dataclass(frozen=True)
class Probe:
    """One expected association: how many graph associations match, and their attributions."""

    expected: ExpectedAssociation
    total: int
    attributions: list[tuple[str, int | None]] = field(default_factory=list)

    @property
    def covered(self) -> bool:
        """The association was found (``total >= 1``)."""
        return self.total >= 1


@dataclass(frozen=True)
class Structural:
    """The structural lane's outcome for one case."""

    concept_names: list[str]
    label_names: list[str]
    probes: list[Probe]

    def concepts_matched(self, expected: Sequence[str]) -> int:
        """Expected concepts whose normalized form names a graph entity."""
        return _count(expected, self.concept_names)

    def labels_matched(self, expected: Sequence[str]) -> int:
        """Expected labels whose normalized form names a graph label."""
        return _count(expected, self.label_names)

    def served(self) -> set[tuple[str, int]]:
        """Attribution locators (paragraph known) of the covered probes."""
        return {
            (source, paragraph)
            for probe in self.probes
            for source, paragraph in probe.attributions
            if paragraph is not None
        }

    def block(self, case: EvalCase) -> dict[str, Any]:
        """The per-case ``structural`` block (names and probes, never text)."""
        out: dict[str, Any] = {"from": "lane_dump"}
        if case.expected_concepts:
            out["concept_names"] = self.concept_names
        if case.expected_labels:
            out["label_names"] = self.label_names
        out["associations"] = [
            {
                "subject_cue": probe.expected.subject,
                "label_cue": probe.expected.label,
                "object_cue": probe.expected.object,
                "query": {
                    "outcome": "queried",
                    "total": probe.total,
                    "matches": min(probe.total, 1),
                    "attributions": [{"source": s, "paragraph": p} for s, p in probe.attributions],
                },
            }
            for probe in self.probes
        ]
        return out


def _count(expected: Sequence[str], names: Iterable[str]) -> int:
    keys = {_key(name) for name in names}
    return sum(1 for entry in expected if _key(entry) in keys)


def _unique(values: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(values))


def graph_associations(record: LaneRecord) -> list[dict[str, Any]]:
    """Every association of the record's graph lanes, query lane first, activations after."""
    lanes = record.lanes
    return [*(lanes["graph_query"] or ()), *(act["association"] for act in lanes["graph_activate"] or ())]


def run_structural(case: EvalCase, record: LaneRecord) -> Structural:
    """Match the case's structural expectations against the record's graph lanes."""
    associations = graph_associations(record)
    paths = [name for act in record.lanes["graph_activate"] or () for name in act["path"]]
    concept_names = _unique([*paths, *(a[k] for a in associations for k in ("subject", "object"))])
    label_names = _unique(a["label"] for a in associations)
    by_triple: dict[tuple[str, str, str], list[dict[str, Any]]] = {}
    for assoc in associations:
        triple = (assoc["subject"], assoc["label"], assoc["object"])
        by_triple.setdefault(triple, assoc["attributions"])
    probes = []
    for expected in case.expected_associations:
        wanted = (_key(expected.subject), _key(expected.label), _key(expected.object))
        found = [triple for triple in by_triple if tuple(_key(part) for part in triple) == wanted]
        attributions: list[tuple[str, int | None]] = []
        for triple in found:
            for att in by_triple[triple]:
                locator = (att["source"], att.get("paragraph"))
                if locator not in attributions:
                    attributions.append(locator)
        probes.append(Probe(expected, len(found), attributions))
    return Structural(concept_names, label_names, probes)
