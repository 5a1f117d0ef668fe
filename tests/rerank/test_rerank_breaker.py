"""The circuit breaker (section 11.3): per attempt, threshold 3, 30 s cooldown, one half-open probe."""

from __future__ import annotations

import asyncio
from typing import Any

from assembler.rerank import BreakerState, CircuitBreaker, Deadline, HttpProvider, RerankConfig, RerankFailure
from assembler.rerank.breaker import DEFAULT_COOLDOWN, DEFAULT_THRESHOLD, Admission
from assembler.stages.reorder import RerankCandidate

from .stub import FakeClock, Reply, StubServer, reversing

CANDIDATES = [RerankCandidate("association", 1, "a l o"), RerankCandidate("association", 2, "b l o")]


def fail(breaker: CircuitBreaker, times: int = 1) -> None:
    for _ in range(times):
        admission = breaker.admit()
        assert admission is not None
        breaker.record(admission, False)


def test_the_defaults_are_the_contracts() -> None:
    breaker = CircuitBreaker()
    assert (DEFAULT_THRESHOLD, DEFAULT_COOLDOWN, breaker.probe_reclaim_after) == (3, 30.0, 30.0)


def test_three_consecutive_failed_attempts_open_it_and_any_success_resets_the_count() -> None:
    breaker = CircuitBreaker(clock=FakeClock())
    fail(breaker, 2)
    admission = breaker.admit()
    assert admission is not None
    breaker.record(admission, True)
    fail(breaker, 2)
    snap = breaker.snapshot()
    assert (snap.state, snap.consecutive_failures, snap.opened_total) == (BreakerState.CLOSED, 2, 0)
    fail(breaker)
    snap = breaker.snapshot()
    assert (snap.state, snap.consecutive_failures, snap.opened_total) == (BreakerState.OPEN, 3, 1)


def test_it_refuses_for_the_cooldown_then_admits_exactly_one_probe() -> None:
    clock = FakeClock()
    breaker = CircuitBreaker(clock=clock)
    fail(breaker, 3)
    clock.advance(29.999)
    assert breaker.admit() is None
    clock.advance(0.001)
    probe = breaker.admit()
    assert probe is not None and probe.probe is not None
    assert breaker.snapshot().state is BreakerState.HALF_OPEN
    assert breaker.admit() is None  # one probe at a time
    assert breaker.snapshot().short_circuits_total == 2
    assert breaker.snapshot().consecutive_failures == 3  # pinned at the threshold while half-open
    breaker.record(probe, True)
    snap = breaker.snapshot()
    assert (snap.state, snap.consecutive_failures) == (BreakerState.CLOSED, 0)
    assert breaker.admit() == Admission()


def test_a_failed_probe_opens_it_again_for_a_fresh_cooldown() -> None:
    clock = FakeClock()
    breaker = CircuitBreaker(clock=clock)
    fail(breaker, 3)
    clock.advance(30)
    probe = breaker.admit()
    assert probe is not None
    clock.advance(5)
    breaker.record(probe, False)
    assert breaker.snapshot().state is BreakerState.OPEN
    assert breaker.snapshot().opened_total == 2
    clock.advance(29.9)
    assert breaker.admit() is None
    clock.advance(0.1)
    assert breaker.admit() is not None


def test_a_silent_probe_is_reclaimed_after_the_cooldown_and_its_late_answer_is_ignored() -> None:
    clock = FakeClock()
    breaker = CircuitBreaker(clock=clock)
    fail(breaker, 3)
    clock.advance(30)
    silent = breaker.admit()
    assert silent is not None
    clock.advance(29.9)
    assert breaker.admit() is None
    clock.advance(0.1)  # max(50 ms, cooldown) = 30 s after the claim
    fresh = breaker.admit()
    assert fresh is not None and fresh.probe != silent.probe
    breaker.record(silent, True)  # the straggler answers: ignored
    assert breaker.snapshot().state is BreakerState.HALF_OPEN
    breaker.record(fresh, False)
    assert breaker.snapshot().state is BreakerState.OPEN


def test_with_a_zero_cooldown_a_probe_is_reclaimed_only_after_50_ms() -> None:
    clock = FakeClock()
    clock.now = 0.0
    breaker = CircuitBreaker(threshold=1, cooldown=0, clock=clock)
    fail(breaker)
    probe = breaker.admit()
    assert probe is not None and probe.probe is not None
    clock.now = 0.049
    assert breaker.admit() is None
    clock.now = 0.05
    assert breaker.admit() is not None


def test_an_abandoned_probe_frees_the_slot_without_judging_the_provider() -> None:
    clock = FakeClock()
    breaker = CircuitBreaker(clock=clock)
    fail(breaker, 3)
    clock.advance(30)
    probe = breaker.admit()
    assert probe is not None
    breaker.abandon(probe)
    again = breaker.admit()
    assert again is not None and again.probe is not None
    assert breaker.snapshot().opened_total == 1


def test_failures_of_attempts_admitted_before_it_opened_change_nothing() -> None:
    breaker = CircuitBreaker(clock=FakeClock())
    stragglers = [breaker.admit() for _ in range(5)]
    for admission in stragglers:
        assert admission is not None
        breaker.record(admission, False)
    snap = breaker.snapshot()
    assert (snap.state, snap.opened_total) == (BreakerState.OPEN, 1)


def test_any_success_closes_it_even_while_open() -> None:
    breaker = CircuitBreaker(clock=FakeClock())
    early = breaker.admit()
    assert early is not None
    fail(breaker, 3)
    breaker.record(early, True)
    assert breaker.snapshot().state is BreakerState.CLOSED


def _call(p: HttpProvider) -> Any:
    async def go() -> Any:
        try:
            return await p.rerank("q", CANDIDATES, Deadline.unbounded())
        finally:
            await p.aclose()

    return asyncio.run(go())


def test_through_http_an_outage_opens_it_short_circuits_and_a_probe_recovers(stub: StubServer) -> None:
    clock = FakeClock()
    p = HttpProvider(RerankConfig(url=stub.url, model="m"), breaker=CircuitBreaker(clock=clock))
    stub.behaviour = lambda _seen: Reply(status=503)
    assert _call(p) == RerankFailure("provider_error", retryable=True)  # attempts 1 and 2
    assert _call(p) == RerankFailure("circuit_open", retryable=False)  # attempt 3 opens; its retry is refused
    assert _call(p) == RerankFailure("circuit_open", retryable=False)  # refused before any request
    assert len(stub.requests) == 3
    snap = p.breaker.snapshot()
    assert (snap.state, snap.consecutive_failures, snap.opened_total, snap.short_circuits_total) == (
        BreakerState.OPEN,
        3,
        1,
        2,
    )
    clock.advance(30)
    assert _call(p) == RerankFailure("circuit_open", retryable=False)  # the probe fails, reopens; retry refused
    assert len(stub.requests) == 4 and p.breaker.snapshot().opened_total == 2
    clock.advance(30)
    stub.behaviour = reversing
    assert _call(p) == [1, 0]  # the probe succeeds and closes it
    assert p.breaker.snapshot().state is BreakerState.CLOSED
    assert _call(p) == [1, 0]
    assert len(stub.requests) == 6
