"""The reorder seam (contract section 11): a reranker may only permute each query's survivors.

The selection policy hands the survivors of near-duplicate suppression (all kinds, fused order)
to a :class:`Reorderer` before contradiction grouping. :class:`RerankStage` is the pipeline's
reorderer: for every query whose request asked for a rerank it builds a :class:`RerankRequest`
(canonical query, model pin, ``{kind, lane_rank, text}`` per survivor, section 11.2) and asks the
configured :class:`Reranker` for a :class:`RerankDecision`: a permutation (or none) and the
``plan.reranker`` object to report. Without a reranker, nothing is called and the plan says
``not_configured`` where a rerank was requested.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

import polars as pl

from assembler.errors import UsageError, shown
from assembler.stages.lanes import QueryRecord

__all__ = [
    "Reorderer",
    "RerankCandidate",
    "RerankDecision",
    "RerankRequest",
    "RerankStage",
    "Reranker",
    "is_permutation",
    "permutation_problem",
]

Reorderer = Callable[[pl.DataFrame], Mapping[int, Sequence[int]]]
"""Survivors (``q``, ``kind``, ``lane_rank``, ``text``, in fused order per query) -> permutations by ``q``."""


def is_permutation(order: Sequence[int], length: int) -> bool:
    """Same length, every index in range, no repeats (section 11.1).

    >>> [is_permutation(o, 3) for o in ([0, 1, 2], [2, 0, 1], [0, 1], [0, 1, 2, 3], [0, 0, 1], [0, 1, 5])]
    [True, True, False, False, False, False]
    """
    return permutation_problem(order, length) is None


def permutation_problem(order: Sequence[int], length: int) -> str | None:
    """What keeps ``order`` from being a permutation of ``length`` survivors, or ``None``.

    >>> permutation_problem([0, 1], 3), permutation_problem([0, 0, 1], 3), permutation_problem([0, 1, 5], 3)
    ('has 2 indices for 3 survivors', 'index 0 appears twice', 'index 5 is out of range (0 to 2)')
    """
    if len(order) != length:
        return f"has {len(order)} indices for {length} survivors"
    seen = [False] * length
    for index in order:
        if not 0 <= index < length:
            return f"index {index} is out of range (0 to {length - 1})"
        if seen[index]:
            return f"index {index} appears twice"
        seen[index] = True
    return None


@dataclass(frozen=True)
class RerankCandidate:
    """What a reranker sees of one survivor: its kind, the representative's lane rank, its text."""

    kind: str
    lane_rank: int
    text: str = field(repr=False)  # candidate text never reaches a log line


@dataclass(frozen=True)
class RerankRequest:
    """One query's rerank call: canonical query, optional model pin, survivors in fused order."""

    query_id: str
    query: str
    model: str | None
    candidates: Sequence[RerankCandidate]


@dataclass(frozen=True)
class RerankDecision:
    """A reranker's answer: ``order`` (None = keep the deterministic order) and ``plan``, the
    ``plan.reranker`` wire text (e.g. ``{"configured":true,"ran":true,"model":"m"}``)."""

    order: Sequence[int] | None
    plan: str


class Reranker(Protocol):
    """A configured reranking provider (issue 6 supplies the HTTP one)."""

    def decide(self, requests: Sequence[RerankRequest]) -> Sequence[RerankDecision]:
        """One decision per request, same order; never raises for a provider failure."""
        ...


_NOT_REQUESTED = '{"configured":false,"ran":false}'
_CONFIGURED_NOT_REQUESTED = '{"configured":true,"ran":false}'
_NOT_CONFIGURED = '{"configured":false,"ran":false,"reason":"not_configured"}'


@dataclass
class RerankStage:
    """The pipeline's reorderer for one batch; remembers each query's ``plan.reranker`` text.

    ``static`` orders (by ``q``) are applied as given whatever the request says, for tests and
    for replaying a recorded reranker; they do not change the plan. Each must be a permutation of
    its query's survivors: anything else is the caller's :class:`~assembler.errors.UsageError`
    (naming the query and the rule), raised when the survivors are known.
    """

    records: Sequence[QueryRecord]
    reranker: Reranker | None = None
    static: Mapping[int, Sequence[int]] = field(default_factory=dict)
    plans: list[str] = field(init=False)

    def __post_init__(self) -> None:
        configured = self.reranker is not None
        self.plans = [
            (_NOT_CONFIGURED if not configured else _NOT_REQUESTED)
            if record.request.rerank_requested
            else (_CONFIGURED_NOT_REQUESTED if configured else _NOT_REQUESTED)
            for record in self.records
        ]

    def __call__(self, survivors: pl.DataFrame) -> Mapping[int, Sequence[int]]:
        if self.static:
            self._check_static(survivors)
        orders: dict[int, Sequence[int]] = dict(self.static)
        if self.reranker is None:
            return orders
        wanted = [q for q, record in enumerate(self.records) if record.request.rerank_requested]
        if not wanted:
            return orders
        pools: dict[int, list[RerankCandidate]] = {q: [] for q in wanted}
        for q, kind, lane_rank, text in survivors.select("q", "kind", "lane_rank", "text").iter_rows():
            if q in pools:
                pools[q].append(RerankCandidate(kind, lane_rank, text))
        requests = [
            RerankRequest(
                query_id=self.records[q].query_id,
                query=self.records[q].request.canonical_query,
                model=self.records[q].request.rerank_model,
                candidates=pools[q],
            )
            for q in wanted
        ]
        for q, decision in zip(wanted, self.reranker.decide(requests), strict=True):
            self.plans[q] = decision.plan
            if decision.order is not None:
                orders[q] = decision.order
        return orders

    def _check_static(self, survivors: pl.DataFrame) -> None:
        counts = dict(survivors.group_by("q").len().iter_rows())
        for q, order in self.static.items():
            problem = permutation_problem(order, counts.get(q, 0))
            if problem is not None:
                query_id = shown(self.records[q].query_id)
                raise UsageError(f"reorders['{query_id}'] must be a permutation of the query's survivors: {problem}")
