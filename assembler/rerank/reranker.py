"""The seam's :class:`~assembler.stages.reorder.Reranker` over a provider: section 11.4's decision table, in batch.

For each requested rerank, in order: ``rerank.model`` given and not the provider's model ->
``model_mismatch``; fewer than 2 survivors -> ``empty_pool``; otherwise the provider is called
with a fresh per-query deadline and its answer is ``ok`` (a valid permutation, applied),
``invalid_permutation``, or its failure token (``circuit_open``, ``timeout``,
``provider_error``). Every fallback keeps the deterministic order. (``not_configured`` is the
pipeline's own answer when no reranker is passed.)

A batch (one chunk of the pipeline) calls the provider with at most ``concurrency`` queries in
flight, started in query order; decisions come back in query order. When the provider goes down,
its breaker opens after 3 failed attempts and every later query is answered ``circuit_open``
without a request, so the rest of the batch runs at full speed on the deterministic order.
``outcomes`` counts every requested rerank by outcome, for the run summary.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections import Counter
from collections.abc import Coroutine, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from assembler.contract.jsontext import escape_string
from assembler.errors import shown
from assembler.rerank.breaker import CircuitBreaker, Clock
from assembler.rerank.config import RerankConfig
from assembler.rerank.http import HttpProvider
from assembler.rerank.prometheus import RerankMetrics
from assembler.rerank.provider import (
    EMPTY_POOL,
    FAILURE_REASONS,
    INVALID_PERMUTATION,
    MODEL_MISMATCH,
    OK,
    OUTCOMES,
    PROVIDER_ERROR,
    Deadline,
    RerankFailure,
    RerankProvider,
)
from assembler.stages.reorder import RerankDecision, RerankRequest, is_permutation

__all__ = ["DEFAULT_CONCURRENCY", "ProviderReranker", "build_reranker", "plan_text"]

log = logging.getLogger("assembler.rerank")

DEFAULT_CONCURRENCY = 8
_T = TypeVar("_T")


def plan_text(outcome: str, model: str) -> str:
    """The ``plan.reranker`` wire text of a configured reranker's outcome (section 11.4).

    >>> plan_text("ok", "bge"), plan_text("timeout", "bge")
    ('{"configured":true,"ran":true,"model":"bge"}', '{"configured":true,"ran":false,"reason":"timeout"}')
    """
    if outcome == OK:
        return f'{{"configured":true,"ran":true,"model":{escape_string(model)}}}'
    return f'{{"configured":true,"ran":false,"reason":"{outcome}"}}'


class ProviderReranker:
    """A configured reranker for :func:`~assembler.pipeline.assemble_records` and ``run_assembly``.

    ``deadline_secs`` is each query's deadline, started when its provider call starts;
    ``concurrency`` bounds the queries in flight. ``outcomes`` and ``metrics`` accumulate over
    every batch this reranker decides.
    """

    def __init__(
        self,
        provider: RerankProvider,
        *,
        concurrency: int = DEFAULT_CONCURRENCY,
        deadline_secs: float = 5.0,
        metrics: RerankMetrics | None = None,
        clock: Clock = time.monotonic,
    ) -> None:
        if concurrency < 1:
            raise ValueError("concurrency must be at least 1")
        if not deadline_secs >= 0:
            raise ValueError("deadline_secs must be non-negative")
        self.provider = provider
        self.concurrency = concurrency
        self.deadline_secs = deadline_secs
        self.metrics = metrics if metrics is not None else RerankMetrics(provider.breaker)
        self.clock = clock
        self.outcomes: dict[str, int] = dict.fromkeys(OUTCOMES, 0)
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"ProviderReranker({self.provider!r}, concurrency={self.concurrency})"

    @property
    def requested(self) -> int:
        """Requested reranks decided so far."""
        return sum(self.outcomes.values())

    @property
    def fallbacks(self) -> dict[str, int]:
        """Requested reranks that kept the deterministic order, by reason (non-zero counts only)."""
        return {reason: n for reason, n in self.outcomes.items() if reason != OK and n}

    def summary_line(self) -> str:
        """``rerank (model m): 30 requested, 25 reranked, 5 fell back (circuit_open 4, provider_error 1)``,
        and ``; 3 attempts retried after a transient failure (provider_error 3)`` when any were."""
        fallbacks = self.fallbacks
        detail = ", ".join(f"{reason} {n}" for reason, n in fallbacks.items())
        line = (
            f"rerank (model {shown(self.provider.model)}): {self.requested} requested, {self.outcomes[OK]} reranked, "
            f"{sum(fallbacks.values())} fell back" + (f" ({detail})" if detail else "")
        )
        retried: Counter[str] = Counter(getattr(self.provider, "retried", {}))  # HttpProvider counts them
        if retried:
            reasons = ", ".join(f"{reason} {n}" for reason, n in sorted(retried.items()))
            line += f"; {sum(retried.values())} attempts retried after a transient failure ({reasons})"
        return line

    def decide(self, requests: Sequence[RerankRequest]) -> Sequence[RerankDecision]:
        """One decision per request, in order; provider faults become fallbacks, never exceptions."""
        if not requests:
            return []
        with self._lock:
            return _run(self._decide_all(requests))

    async def _decide_all(self, requests: Sequence[RerankRequest]) -> list[RerankDecision]:
        slots = asyncio.Semaphore(self.concurrency)

        async def one(request: RerankRequest) -> RerankDecision:
            async with slots:
                return await self._decide_one(request)

        try:
            return list(await asyncio.gather(*(one(request) for request in requests)))
        finally:
            await self.provider.aclose()

    async def _decide_one(self, request: RerankRequest) -> RerankDecision:
        started = time.perf_counter()
        order, outcome = await self._outcome(request)
        self.metrics.observe(outcome, time.perf_counter() - started)
        self.outcomes[outcome] += 1
        log.debug("rerank model=%s candidates=%d outcome=%s", self.provider.model, len(request.candidates), outcome)
        return RerankDecision(order, plan_text(outcome, self.provider.model))

    async def _outcome(self, request: RerankRequest) -> tuple[list[int] | None, str]:
        if request.model is not None and request.model != self.provider.model:
            return None, MODEL_MISMATCH
        if len(request.candidates) < 2:
            return None, EMPTY_POOL
        deadline = Deadline.after(self.deadline_secs, self.clock)
        try:
            answer = await self.provider.rerank(request.query, request.candidates, deadline)
        except Exception as exc:  # a provider broke its promise not to raise; its message may quote text
            log.error("reranker provider raised %s; falling back", type(exc).__name__)
            return None, PROVIDER_ERROR
        if isinstance(answer, RerankFailure):
            return None, answer.reason if answer.reason in FAILURE_REASONS else PROVIDER_ERROR
        if is_permutation(answer, len(request.candidates)):
            return list(answer), OK
        return None, INVALID_PERMUTATION


def _run(coroutine: Coroutine[Any, Any, _T]) -> _T:
    """Run ``coroutine`` on a fresh event loop, in a helper thread if this one already runs a loop."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coroutine)
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="assembler-rerank") as pool:
        return pool.submit(asyncio.run, coroutine).result()


def build_reranker(
    config: RerankConfig,
    *,
    concurrency: int = DEFAULT_CONCURRENCY,
    deadline_secs: float | None = None,
    breaker: CircuitBreaker | None = None,
) -> ProviderReranker:
    """The HTTP reranker of ``config``; each query's deadline defaults to ``config.timeout_secs``."""
    provider = HttpProvider(config, breaker=breaker)
    return ProviderReranker(
        provider,
        concurrency=concurrency,
        deadline_secs=config.timeout_secs if deadline_secs is None else deadline_secs,
    )
