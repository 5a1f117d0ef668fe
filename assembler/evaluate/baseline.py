"""Baseline passage lane: the dump's passage hits cut at the case limit, truncated to a budget.

The truncation is the equal-budget contract of spec section 3.5: each hit becomes the item a
passage-only package would carry (keys ``candidate_id, kind, fused_rank, lane_ranks,
citation_refs, passage``), serialized and measured with the assembler's own code
(:func:`assembler.contract.wire.emit`, :func:`assembler.contract.jsontext.measure`), and admitted greedily (skip,
never stop) with the package accounting of :mod:`assembler.stages.admission`: the items array overhead,
the permanently empty ``citations`` array, one ceiling over the summed quarter-tokens.

>>> hit = {"source": "docs/kura.md", "paragraph": 0, "score": 0.86304635,
...        "text": "青嶺酒造は雲居県霧沢町の蔵元である。杜氏は高瀬である。",
...        "lanes": {"bm25": {"rank": 1, "score": 0.86304635}}}
>>> measure_hit("sake", 0, hit), measure_hit("sake", 1, hit)
((367, 99), (367, 99))
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from assembler.contract import wire
from assembler.contract.jsontext import escape_string, measure, tokens_from_quarters
from assembler.contract.request import Limits
from assembler.stages.admission import array_overhead
from assembler.stages.lanes import SEP, passage_lane

__all__ = ["Truncation", "cut", "measure_hit", "truncate", "wrapper_text"]

_EMPTY_CITATIONS = array_overhead(0)  # the package's permanently empty "citations":[]


def cut(hits: Sequence[Mapping[str, Any]], limit: int) -> list[Mapping[str, Any]]:
    """The first ``limit`` hits of the passage lane (what ``sources/search`` returns for ``limit``)."""
    return list(hits[:limit])


def wrapper_text(context: str, index: int, hit: Mapping[str, Any]) -> str:
    """Compact text of the passage-only item for the hit at 0-based ``index`` (section 3.5)."""
    candidate_id = SEP.join(("passage", context, hit["source"], str(hit["paragraph"])))
    rank = index + 1
    return (
        f'{{"candidate_id":{escape_string(candidate_id)},"kind":"passage","fused_rank":{rank},'
        f'"lane_ranks":[{{"lane":"{passage_lane(dict(hit))}","rank":{rank}}}],"citation_refs":[],'
        f'"passage":{wire.emit(wire.PASSAGE_HIT, dict(hit))}}}'
    )


def measure_hit(context: str, index: int, hit: Mapping[str, Any]) -> tuple[int, int]:
    """``(bytes, tokens)`` of the hit's item, tokens rounded up on the item alone."""
    size, quarters = measure(wrapper_text(context, index, hit))
    return size, tokens_from_quarters(quarters)


@dataclass(frozen=True)
class Truncation:
    """The budget walk's outcome: admitted indices (original order) and the package usage."""

    kept: list[int]
    items_used: int
    bytes_used: int
    tokens_used: int
    omitted_total: int
    limits: Limits


def truncate(context: str, hits: Sequence[Mapping[str, Any]], limits: Limits) -> Truncation:
    """Greedy walk in original order; a hit that does not fit is skipped and the walk goes on."""
    kept: list[int] = []
    content_bytes = content_quarters = 0
    for index, hit in enumerate(hits):
        size, quarters = measure(wrapper_text(context, index, hit))
        count = len(kept) + 1
        overhead = array_overhead(count) + _EMPTY_CITATIONS
        fits = (
            count <= limits.max_items
            and overhead + content_bytes + size <= limits.max_bytes
            and tokens_from_quarters(overhead + content_quarters + quarters) <= limits.max_tokens
        )
        if fits:
            kept.append(index)
            content_bytes += size
            content_quarters += quarters
    overhead = array_overhead(len(kept)) + _EMPTY_CITATIONS
    return Truncation(
        kept=kept,
        items_used=len(kept),
        bytes_used=overhead + content_bytes,
        tokens_used=tokens_from_quarters(overhead + content_quarters),
        omitted_total=len(hits) - len(kept),
        limits=limits,
    )
