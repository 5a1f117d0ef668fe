"""Batch behaviour: bounded concurrency, per-query deadlines, query order, one breaker opening per outage."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from assembler.pipeline import assemble_records
from assembler.rerank import BreakerState, RerankConfig, build_reranker, plan_text
from assembler.run.local import run_assembly
from assembler.run.options import RunOptions

from .records import MODEL, baseline, fused_ranks, parsed, record, reranker_plan, same_but_plan
from .stub import Reply, Seen, StubServer, reversing


def test_an_outage_opens_the_breaker_once_and_the_rest_of_the_batch_falls_back_at_once(stub: StubServer) -> None:
    stub.behaviour = lambda _seen: Reply(status=503)
    records = parsed(*(record(f"q{i:02}", rerank={}) for i in range(20)))
    reranker = build_reranker(RerankConfig(url=stub.url, model=MODEL), concurrency=1)
    started = time.perf_counter()
    packages = assemble_records(records, reranker=reranker).packages
    assert time.perf_counter() - started < 3
    # q00: attempts 1 and 2 fail (provider_error); q01: attempt 3 opens the breaker, its retry is
    # refused (circuit_open); q02..q19: refused before any request.
    assert len(stub.requests) == 3
    assert reranker.fallbacks == {"circuit_open": 19, "provider_error": 1}
    assert reranker.summary_line() == (
        f"rerank (model {MODEL}): 20 requested, 0 reranked, 20 fell back (circuit_open 19, provider_error 1); "
        "2 attempts retried after a transient failure (provider_error 2)"  # one line for the run, not one per retry
    )
    breaker = reranker.provider.breaker
    assert breaker is not None
    snap = breaker.snapshot()
    assert (snap.state, snap.opened_total, snap.short_circuits_total) == (BreakerState.OPEN, 1, 19)
    for package, base in zip(packages, baseline(records), strict=True):
        assert same_but_plan(package, base, plan_text(reranker_plan(package)["reason"], MODEL))


def test_with_concurrency_the_queries_in_flight_may_differ_but_the_breaker_opens_once(stub: StubServer) -> None:
    stub.behaviour = lambda _seen: Reply(status=503)
    records = parsed(*(record(f"q{i:02}", rerank={}) for i in range(40)))
    reranker = build_reranker(RerankConfig(url=stub.url, model=MODEL), concurrency=4)
    packages = assemble_records(records, reranker=reranker).packages
    breaker = reranker.provider.breaker
    assert breaker is not None and breaker.snapshot().opened_total == 1
    assert len(stub.requests) <= 8  # at most the first wave and its retries
    assert set(reranker.fallbacks) <= {"provider_error", "circuit_open"}
    assert reranker.fallbacks["circuit_open"] >= 40 - 4
    assert sum(reranker.outcomes.values()) == 40
    for package, base in zip(packages, baseline(records), strict=True):
        assert same_but_plan(package, base, plan_text(reranker_plan(package)["reason"], MODEL))


def test_at_most_concurrency_queries_are_in_flight_and_decisions_keep_query_order(stub: StubServer) -> None:
    def slow_reverse(seen: Seen) -> Reply:
        time.sleep(0.05)
        return reversing(seen)

    stub.behaviour = slow_reverse
    sizes = [2, 5, 3, 6, 4, 2, 7, 3, 5]
    records = parsed(*(record(f"q{i}", n=n, rerank={}) for i, n in enumerate(sizes)))
    reranker = build_reranker(RerankConfig(url=stub.url, model=MODEL), concurrency=3)
    packages = assemble_records(records, reranker=reranker).packages
    assert stub.max_in_flight == 3
    for package, n in zip(packages, sizes, strict=True):
        assert fused_ranks(package) == list(range(n, 0, -1))  # each query got its own permutation
    assert reranker.outcomes["ok"] == len(sizes)


def test_each_query_deadline_starts_when_its_own_call_starts(stub: StubServer) -> None:
    def slow_reverse(seen: Seen) -> Reply:
        time.sleep(0.1)
        return reversing(seen)

    stub.behaviour = slow_reverse
    records = parsed(*(record(f"q{i}", rerank={}) for i in range(12)))
    # Twelve 100 ms calls two at a time take ~600 ms in all, longer than any one query's 500 ms deadline.
    reranker = build_reranker(RerankConfig(url=stub.url, model=MODEL), concurrency=2, deadline_secs=0.5)
    started = time.perf_counter()
    assemble_records(records, reranker=reranker)
    assert time.perf_counter() - started > 0.5
    assert reranker.outcomes["ok"] == 12


def test_a_slow_outage_costs_each_query_at_most_its_deadline(stub: StubServer) -> None:
    stub.behaviour = lambda _seen: Reply(delay=5)
    records = parsed(*(record(f"q{i}", rerank={}) for i in range(12)))
    reranker = build_reranker(RerankConfig(url=stub.url, model=MODEL), concurrency=1, deadline_secs=0.1)
    started = time.perf_counter()
    assemble_records(records, reranker=reranker)
    # Three deadline-bound timeouts open the breaker; nine queries are refused at once.
    assert reranker.fallbacks == {"timeout": 3, "circuit_open": 9}
    assert len(stub.requests) == 3
    assert time.perf_counter() - started < 2


def test_run_assembly_reranks_every_chunk_and_accumulates_the_counts(stub: StubServer, tmp_path: Path) -> None:
    raw = [record(f"q{i}", rerank={} if i % 3 else None) for i in range(10)]
    lanes = tmp_path / "lanes.jsonl"
    lanes.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in raw), encoding="utf-8")
    reranker = build_reranker(RerankConfig(url=stub.url, model=MODEL))
    out = tmp_path / "packages.jsonl"
    summary = run_assembly([str(lanes)], str(out), RunOptions(chunk_size=4, reranker=reranker))
    assert summary.queries == 10
    assert reranker.outcomes["ok"] == 6 and reranker.requested == 6
    plans = [reranker_plan(json.dumps(json.loads(line)["package"])) for line in out.read_text().splitlines()]
    assert plans.count({"configured": True, "ran": True, "model": MODEL}) == 6
    assert plans.count({"configured": True, "ran": False}) == 4
    assert len(stub.requests) == 6


@pytest.mark.parametrize("concurrency", [0, -1])
def test_concurrency_must_be_positive(concurrency: int) -> None:
    with pytest.raises(ValueError):
        build_reranker(RerankConfig(url="http://127.0.0.1:9/rerank", model=MODEL), concurrency=concurrency)
