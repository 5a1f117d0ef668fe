"""Greedy budgeted admission (contract section 8.4): the one walk that is sequential by definition.

Units are visited in diversity order. A unit is committed when the whole package, with its
members and the citation entries they newly bring, still fits all three limits; otherwise every
member is refused (``contradiction_group_exceeds_budget`` for a group, else ``budget_exceeded``)
and the walk goes on, so a later smaller unit can still fit. Sizes are the precomputed
measurements; nothing is serialized here.

The walk is sequential within a query only: queries are independent. So a chunk's queries are
walked side by side, one NumPy step per walk position (the k-th unit of every query that has
one), with per-query running usage; a citation is charged by the first *admitted* unit of its
query that brings it, kept as one "committed" flag per (query, citation) pair. A vector step
costs about as much as walking a dozen rows in Python and its setup about a thousand, so for
small walks and for walks whose steps cover few queries each (a handful of queries with long
walks) the per-query walk is cheaper and is used instead: see :data:`STEP_COST_ROWS`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
import numpy.typing as npt
import polars as pl

from assembler.contract.jsontext import tokens_from_quarters
from assembler.contract.request import Limits

__all__ = [
    "BUDGET_EXCEEDED",
    "GROUP_EXCEEDS_BUDGET",
    "SETUP_COST_ROWS",
    "STEP_COST_ROWS",
    "Admission",
    "admit",
    "array_overhead",
]

BUDGET_EXCEEDED = "budget_exceeded"
GROUP_EXCEEDS_BUDGET = "contradiction_group_exceeds_budget"

#: The walk across queries runs when the walk frame has at least
#: ``SETUP_COST_ROWS + STEP_COST_ROWS * walk positions`` rows: one vector step costs about as much
#: CPU as walking 12 rows one query at a time, its setup about 1,200 (fitted on captured typical
#: and worst-case walks of 8 to 256 queries, ``benchmarks/bench_admission.py``; docs/performance.md).
STEP_COST_ROWS = 12
SETUP_COST_ROWS = 1200

_INT64_MAX = int(np.iinfo(np.int64).max)
_Ints = npt.NDArray[np.int64]


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
    *,
    method: Literal["auto", "across", "per_query"] = "auto",
) -> Admission:
    """Run the walk for every query.

    ``walk`` holds the survivors sorted by ``(q, admission_order, position)`` with ``q``,
    ``unit``, ``unit_size``, ``item_bytes``, ``item_quarters`` and ``citation_ids``.
    ``limits`` is indexed by ``q``; the citation measurements by citation id.
    ``method``: ``"across"`` walks the queries side by side, ``"per_query"`` one at a time,
    ``"auto"`` chooses by the walk's shape (:data:`STEP_COST_ROWS`); the outcome is the same.
    """
    if method not in ("auto", "across", "per_query"):
        raise ValueError(f"method must be 'auto', 'across' or 'per_query', got {method!r}")
    if walk.height and method != "per_query":
        columns = _walk_columns(walk, always=method == "across")
        if columns is not None:
            return _admit_across_queries(columns, walk["citation_ids"], limits, citation_bytes, citation_quarters)
    return admit_per_query(walk, limits, citation_bytes, citation_quarters)


def admit_per_query(
    walk: pl.DataFrame,
    limits: Sequence[Limits],
    citation_bytes: Sequence[int],
    citation_quarters: Sequence[int],
) -> Admission:
    """:func:`admit` one query at a time in Python: for walks of few, long queries."""
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


@dataclass(frozen=True, eq=False)  # holds frames or arrays: compared by identity
class _Units:
    """The walk's units, in walk frame order: rows ``start[u]:start[u] + size[u]`` of query ``q[u]``,
    its ``rank[u]``-th unit (its walk position), with the members' summed item measurements."""

    start: _Ints
    size: _Ints
    q: _Ints
    rank: _Ints
    item_bytes: _Ints
    item_quarters: _Ints
    steps: int


def _walk_columns(walk: pl.DataFrame, *, always: bool) -> _Units | None:
    """The units of ``walk`` if walking queries side by side pays, or ``always`` (and the frame is well formed).

    ``None``: too few rows for the walk positions (:data:`STEP_COST_ROWS`), or units that are
    not runs of ``unit_size`` rows of one ``(q, unit)`` with ascending ``q``, which the per-query
    walk handles as it always did.
    """
    row_q = walk["q"].cast(pl.Int64).to_numpy()
    unit = walk["unit"].cast(pl.Int64).to_numpy()
    sizes = walk["unit_size"].cast(pl.Int64).to_numpy()
    n = len(row_q)
    head = np.ones(n, dtype=bool)
    head[1:] = (row_q[1:] != row_q[:-1]) | (unit[1:] != unit[:-1])
    start = np.flatnonzero(head).astype(np.int64)
    size = np.diff(np.append(start, n))
    if not np.array_equal(size, sizes[start]) or bool(np.any(np.diff(row_q) < 0)):
        return None
    q = row_q[start]
    query_head = np.ones(len(q), dtype=bool)
    query_head[1:] = q[1:] != q[:-1]
    first = np.flatnonzero(query_head)
    rank = np.arange(len(q), dtype=np.int64) - np.repeat(first, np.diff(np.append(first, len(q))))
    steps = int(rank.max()) + 1
    if not always and n < SETUP_COST_ROWS + STEP_COST_ROWS * steps:
        return None
    item_bytes = walk["item_bytes"].cast(pl.Int64).to_numpy()
    item_quarters = walk["item_quarters"].cast(pl.Int64).to_numpy()
    return _Units(
        start=start,
        size=size,
        q=q,
        rank=rank,
        item_bytes=np.add.reduceat(item_bytes, start),
        item_quarters=np.add.reduceat(item_quarters, start),
        steps=steps,
    )


def _admit_across_queries(
    units: _Units,
    refs: pl.Series,
    limits: Sequence[Limits],
    citation_bytes: Sequence[int],
    citation_quarters: Sequence[int],
) -> Admission:
    """:func:`admit` with all queries walked side by side, one vector step per walk position.

    Units are taken in (walk position, query) order; step ``k`` decides the ``k``-th unit of every
    query at once. A unit's citation entries are its distinct citation ids in order of first
    mention; each is one (query, citation) pair, charged when its pair is not yet committed and
    committed when its unit is admitted. Within one step the pairs belong to different queries
    or different citations, so a step's entries never interact.
    """
    n_queries = len(limits)
    n_units = len(units.q)
    unit_of_row = np.repeat(np.arange(n_units, dtype=np.int64), units.size)

    # The citation entries: (unit, citation id), first mention within a unit only.
    mentions = refs.list.len().fill_null(0).cast(pl.Int64).to_numpy()
    flat = refs.explode()
    cited = flat.filter(flat.is_not_null()).cast(pl.Int64).to_numpy()
    entry_unit = np.repeat(unit_of_row, mentions)
    if len(cited):
        span = int(cited.max()) + 1
        _, first_mention = np.unique(entry_unit * span + cited, return_index=True)
        first_mention.sort()
        entry_unit, cited = entry_unit[first_mention], cited[first_mention]
        _, pair = np.unique(units.q[entry_unit] * span + cited, return_inverse=True)
        pair = pair.astype(np.int64).reshape(-1)
        n_pairs = int(pair.max()) + 1
    else:
        pair = np.zeros(0, dtype=np.int64)
        n_pairs = 0

    # Step order: units by (walk position, query); entries by their unit's place in it.
    by_step = np.argsort(units.rank, kind="stable")
    step_ptr = np.searchsorted(units.rank[by_step], np.arange(units.steps + 1))
    place = np.empty(n_units, dtype=np.int64)
    place[by_step] = np.arange(n_units)
    entry_order = np.argsort(place[entry_unit], kind="stable")
    entry_pair = pair[entry_order]
    entry_cid = cited[entry_order]
    entry_place = place[entry_unit[entry_order]]
    entry_ptr = np.zeros(n_units + 1, dtype=np.int64)
    np.cumsum(np.bincount(entry_place, minlength=n_units), out=entry_ptr[1:])
    entry_local = entry_place - np.repeat(step_ptr[:-1], np.diff(entry_ptr[step_ptr]))
    cost = np.stack(
        [
            np.ones(len(entry_pair), dtype=np.int64),
            np.asarray(citation_bytes, dtype=np.int64)[entry_cid],
            np.asarray(citation_quarters, dtype=np.int64)[entry_cid],
        ]
    )
    step_q = units.q[by_step]
    step_size = units.size[by_step]
    step_bytes = units.item_bytes[by_step]
    step_quarters = units.item_quarters[by_step]

    max_items = np.array([min(lim.max_items, _INT64_MAX) for lim in limits], dtype=np.int64)
    max_bytes = np.array([min(lim.max_bytes, _INT64_MAX) for lim in limits], dtype=np.int64)
    max_tokens = np.array([min(lim.max_tokens, _INT64_MAX) for lim in limits], dtype=np.int64)
    items = np.zeros(n_queries, dtype=np.int64)
    cited_count = np.zeros(n_queries, dtype=np.int64)
    content_bytes = np.zeros(n_queries, dtype=np.int64)
    content_quarters = np.zeros(n_queries, dtype=np.int64)
    used_bytes = np.full(n_queries, 4, dtype=np.int64)
    used_quarters = np.full(n_queries, 4, dtype=np.int64)
    committed = np.zeros(n_pairs, dtype=bool)
    commits = np.zeros(len(entry_pair), dtype=bool)
    fits_at = np.zeros(n_units, dtype=bool)
    bytes_at = np.zeros(n_units, dtype=np.int64)
    quarters_at = np.zeros(n_units, dtype=np.int64)

    unit_bounds = step_ptr.tolist()
    entry_bounds = entry_ptr[step_ptr].tolist()
    for k in range(units.steps):
        u0, u1 = unit_bounds[k], unit_bounds[k + 1]
        e0, e1 = entry_bounds[k], entry_bounds[k + 1]
        qk = step_q[u0:u1]
        next_items = items[qk] + step_size[u0:u1]
        unit_bytes = step_bytes[u0:u1]
        unit_quarters = step_quarters[u0:u1]
        if e1 > e0:
            pairs = entry_pair[e0:e1]
            new = ~committed[pairs]
            totals = np.zeros((3, e1 - e0 + 1), dtype=np.int64)
            np.cumsum(cost[:, e0:e1] * new, axis=1, out=totals[:, 1:])
            bounds = entry_ptr[u0 : u1 + 1] - e0
            charged = totals[:, bounds[1:]] - totals[:, bounds[:-1]]
            next_cited = cited_count[qk] + charged[0]
            unit_bytes = unit_bytes + charged[1]
            unit_quarters = unit_quarters + charged[2]
        else:
            next_cited = cited_count[qk]
        overhead = next_items + 1 + np.maximum(next_cited + 1, 2)
        next_content_bytes = content_bytes[qk] + unit_bytes
        next_content_quarters = content_quarters[qk] + unit_quarters
        next_bytes = overhead + next_content_bytes
        next_quarters = overhead + next_content_quarters
        fits = (
            (next_items <= max_items[qk]) & (next_bytes <= max_bytes[qk]) & ((next_quarters + 3) // 4 <= max_tokens[qk])
        )
        admitted = qk[fits]
        items[admitted] = next_items[fits]
        cited_count[admitted] = next_cited[fits]
        content_bytes[admitted] = next_content_bytes[fits]
        content_quarters[admitted] = next_content_quarters[fits]
        used_bytes[admitted] = next_bytes[fits]
        used_quarters[admitted] = next_quarters[fits]
        if e1 > e0:
            brought = new & fits[entry_local[e0:e1]]
            committed[pairs[brought]] = True
            commits[e0:e1] = brought
        fits_at[u0:u1] = fits
        bytes_at[u0:u1] = used_bytes[qk]
        quarters_at[u0:u1] = used_quarters[qk]

    # Back to walk frame order, one value per row.
    row_fits = np.repeat(fits_at[place], units.size)
    row_group = np.repeat(units.size > 1, units.size)
    reason_code = np.where(row_fits, 0, np.where(row_group, 2, 1))
    reasons = np.array([None, BUDGET_EXCEEDED, GROUP_EXCEEDS_BUDGET], dtype=object)[reason_code]
    committed_q = step_q[entry_place[commits]]
    committed_cid = entry_cid[commits][np.argsort(committed_q, kind="stable")].tolist()
    ends = np.cumsum(np.bincount(committed_q, minlength=n_queries)).tolist()
    return Admission(
        admitted=row_fits.tolist(),
        reason=reasons.tolist(),
        bytes_after=np.repeat(bytes_at[place], units.size).tolist(),
        tokens_after=((np.repeat(quarters_at[place], units.size) + 3) // 4).tolist(),
        citation_ids=[committed_cid[a:b] for a, b in zip([0, *ends[:-1]], ends, strict=True)],
        items_used=items.tolist(),
        bytes_used=used_bytes.tolist(),
        tokens_used=((used_quarters + 3) // 4).tolist(),
    )
