"""Greedy budgeted admission (contract section 8.4): the one walk that is sequential by definition.

Units are visited in diversity order. A unit is committed when the whole package, with its
members and the citation entries they newly bring, still fits all three limits; otherwise every
member is refused (``contradiction_group_exceeds_budget`` for a group, else ``budget_exceeded``)
and the walk goes on, so a later smaller unit can still fit. Sizes are the precomputed
measurements; nothing is serialized here.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import polars as pl

from assembler.contract.jsontext import tokens_from_quarters
from assembler.contract.request import Limits

__all__ = ["BUDGET_EXCEEDED", "GROUP_EXCEEDS_BUDGET", "Admission", "admit", "array_overhead"]

BUDGET_EXCEEDED = "budget_exceeded"
GROUP_EXCEEDS_BUDGET = "contradiction_group_exceeds_budget"


def array_overhead(count: int) -> int:
    """Bytes (and quarters) of a compact JSON array's brackets and commas around ``count`` items."""
    return 2 if count == 0 else count + 1


@dataclass(frozen=True)
class Admission:
    """The walk's outcome.

    Per row of the input (same order): ``admitted``, ``reason`` (None if admitted),
    ``bytes_after`` / ``tokens_after`` (the package's usage after that row's unit was decided).
    Per query: ``citation_ids`` committed (commit order), and the final usage.
    """

    admitted: list[bool]
    reason: list[str | None]
    bytes_after: list[int]
    tokens_after: list[int]
    citation_ids: list[list[int]]
    items_used: list[int]
    bytes_used: list[int]
    tokens_used: list[int]


def admit(
    walk: pl.DataFrame,
    limits: Sequence[Limits],
    citation_bytes: Sequence[int],
    citation_quarters: Sequence[int],
) -> Admission:
    """Run the walk for every query.

    ``walk`` holds the survivors sorted by ``(q, admission_order, position)`` with ``q``,
    ``unit``, ``unit_size``, ``item_bytes``, ``item_quarters`` and ``citation_ids``.
    ``limits`` is indexed by ``q``; the citation measurements by citation id.
    """
    qs = walk["q"].to_list()
    units = walk["unit"].to_list()
    sizes = walk["unit_size"].to_list()
    item_bytes = walk["item_bytes"].to_list()
    item_quarters = walk["item_quarters"].to_list()
    refs = walk["citation_ids"].to_list()
    n_queries = len(limits)
    result = Admission(
        admitted=[False] * len(qs),
        reason=[None] * len(qs),
        bytes_after=[0] * len(qs),
        tokens_after=[0] * len(qs),
        citation_ids=[[] for _ in range(n_queries)],
        items_used=[0] * n_queries,
        bytes_used=[4] * n_queries,
        tokens_used=[1] * n_queries,
    )
    start = 0
    while start < len(qs):
        q = qs[start]
        end = start
        while end < len(qs) and qs[end] == q:
            end += 1
        _walk_query(
            result,
            q,
            limits[q],
            start,
            end,
            units,
            sizes,
            item_bytes,
            item_quarters,
            refs,
            citation_bytes,
            citation_quarters,
        )
        start = end
    return result


def _walk_query(
    result: Admission,
    q: int,
    limits: Limits,
    start: int,
    end: int,
    units: list[int],
    sizes: list[int],
    item_bytes: list[int],
    item_quarters: list[int],
    refs: list[list[int]],
    citation_bytes: Sequence[int],
    citation_quarters: Sequence[int],
) -> None:
    items = content_bytes = content_quarters = 0
    held: set[int] = set()
    committed = result.citation_ids[q]
    used_bytes, used_quarters = 4, 4
    row = start
    while row < end:
        unit_end = row + sizes[row]
        new: list[int] = []
        unit_bytes = unit_quarters = 0
        for member in range(row, unit_end):
            unit_bytes += item_bytes[member]
            unit_quarters += item_quarters[member]
            for cid in refs[member]:
                if cid not in held and cid not in new:
                    new.append(cid)
                    unit_bytes += citation_bytes[cid]
                    unit_quarters += citation_quarters[cid]
        next_items = items + (unit_end - row)
        overhead = array_overhead(next_items) + array_overhead(len(committed) + len(new))
        next_bytes = overhead + content_bytes + unit_bytes
        next_quarters = overhead + content_quarters + unit_quarters
        fits = (
            next_items <= limits.max_items
            and next_bytes <= limits.max_bytes
            and tokens_from_quarters(next_quarters) <= limits.max_tokens
        )
        if fits:
            items, content_bytes, content_quarters = (
                next_items,
                content_bytes + unit_bytes,
                content_quarters + unit_quarters,
            )
            held.update(new)
            committed.extend(new)
            used_bytes, used_quarters = next_bytes, next_quarters
        reason = None if fits else (GROUP_EXCEEDS_BUDGET if unit_end - row > 1 else BUDGET_EXCEEDED)
        for member in range(row, unit_end):
            result.admitted[member] = fits
            result.reason[member] = reason
            result.bytes_after[member] = used_bytes
            result.tokens_after[member] = tokens_from_quarters(used_quarters)
        row = unit_end
    result.items_used[q] = items
    result.bytes_used[q] = used_bytes
    result.tokens_used[q] = tokens_from_quarters(used_quarters)
