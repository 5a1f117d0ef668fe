"""Graph lanes: spreading activation over labelled triples, and the entity-mention graph.

Both return the contract's ``ActivationOut`` objects (plain dicts in wire field order), strongest
first. Activation strength = ``decay ** hop * |weight| * max(0, cosine(query, fact))``: the graph
decides what is reachable from the anchors, the query decides the order (see docs/retrieval.md).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from assembler.contract.text import normalize_entry
from assembler.retrieval.inputs import Fact, Paragraph
from assembler.retrieval.text import mentions, same_name

__all__ = ["MENTION_LABEL", "TripleGraph", "mention_activations"]

Json = dict[str, Any]
MENTION_LABEL = "mentions"
DICE_FLOOR = 0.6
MAX_FUZZY_NAME = 40


def _bigrams(text: str) -> set[str]:
    return {text[i : i + 2] for i in range(len(text) - 1)} if len(text) > 1 else {text}


def _dice(a: set[str], b: set[str]) -> float:
    return 2 * len(a & b) / (len(a) + len(b)) if a or b else 1.0


def attribution(source: str, weight: float, count: int, paragraph: Paragraph | None, number: int | None) -> Json:
    """An ``AttributionOut``; section and locator come from the corpus paragraph when it exists."""
    return {
        "source": source,
        "weight": weight,
        "count": count,
        "paragraph": number,
        "section": paragraph.section if paragraph else None,
        "locator": {"kind": paragraph.locator[0], "value": paragraph.locator[1]}
        if paragraph and paragraph.locator
        else None,
    }


@dataclass
class _Edge:
    subject: str
    label: str
    object: str
    weight: float = 0.0
    count: int = 0
    attributions: dict[tuple[str, int | None], list[float]] = field(default_factory=dict)


class TripleGraph:
    """The associations of one context, merged from fact assertions in file order."""

    def __init__(self, facts: Sequence[Fact], paragraphs: Mapping[tuple[str, int], Paragraph]) -> None:
        edges: dict[tuple[str, str, str], _Edge] = {}
        for fact in facts:
            edge = edges.setdefault(
                (fact.subject, fact.label, fact.object), _Edge(fact.subject, fact.label, fact.object)
            )
            edge.weight += fact.weight
            edge.count += 1
            if fact.source is not None:
                slot = edge.attributions.setdefault((fact.source, fact.paragraph), [0.0, 0])
                slot[0] += fact.weight
                slot[1] += 1
        self.associations: list[Json] = []
        for edge in edges.values():
            atts = [
                attribution(
                    source, weight, int(count), paragraphs.get((source, number)) if number is not None else None, number
                )
                for (source, number), (weight, count) in edge.attributions.items()
            ]
            self.associations.append(
                {
                    "subject": edge.subject,
                    "label": edge.label,
                    "object": edge.object,
                    "weight": edge.weight / edge.count,
                    "count": edge.count,
                    "attributions": atts,
                }
            )
        self.texts = [f"{a['subject']} {a['label']} {a['object']}" for a in self.associations]
        self.adjacent: dict[str, list[int]] = {}
        self._names: dict[str, str] = {}
        for index, association in enumerate(self.associations):
            for end in (association["subject"], association["object"]):
                self.adjacent.setdefault(end, [])
                if index not in self.adjacent[end]:
                    self.adjacent[end].append(index)
                self._names.setdefault(normalize_entry(end.strip()), end)
        self._fuzzy = [(name, _bigrams(key)) for key, name in self._names.items() if len(key) <= MAX_FUZZY_NAME]

    def resolve(self, cue: str) -> str | None:
        """The entity a cue names: normalized exact match, else the best bigram Dice >= 0.6."""
        key = normalize_entry(cue.strip())
        if key in self._names:
            return self._names[key]
        if len(key) > MAX_FUZZY_NAME:
            return None
        grams = _bigrams(key)
        best, best_score = None, DICE_FLOOR
        for name, other in self._fuzzy:
            score = _dice(grams, other)
            if score > best_score or (best is None and score >= best_score):
                best, best_score = name, score
        return best

    def activate(
        self, anchors: Sequence[str], relevance: npt.NDArray[np.float32], *, limit: int, decay: float, hops: int = 2
    ) -> list[Json]:
        """Associations within ``hops`` of the anchors, strongest first (ties: graph order), at most ``limit``."""
        best: dict[int, tuple[float, list[str]]] = {}
        frontier = {anchor: [anchor] for anchor in anchors}
        visited = set(anchors)
        for hop in range(1, hops + 1):
            following: dict[str, list[str]] = {}
            for name, path in frontier.items():
                for index in self.adjacent.get(name, []):
                    association = self.associations[index]
                    strength = round(decay**hop * abs(association["weight"]) * max(0.0, float(relevance[index])), 6)
                    if index not in best or strength > best[index][0]:
                        best[index] = (strength, path)
                    for end in (association["subject"], association["object"]):
                        if end not in visited and end not in following:
                            following[end] = [*path, end]
            visited.update(following)
            frontier = following
        order = sorted(best, key=lambda index: (-best[index][0], index))[:limit]
        return [
            {"strength": best[index][0], "path": best[index][1], "association": self.associations[index]}
            for index in order
        ]


def mention_activations(
    entities: Sequence[str], retrieved: Sequence[tuple[Paragraph, float]], *, limit: int, decay: float
) -> list[Json]:
    """``(title, "mentions", entity)`` for each retrieved paragraph whose text mentions the entity.

    One association per (entity, title), attributed to the paragraphs of that title that mention it
    (attribution weight and count = the number of mentions). Strength = ``decay * max(0, best
    cosine of those paragraphs)``; strongest first, ties in discovery order; at most ``limit``.
    The title is the subject so that one entity linked to many titles is not one (subject, label)
    contradiction group; a title that mentions several entities is (they share their citations).
    A paragraph whose title is the entity itself makes no fact: a title mentioning itself is not
    evidence of anything.
    """
    found: dict[tuple[str, str], list[tuple[Paragraph, int, float]]] = {}
    for entity in entities:
        for paragraph, similarity in retrieved:
            if same_name(entity, paragraph.name):
                continue  # (Aomine Brewery, mentions, Aomine Brewery) says nothing
            count = mentions(entity, paragraph.text)
            if count:
                found.setdefault((entity, paragraph.name), []).append((paragraph, count, similarity))
    out: list[tuple[float, int, Json]] = []
    for position, ((entity, name), hits) in enumerate(found.items()):
        total = sum(count for _, count, _ in hits)
        association = {
            "subject": name,
            "label": MENTION_LABEL,
            "object": entity,
            "weight": 1.0,
            "count": total,
            "attributions": [attribution(p.source, float(c), c, p, p.paragraph) for p, c, _ in hits],
        }
        strength = round(decay * max(0.0, max(similarity for _, _, similarity in hits)), 6)
        out.append((strength, position, {"strength": strength, "path": [entity], "association": association}))
    out.sort(key=lambda item: (-item[0], item[1]))
    return [activation for _, _, activation in out[:limit]]
