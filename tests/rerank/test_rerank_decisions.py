"""Section 11.4's decision table end to end: lane records -> assemble_records -> HTTP stub -> packages."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence

import pytest

from assembler.pipeline import assemble_records
from assembler.rerank import (
    CircuitBreaker,
    Deadline,
    ProviderReranker,
    RerankConfig,
    RerankFailure,
    build_reranker,
    plan_text,
)
from assembler.stages.reorder import RerankCandidate

from .records import (
    CONFIGURED_NOT_REQUESTED,
    MODEL,
    baseline,
    fused_ranks,
    parsed,
    record,
    reranker_plan,
    same_but_plan,
)
from .stub import FakeClock, Reply, StubServer, closed_port_url, results


def http_reranker(url: str, *, deadline: float = 2.0, breaker: CircuitBreaker | None = None) -> ProviderReranker:
    return build_reranker(
        RerankConfig(url=url, model=MODEL, api_key="sk-test", timeout_secs=2), deadline_secs=deadline, breaker=breaker
    )


def test_a_reversing_reranker_reverses_admission_order_and_reports_its_model(stub: StubServer) -> None:
    records = parsed(record(rerank={}))
    reranker = http_reranker(stub.url)
    [package] = assemble_records(records, reranker=reranker).packages
    [base] = baseline(records)
    assert reranker_plan(package) == {"configured": True, "ran": True, "model": MODEL}
    assert fused_ranks(package) == [4, 3, 2, 1]
    assert [item["association"]["subject"] for item in json.loads(package)["items"]] == ["s4", "s3", "s2", "s1"]
    assert sorted(fused_ranks(package)) == sorted(fused_ranks(base))  # same set, only the order changed
    unplanned = {**json.loads(package), "items": None}
    unplanned["plan"]["reranker"] = None
    expected = {**json.loads(base), "items": None}
    expected["plan"]["reranker"] = None
    assert unplanned == expected  # usage, omissions and the rest of the plan are unchanged
    assert reranker.outcomes["ok"] == 1


def test_the_provider_sees_the_canonical_query_and_the_text_of_each_kind_in_fused_order(stub: StubServer) -> None:
    records = parsed(
        record("with-fallback", n=2, rerank={}, passages=["passage body"], communities=["community summary"]),
        record("origins-only", n=2, rerank={}, fallback=None),
    )
    assemble_records(records, reranker=http_reranker(stub.url))
    first, second = sorted((seen.json for seen in stub.requests), key=lambda body: -len(body["documents"]))
    assert first["query"] == "what do they like"
    assert first["documents"] == ["s1 likes sushi", "community summary", "passage body", "s2 likes sushi"]
    assert first["top_n"] == 4 and first["model"] == MODEL
    assert second["query"] == "s1; s2"


def test_configured_but_not_requested_reports_configured_true_and_touches_nothing(stub: StubServer) -> None:
    records = parsed(record())
    reranker = http_reranker(stub.url)
    [package] = assemble_records(records, reranker=reranker).packages
    assert reranker_plan(package) == {"configured": True, "ran": False}
    assert stub.requests == []
    assert reranker.requested == 0
    assert b"assembler_rerank_duration_seconds_count 0.0" in reranker.metrics.render()


@pytest.mark.parametrize("pin", [{"model": "other-model"}, {"model": MODEL.upper()}, {"model": ""}])
def test_a_model_mismatch_skips_the_provider(stub: StubServer, pin: dict[str, str]) -> None:
    records = parsed(record(rerank=pin))
    reranker = http_reranker(stub.url)
    [package] = assemble_records(records, reranker=reranker).packages
    assert reranker_plan(package) == {"configured": True, "ran": False, "reason": "model_mismatch"}
    assert same_but_plan(package, baseline(records)[0], plan_text("model_mismatch", MODEL))
    assert stub.requests == []


@pytest.mark.parametrize("pin", [{"model": MODEL}, {}, {"model": None}])
def test_a_matching_or_absent_model_pin_calls_the_provider(stub: StubServer, pin: dict[str, str | None]) -> None:
    [package] = assemble_records(parsed(record(rerank=pin)), reranker=http_reranker(stub.url)).packages
    assert reranker_plan(package)["ran"] is True
    assert len(stub.requests) == 1


@pytest.mark.parametrize("n", [0, 1])
def test_fewer_than_two_survivors_skips_the_provider(stub: StubServer, n: int) -> None:
    records = parsed(record(n=n, rerank={}))
    reranker = http_reranker(stub.url)
    [package] = assemble_records(records, reranker=reranker).packages
    assert reranker_plan(package) == {"configured": True, "ran": False, "reason": "empty_pool"}
    assert same_but_plan(package, baseline(records)[0], plan_text("empty_pool", MODEL))
    assert stub.requests == []


def test_near_duplicates_are_removed_before_the_pool_is_counted(stub: StubServer) -> None:
    text = "the quick brown fox jumps over the lazy dog"
    records = parsed(record(n=0, rerank={}, passages=[text, text + "s"]))
    [package] = assemble_records(records, reranker=http_reranker(stub.url)).packages
    assert reranker_plan(package)["reason"] == "empty_pool"  # two passages, one survivor
    assert stub.requests == []


@pytest.mark.parametrize(
    "indices", [[3, 2, 1], [3, 2, 1, 0, 0], [0, 0, 1, 2], [0, 1, 2, 9]], ids=["short", "long", "duplicate", "range"]
)
def test_a_non_permutation_falls_back_byte_identically(stub: StubServer, indices: list[int]) -> None:
    stub.behaviour = lambda _seen: results(indices)
    records = parsed(record(rerank={}))
    reranker = http_reranker(stub.url)
    [package] = assemble_records(records, reranker=reranker).packages
    assert reranker_plan(package) == {"configured": True, "ran": False, "reason": "invalid_permutation"}
    assert same_but_plan(package, baseline(records)[0], plan_text("invalid_permutation", MODEL))
    assert reranker.provider.breaker is not None
    assert reranker.provider.breaker.snapshot().consecutive_failures == 0  # the provider did answer


@pytest.mark.parametrize(
    ("reply", "reason"),
    [
        (Reply(status=500), "provider_error"),
        (Reply(status=503), "provider_error"),
        (Reply(status=404), "provider_error"),
        (Reply(body=b"not json"), "provider_error"),
        (Reply(body=b'{"items":[]}'), "provider_error"),
        (Reply(body=b'{"results":[{"index":-1}]}'), "provider_error"),
        (Reply(delay=5), "timeout"),
    ],
    ids=["500", "503", "404", "non-json", "no-results", "bad-index", "silent"],
)
def test_a_provider_failure_falls_back_byte_identically(stub: StubServer, reply: Reply, reason: str) -> None:
    stub.behaviour = lambda _seen: reply
    records = parsed(record(rerank={}), record("q2"))
    reranker = http_reranker(stub.url, deadline=0.2 if reason == "timeout" else 2)
    packages = assemble_records(records, reranker=reranker).packages
    assert reranker_plan(packages[0]) == {"configured": True, "ran": False, "reason": reason}
    base = baseline(records)
    assert same_but_plan(packages[0], base[0], plan_text(reason, MODEL))
    assert same_but_plan(packages[1], base[1], CONFIGURED_NOT_REQUESTED)
    assert reranker.outcomes[reason] == 1


def test_an_unreachable_provider_falls_back_byte_identically() -> None:
    records = parsed(record(rerank={}))
    [package] = assemble_records(records, reranker=http_reranker(closed_port_url())).packages
    assert same_but_plan(package, baseline(records)[0], plan_text("provider_error", MODEL))


def test_an_open_breaker_is_circuit_open_without_a_request(stub: StubServer) -> None:
    breaker = CircuitBreaker(clock=FakeClock())
    for _ in range(3):
        admission = breaker.admit()
        assert admission is not None
        breaker.record(admission, False)
    records = parsed(record(rerank={}))
    [package] = assemble_records(records, reranker=http_reranker(stub.url, breaker=breaker)).packages
    assert same_but_plan(package, baseline(records)[0], plan_text("circuit_open", MODEL))
    assert stub.requests == []


def test_an_expired_deadline_still_calls_the_provider_once_and_reports_timeout(stub: StubServer) -> None:
    class Counting:
        model = MODEL
        breaker = None
        calls = 0

        async def rerank(
            self, query: str, candidates: Sequence[RerankCandidate], deadline: Deadline
        ) -> list[int] | RerankFailure:
            self.calls += 1
            assert deadline.expired()
            return RerankFailure("timeout", retryable=False)

        async def aclose(self) -> None:
            pass

    provider = Counting()
    reranker = ProviderReranker(provider, deadline_secs=0)
    [package] = assemble_records(parsed(record(rerank={})), reranker=reranker).packages
    assert provider.calls == 1
    assert reranker_plan(package)["reason"] == "timeout" and reranker.outcomes["timeout"] == 1


def test_a_provider_that_raises_is_a_provider_error(stub: StubServer) -> None:
    class Raising:
        model = MODEL
        breaker = None

        async def rerank(
            self, query: str, candidates: Sequence[RerankCandidate], deadline: Deadline
        ) -> list[int] | RerankFailure:
            raise RuntimeError("boom")

        async def aclose(self) -> None:
            pass

    records = parsed(record(rerank={}))
    [package] = assemble_records(records, reranker=ProviderReranker(Raising())).packages
    assert same_but_plan(package, baseline(records)[0], plan_text("provider_error", MODEL))


def test_under_a_tight_budget_the_reordered_list_decides_which_units_fit(stub: StubServer) -> None:
    records = parsed(record(rerank={}, budget={"max_items": 2}))
    [package] = assemble_records(records, reranker=http_reranker(stub.url)).packages
    assert fused_ranks(package) == [4, 3]
    assert json.loads(package)["omitted_by_reason"] == {"budget_exceeded": 2}


def test_the_model_string_is_escaped_in_the_plan(stub: StubServer) -> None:
    reranker = build_reranker(RerankConfig(url=stub.url, model='m "quoted" \\ 日本'))
    [package] = assemble_records(parsed(record(rerank={})), reranker=reranker).packages
    assert reranker_plan(package) == {"configured": True, "ran": True, "model": 'm "quoted" \\ 日本'}


def test_decide_works_from_inside_a_running_event_loop(stub: StubServer) -> None:
    async def inside() -> list[str]:
        return assemble_records(parsed(record(rerank={})), reranker=http_reranker(stub.url)).packages

    [package] = asyncio.run(inside())
    assert reranker_plan(package)["ran"] is True
