"""The provider interface of section 11.2: a model identity and ``rerank(query, candidates, deadline)``.

A provider answers with a list of indices (not yet checked as a permutation: that is the
reranker's decision, section 11.4) or a :class:`RerankFailure` carrying one of the fixed reason
tokens and whether another attempt could answer differently. Nothing a provider returns ever
carries candidate text, a provider body, a URL or a key.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final, Literal, Protocol

from assembler.rerank.breaker import CircuitBreaker, Clock
from assembler.stages.reorder import RerankCandidate

__all__ = [
    "CIRCUIT_OPEN",
    "EMPTY_POOL",
    "FAILURE_REASONS",
    "INVALID_PERMUTATION",
    "MODEL_MISMATCH",
    "NOT_CONFIGURED",
    "OK",
    "OUTCOMES",
    "PROVIDER_ERROR",
    "TIMEOUT",
    "Deadline",
    "FailureReason",
    "RerankFailure",
    "RerankProvider",
]

OK: Final = "ok"
NOT_CONFIGURED: Final = "not_configured"
MODEL_MISMATCH: Final = "model_mismatch"
EMPTY_POOL: Final = "empty_pool"
INVALID_PERMUTATION: Final = "invalid_permutation"
CIRCUIT_OPEN: Final = "circuit_open"
TIMEOUT: Final = "timeout"
PROVIDER_ERROR: Final = "provider_error"

OUTCOMES: Final = (
    OK,
    NOT_CONFIGURED,
    MODEL_MISMATCH,
    EMPTY_POOL,
    INVALID_PERMUTATION,
    CIRCUIT_OPEN,
    TIMEOUT,
    PROVIDER_ERROR,
)
"""Every outcome label of section 11.5, in the contract's order."""

FailureReason = Literal["circuit_open", "timeout", "provider_error"]
FAILURE_REASONS: Final = (CIRCUIT_OPEN, TIMEOUT, PROVIDER_ERROR)


@dataclass(frozen=True)
class RerankFailure:
    """One failed rerank: a fixed reason token (safe for a plan or a metric label) and retryability."""

    reason: FailureReason
    retryable: bool


class Deadline:
    """A point in time on ``clock`` after which the caller no longer waits.

    >>> now = [10.0]
    >>> deadline = Deadline.after(0.5, clock=lambda: now[0])
    >>> deadline.remaining(), deadline.expired()
    (0.5, False)
    >>> now[0] = 11.0
    >>> deadline.remaining(), deadline.expired()
    (0.0, True)
    """

    __slots__ = ("at", "clock")

    def __init__(self, at: float, clock: Clock = time.monotonic) -> None:
        self.at = at
        self.clock = clock

    @classmethod
    def after(cls, seconds: float, clock: Clock = time.monotonic) -> Deadline:
        """A deadline ``seconds`` from now."""
        return cls(clock() + seconds, clock)

    @classmethod
    def unbounded(cls) -> Deadline:
        """A deadline that never expires."""
        return cls(math.inf)

    def remaining(self) -> float:
        """Seconds left, never negative."""
        return max(0.0, self.at - self.clock())

    def expired(self) -> bool:
        """Whether the deadline has passed."""
        return self.clock() >= self.at


class RerankProvider(Protocol):
    """A reranking service (section 11.2). :class:`~assembler.rerank.http.HttpProvider` is the real one."""

    @property
    def model(self) -> str:
        """The model identity: compared with ``rerank.model`` and reported in ``plan.reranker.model``."""
        ...

    @property
    def breaker(self) -> CircuitBreaker | None:
        """The provider's circuit breaker, if it has one (rendered in the metrics)."""
        ...

    async def rerank(
        self, query: str, candidates: Sequence[RerankCandidate], deadline: Deadline
    ) -> list[int] | RerankFailure:
        """Indices in the provider's preferred order, or a failure; never raises for a provider fault."""
        ...

    async def aclose(self) -> None:
        """Release what the provider holds for the current event loop (connections)."""
        ...
