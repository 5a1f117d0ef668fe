"""The provider's circuit breaker (section 11.3): counted per attempt, one half-open probe at a time.

Closed, it admits every attempt and counts consecutive failures; the ``threshold``-th opens it.
Open, it refuses for ``cooldown`` seconds, then admits exactly one probe (half-open): the probe's
success closes it, its failure opens it again for a fresh cooldown. Any success closes it. A probe
that never reports is reclaimed after ``max(50 ms, cooldown)``, and a reclaimed probe's late
outcome is ignored (each probe claim carries a generation). Failures reported by ordinary attempts
while it is already open or half-open change nothing: an open breaker needs no more evidence.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from enum import IntEnum

__all__ = [
    "DEFAULT_COOLDOWN",
    "DEFAULT_THRESHOLD",
    "MIN_PROBE_RECLAIM",
    "Admission",
    "BreakerSnapshot",
    "BreakerState",
    "CircuitBreaker",
    "Clock",
]

Clock = Callable[[], float]
"""Seconds on a monotonic scale (``time.monotonic`` unless a test injects its own)."""

DEFAULT_THRESHOLD = 3
DEFAULT_COOLDOWN = 30.0
MIN_PROBE_RECLAIM = 0.05


class BreakerState(IntEnum):
    """The breaker state as the metrics render it."""

    CLOSED = 0
    OPEN = 1
    HALF_OPEN = 2


@dataclass(frozen=True)
class Admission:
    """An admitted attempt: ordinary (``probe`` None) or the half-open probe of one generation."""

    probe: int | None = None


@dataclass(frozen=True)
class BreakerSnapshot:
    """One reading for the metrics; ``consecutive_failures`` is pinned at the threshold unless closed."""

    state: BreakerState
    consecutive_failures: int
    opened_total: int
    short_circuits_total: int


class CircuitBreaker:
    """Thread-safe breaker with an injectable clock (seconds, monotonic)."""

    def __init__(
        self, threshold: int = DEFAULT_THRESHOLD, cooldown: float = DEFAULT_COOLDOWN, clock: Clock = time.monotonic
    ) -> None:
        self.threshold = max(1, threshold)
        self.cooldown = cooldown
        self.clock = clock
        self._lock = threading.Lock()
        self._state = BreakerState.CLOSED
        self._failures = 0
        self._since = 0.0  # when it opened, or when the current probe was claimed
        self._probing = False
        self._generation = 0
        self._opened_total = 0
        self._short_circuits_total = 0

    @property
    def probe_reclaim_after(self) -> float:
        """How long a claimed probe may stay silent before another caller may claim the slot."""
        return max(MIN_PROBE_RECLAIM, self.cooldown)

    def admit(self) -> Admission | None:
        """Gate one attempt: an :class:`Admission`, or None (refused, counted as a short-circuit)."""
        with self._lock:
            now = self.clock()
            if self._state is BreakerState.CLOSED:
                return Admission()
            if self._state is BreakerState.OPEN and now - self._since < self.cooldown:
                self._short_circuits_total += 1
                return None
            if self._state is BreakerState.HALF_OPEN and self._probing and now - self._since < self.probe_reclaim_after:
                self._short_circuits_total += 1
                return None
            # Cooldown over, or a half-open slot that is idle or whose probe went silent: claim it.
            self._state = BreakerState.HALF_OPEN
            self._probing = True
            self._since = now
            self._generation += 1
            return Admission(self._generation)

    def record(self, admission: Admission, ok: bool) -> None:
        """Report an admitted attempt's outcome."""
        with self._lock:
            if admission.probe is not None and not (
                self._state is BreakerState.HALF_OPEN and self._generation == admission.probe
            ):
                return  # a reclaimed probe's late answer: the current claim decides
            if ok:
                self._state = BreakerState.CLOSED
                self._failures = 0
                self._probing = False
                return
            if admission.probe is not None:
                self._open()
            elif self._state is BreakerState.CLOSED:
                self._failures += 1
                if self._failures >= self.threshold:
                    self._open()

    def abandon(self, admission: Admission) -> None:
        """Release an admitted attempt that produced no outcome (cancelled): no evidence either way."""
        with self._lock:
            if self._state is BreakerState.HALF_OPEN and admission.probe == self._generation:
                self._probing = False

    def snapshot(self) -> BreakerSnapshot:
        """The current state and counters."""
        with self._lock:
            closed = self._state is BreakerState.CLOSED
            return BreakerSnapshot(
                state=self._state,
                consecutive_failures=self._failures if closed else self.threshold,
                opened_total=self._opened_total,
                short_circuits_total=self._short_circuits_total,
            )

    def _open(self) -> None:
        self._state = BreakerState.OPEN
        self._since = self.clock()
        self._probing = False
        self._opened_total += 1
