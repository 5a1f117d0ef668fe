"""Prometheus metrics of section 11.5 under this project's prefix ``assembler_rerank_``.

In a dedicated :class:`~prometheus_client.CollectorRegistry`:

* ``assembler_rerank_outcomes_total{outcome}``: one increment per requested rerank; all eight
  labels are rendered from zero.
* ``assembler_rerank_duration_seconds``: histogram, one sample per requested rerank, including
  the ones decided without calling the provider.
* With a breaker: ``assembler_rerank_breaker_state`` (0 closed, 1 open, 2 half-open),
  ``assembler_rerank_breaker_consecutive_failures`` (pinned at the threshold unless closed),
  ``assembler_rerank_breaker_opened_total`` and ``assembler_rerank_breaker_short_circuits_total``,
  read from the breaker at collection time.

The only label is ``outcome`` with a fixed token; nothing else about a request is recorded.
"""

from __future__ import annotations

import bisect
import threading
from collections.abc import Iterable

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector

from assembler.rerank.breaker import CircuitBreaker
from assembler.rerank.provider import OUTCOMES
from assembler.run.atomic import AtomicFile

__all__ = ["DURATION_BUCKETS", "PREFIX", "RerankMetrics"]

PREFIX = "assembler_rerank"
DURATION_BUCKETS = (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)


class _RerankCollector(Collector):
    """Outcomes and durations (kept here, so no ``_created`` series), and the breaker's reading."""

    def __init__(self, breaker: CircuitBreaker | None) -> None:
        self.breaker = breaker
        self.lock = threading.Lock()
        self.outcomes = dict.fromkeys(OUTCOMES, 0)
        self.buckets = [0] * (len(DURATION_BUCKETS) + 1)  # the last one is +Inf
        self.duration_sum = 0.0

    def observe(self, outcome: str, seconds: float) -> None:
        with self.lock:
            self.outcomes[outcome] += 1
            self.buckets[bisect.bisect_left(DURATION_BUCKETS, seconds)] += 1
            self.duration_sum += seconds

    def collect(self) -> Iterable[Metric]:
        with self.lock:
            outcomes = dict(self.outcomes)
            buckets = list(self.buckets)
            duration_sum = self.duration_sum
        counter = CounterMetricFamily(f"{PREFIX}_outcomes", "Requested reranks by outcome.", labels=["outcome"])
        for outcome, count in outcomes.items():
            counter.add_metric([outcome], count)
        yield counter
        cumulative, running = [], 0
        for bound, count in zip((*(str(b) for b in DURATION_BUCKETS), "+Inf"), buckets, strict=True):
            running += count
            cumulative.append((bound, float(running)))
        yield HistogramMetricFamily(
            f"{PREFIX}_duration_seconds",
            "Time to decide one requested rerank, short-circuits included.",
            buckets=cumulative,
            sum_value=duration_sum,
        )
        if self.breaker is None:
            return
        snap = self.breaker.snapshot()
        yield GaugeMetricFamily(
            f"{PREFIX}_breaker_state", "Reranker circuit breaker: 0 closed, 1 open, 2 half-open.", int(snap.state)
        )
        yield GaugeMetricFamily(
            f"{PREFIX}_breaker_consecutive_failures",
            "Consecutive failed reranker attempts (pinned at the threshold while open or half-open).",
            snap.consecutive_failures,
        )
        yield CounterMetricFamily(
            f"{PREFIX}_breaker_opened", "Times the reranker circuit breaker opened.", snap.opened_total
        )
        yield CounterMetricFamily(
            f"{PREFIX}_breaker_short_circuits",
            "Reranker attempts refused by the circuit breaker.",
            snap.short_circuits_total,
        )


class RerankMetrics:
    """The reranker's metric families in their own registry."""

    def __init__(self, breaker: CircuitBreaker | None = None) -> None:
        self.registry = CollectorRegistry()
        self._collector = _RerankCollector(breaker)
        self.registry.register(self._collector)

    def observe(self, outcome: str, seconds: float) -> None:
        """Record one requested rerank."""
        if outcome not in OUTCOMES:
            raise ValueError("unknown rerank outcome")
        self._collector.observe(outcome, seconds)

    def render(self) -> bytes:
        """The Prometheus text exposition."""
        return generate_latest(self.registry)

    def write(self, path: str) -> None:
        """Write the text exposition to ``path`` atomically (temporary file, then rename)."""
        with AtomicFile(path, binary=True) as out:
            out.handle.write(self.render())
            out.commit()
