"""Metrics (section 11.5) under the ``assembler_rerank_`` prefix, in a dedicated registry."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from prometheus_client import REGISTRY
from prometheus_client.parser import text_string_to_metric_families

from assembler.errors import UsageError
from assembler.pipeline import assemble_records
from assembler.rerank import OUTCOMES, CircuitBreaker, RerankConfig, RerankMetrics, build_reranker

from .records import MODEL, parsed, record
from .stub import Reply, StubServer


def samples(metrics: RerankMetrics) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(metrics.render().decode())
        for sample in family.samples
    }


def outcome(name: str) -> tuple[str, tuple[tuple[str, str], ...]]:
    return ("assembler_rerank_outcomes_total", (("outcome", name),))


def test_a_fresh_registry_renders_all_eight_outcomes_from_zero_and_the_breaker_families() -> None:
    values = samples(RerankMetrics(CircuitBreaker()))
    assert OUTCOMES == (
        "ok",
        "not_configured",
        "model_mismatch",
        "empty_pool",
        "invalid_permutation",
        "circuit_open",
        "timeout",
        "provider_error",
    )
    assert all(values[outcome(name)] == 0 for name in OUTCOMES)
    assert values[("assembler_rerank_duration_seconds_count", ())] == 0
    for name in (
        "assembler_rerank_breaker_state",
        "assembler_rerank_breaker_consecutive_failures",
        "assembler_rerank_breaker_opened_total",
        "assembler_rerank_breaker_short_circuits_total",
    ):
        assert values[(name, ())] == 0
    assert all(name.startswith("assembler_rerank_") for name, _ in values)
    assert not any(name.endswith("_created") for name, _ in values)


def test_without_a_breaker_the_breaker_families_are_absent() -> None:
    text = RerankMetrics().render().decode()
    assert "assembler_rerank_outcomes_total" in text and "breaker" not in text


def test_the_registry_is_dedicated_not_the_global_one() -> None:
    metrics = RerankMetrics(CircuitBreaker())
    assert metrics.registry is not REGISTRY
    assert REGISTRY.get_sample_value("assembler_rerank_outcomes_total", {"outcome": "ok"}) is None


def test_one_increment_and_one_duration_sample_per_requested_rerank(stub: StubServer) -> None:
    statuses = iter([200, 503, 503, 503])
    stub.behaviour = lambda seen: Reply(status=next(statuses), body=b'{"results":[{"index":1},{"index":0}]}')
    records = parsed(
        record("ok", n=2, rerank={}),
        record("mismatch", rerank={"model": "x"}),
        record("empty", n=1, rerank={}),
        record("not-requested"),
        record("fails", n=2, rerank={}),
        record("opens", n=2, rerank={}),
        record("refused", n=2, rerank={}),
    )
    reranker = build_reranker(RerankConfig(url=stub.url, model=MODEL), concurrency=1)
    assemble_records(records, reranker=reranker)
    values = samples(reranker.metrics)
    expected = {"ok": 1, "model_mismatch": 1, "empty_pool": 1, "provider_error": 1, "circuit_open": 2}
    assert {name: values[outcome(name)] for name in OUTCOMES} == {name: expected.get(name, 0) for name in OUTCOMES}
    assert values[("assembler_rerank_duration_seconds_count", ())] == 6  # not the unrequested one
    assert values[("assembler_rerank_breaker_state", ())] == 1
    assert values[("assembler_rerank_breaker_consecutive_failures", ())] == 3
    assert values[("assembler_rerank_breaker_opened_total", ())] == 1
    assert values[("assembler_rerank_breaker_short_circuits_total", ())] == 2
    assert reranker.outcomes == {name: expected.get(name, 0) for name in OUTCOMES}


def test_an_unknown_outcome_is_refused() -> None:
    with pytest.raises(ValueError):
        RerankMetrics().observe("something else", 0.1)


def test_the_metrics_file_is_written_atomically(tmp_path: Path) -> None:
    metrics = RerankMetrics(CircuitBreaker())
    metrics.observe("ok", 0.02)
    target = tmp_path / "rerank.prom"
    target.write_text("old")
    metrics.write(str(target))
    assert target.read_bytes() == metrics.render()
    assert os.listdir(tmp_path) == ["rerank.prom"]  # no temporary left behind
    with pytest.raises(UsageError):
        metrics.write(str(tmp_path / "missing" / "rerank.prom"))
