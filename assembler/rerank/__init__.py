"""The optional reranker (contract section 11): an HTTP provider that may only reorder survivors.

>>> from assembler.rerank import RerankConfig, build_reranker
>>> reranker = build_reranker(RerankConfig(url="http://127.0.0.1:8080/rerank", model="bge-reranker-v2-m3"))
>>> reranker.outcomes["ok"], reranker.summary_line()
(0, 'rerank (model bge-reranker-v2-m3): 0 requested, 0 reranked, 0 fell back')

Pass it as ``assemble_records(records, reranker=reranker)`` or ``run_assembly(..., reranker=reranker)``.
The HTTP side needs the ``rerank`` extra (httpx, prometheus_client); names are imported on first
use, so ``assembler.cli.rerank`` (the command-line flags) works without it.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from assembler.rerank.breaker import BreakerSnapshot, BreakerState, CircuitBreaker
    from assembler.rerank.config import RerankConfig
    from assembler.rerank.http import MAX_RESPONSE_BYTES, HttpProvider
    from assembler.rerank.prometheus import RerankMetrics
    from assembler.rerank.provider import OUTCOMES, Deadline, RerankFailure, RerankProvider
    from assembler.rerank.reranker import ProviderReranker, build_reranker, plan_text

__all__ = [
    "MAX_RESPONSE_BYTES",
    "OUTCOMES",
    "BreakerSnapshot",
    "BreakerState",
    "CircuitBreaker",
    "Deadline",
    "HttpProvider",
    "ProviderReranker",
    "RerankConfig",
    "RerankFailure",
    "RerankMetrics",
    "RerankProvider",
    "build_reranker",
    "plan_text",
]

_HOMES = {
    "BreakerSnapshot": "breaker",
    "BreakerState": "breaker",
    "CircuitBreaker": "breaker",
    "RerankConfig": "config",
    "MAX_RESPONSE_BYTES": "http",
    "HttpProvider": "http",
    "RerankMetrics": "prometheus",
    "OUTCOMES": "provider",
    "Deadline": "provider",
    "RerankFailure": "provider",
    "RerankProvider": "provider",
    "ProviderReranker": "reranker",
    "build_reranker": "reranker",
    "plan_text": "reranker",
}


def __getattr__(name: str) -> Any:
    if name not in _HOMES:
        raise AttributeError(f"module 'assembler.rerank' has no attribute {name!r}")
    return getattr(importlib.import_module(f"assembler.rerank.{_HOMES[name]}"), name)
