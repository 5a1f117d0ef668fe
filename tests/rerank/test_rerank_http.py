"""The HTTP adapter (section 11.3) against a real server on loopback: request, decoding, retry, timeouts."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import pytest

from assembler.rerank import MAX_RESPONSE_BYTES, CircuitBreaker, Deadline, HttpProvider, RerankConfig, RerankFailure
from assembler.stages.reorder import RerankCandidate

from .stub import FakeClock, Reply, StubServer, closed_port_url, results

CANDIDATES = [RerankCandidate("association", 1, "s1 likes sushi"), RerankCandidate("passage", 2, "酒蔵の話")]
PROVIDER_ERROR = RerankFailure("provider_error", retryable=False)


def provider(
    url: str, *, timeout: float = 5, key: str | None = None, breaker: CircuitBreaker | None = None
) -> HttpProvider:
    return HttpProvider(RerankConfig(url=url, model="m", api_key=key, timeout_secs=timeout), breaker=breaker)


def call(p: HttpProvider, deadline: Deadline | None = None, candidates: list[RerankCandidate] = CANDIDATES) -> Any:
    async def go() -> Any:
        try:
            return await p.rerank("what is brewed", candidates, deadline or Deadline.unbounded())
        finally:
            await p.aclose()

    return asyncio.run(go())


def test_a_successful_response_decodes_the_named_permutation_and_the_request_matches_the_contract(
    stub: StubServer,
) -> None:
    stub.behaviour = lambda _seen: results([1, 0])
    url = stub.url.replace("/rerank", "/v1/rerank?api-version=2")
    assert call(provider(url, key="sk-test")) == [1, 0]
    [seen] = stub.requests
    assert seen.method == "POST" and seen.path == "/v1/rerank?api-version=2"  # exactly as configured
    assert seen.headers["content-type"] == "application/json"
    assert seen.headers["authorization"] == "Bearer sk-test"
    expected = {"documents": ["s1 likes sushi", "酒蔵の話"], "model": "m", "query": "what is brewed", "top_n": 2}
    assert seen.body == json.dumps(expected, ensure_ascii=False, separators=(",", ":")).encode()


def test_no_key_sends_no_authorization_and_an_empty_key_is_still_sent(stub: StubServer) -> None:
    call(provider(stub.url))
    call(provider(stub.url, key=""))
    without, empty = stub.requests
    assert "authorization" not in without.headers
    assert empty.headers["authorization"].strip() == "Bearer"


def test_relevance_scores_and_extra_fields_are_ignored_only_the_array_order_counts(stub: StubServer) -> None:
    body = {"id": "x", "results": [{"index": 1, "relevance_score": 0.1, "document": {"text": "t"}}, {"index": 0}]}
    stub.behaviour = lambda _seen: Reply(body=json.dumps(body).encode())
    assert call(provider(stub.url)) == [1, 0]


@pytest.mark.parametrize("indices", [[0, 0], [0], [0, 1, 2], [0, 7]], ids=["duplicate", "short", "long", "range"])
def test_a_well_formed_non_permutation_is_returned_as_is_for_the_reranker_to_judge(
    stub: StubServer, indices: list[int]
) -> None:
    stub.behaviour = lambda _seen: results(indices)
    assert call(provider(stub.url)) == indices


@pytest.mark.parametrize("status", [500, 502, 503, 429])
def test_a_retryable_failure_is_retried_once_then_gives_up(stub: StubServer, status: int) -> None:
    stub.behaviour = lambda _seen: Reply(status=status, body=b"overloaded")
    p = provider(stub.url)
    started = time.perf_counter()
    assert call(p) == RerankFailure("provider_error", retryable=True)
    assert len(stub.requests) == 2
    assert time.perf_counter() - started >= 0.1  # the flat 100 ms backoff
    assert p.retried == {"provider_error": 1}  # counted for the run's summary, not logged each time


@pytest.mark.parametrize("status", [400, 401, 404, 422, 307])
def test_a_permanent_failure_is_not_retried(stub: StubServer, status: int) -> None:
    stub.behaviour = lambda _seen: Reply(status=status, headers={"Location": "/elsewhere"})
    assert call(provider(stub.url)) == PROVIDER_ERROR
    assert [seen.path for seen in stub.requests] == ["/rerank"]  # one request; a redirect is not followed


def _body(text: bytes) -> Any:
    return lambda _seen: Reply(body=text)


@pytest.mark.parametrize(
    "body",
    [
        b"<html>not json</html>",
        b"",
        b'{"data":[{"index":0},{"index":1}]}',
        b'{"results":{"index":0}}',
        b'[{"index":0},{"index":1}]',
        b'{"results":[{"index":"not-a-number"},{"index":0}]}',
        b'{"results":[{"index":-1},{"index":0}]}',
        b'{"results":[{"index":1.0},{"index":0}]}',
        b'{"results":[{"index":1e0},{"index":0}]}',
        b'{"results":[{"index":true},{"index":0}]}',
        b'{"results":[{"index":null},{"index":0}]}',
        b'{"results":[{"relevance_score":1},{"index":0}]}',
        b'{"results":[1,0]}',
        b'{"results":[{"index":18446744073709551616},{"index":0}]}',
        b'{"results":[{"index":NaN}]}',
        b'{"results":[{"index":1},{"index":0}]',
        b'\xff{"results":[]}',
        b"[" * 100_000,
    ],
    ids=lambda body: body[:40].decode("latin-1"),
)
def test_a_malformed_body_is_a_provider_error_and_not_retried(stub: StubServer, body: bytes) -> None:
    stub.behaviour = _body(body)
    assert call(provider(stub.url)) == PROVIDER_ERROR
    assert len(stub.requests) == 1


def test_the_largest_u64_index_decodes_and_is_judged_later(stub: StubServer) -> None:
    stub.behaviour = _body(b'{"results":[{"index":18446744073709551615},{"index":0}]}')
    assert call(provider(stub.url)) == [2**64 - 1, 0]


def _padded(size: int) -> bytes:
    head = b'{"results":[{"index":1},{"index":0}],"pad":"'
    return head + b"x" * (size - len(head) - 2) + b'"}'


@pytest.mark.parametrize("chunked", [False, True], ids=["content-length", "chunked"])
def test_a_body_over_the_response_cap_is_a_provider_error(stub: StubServer, chunked: bool) -> None:
    stub.behaviour = lambda _seen: Reply(body=_padded(MAX_RESPONSE_BYTES + 1024), chunked=chunked)
    assert call(provider(stub.url)) == PROVIDER_ERROR
    assert len(stub.requests) == 1


@pytest.mark.parametrize("chunked", [False, True], ids=["content-length", "chunked"])
def test_a_body_of_exactly_the_cap_is_read(stub: StubServer, chunked: bool) -> None:
    body = _padded(MAX_RESPONSE_BYTES)
    assert len(body) == 4 * 1024 * 1024
    stub.behaviour = lambda _seen: Reply(body=body, chunked=chunked)
    assert call(provider(stub.url)) == [1, 0]


def test_an_unreachable_provider_is_a_retryable_provider_error() -> None:
    p = provider(closed_port_url())
    assert call(p) == RerankFailure("provider_error", retryable=True)
    assert p.breaker.snapshot().consecutive_failures == 2  # two attempts


def test_a_deadline_driven_transport_timeout_is_reported_as_timeout(stub: StubServer) -> None:
    stub.behaviour = lambda _seen: Reply(delay=5)  # silent past the deadline
    p = provider(stub.url, timeout=5)
    started = time.perf_counter()
    assert call(p, Deadline.after(0.05)) == RerankFailure("timeout", retryable=False)
    assert time.perf_counter() - started < 1
    assert len(stub.requests) == 1


def test_a_provider_timeout_before_the_deadline_is_a_retryable_provider_error(stub: StubServer) -> None:
    stub.behaviour = lambda _seen: Reply(delay=5)
    p = provider(stub.url, timeout=0.15)
    started = time.perf_counter()
    assert call(p, Deadline.after(5)) == RerankFailure("provider_error", retryable=True)
    assert len(stub.requests) == 2
    assert 0.4 <= time.perf_counter() - started < 1.5  # two 150 ms attempts and the 100 ms backoff


def test_the_second_attempt_is_bounded_by_what_is_left_of_the_deadline(stub: StubServer) -> None:
    stub.behaviour = lambda _seen: Reply(delay=5)
    p = provider(stub.url, timeout=0.2)
    started = time.perf_counter()
    # First attempt: 200 ms provider timeout (deadline 350 ms away) -> retryable; backoff 100 ms;
    # second attempt gets the ~50 ms left and ends with the deadline -> timeout.
    assert call(p, Deadline.after(0.35)) == RerankFailure("timeout", retryable=False)
    assert len(stub.requests) == 2
    assert time.perf_counter() - started < 0.9


def test_the_retry_backoff_is_capped_by_the_remaining_deadline(
    stub: StubServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    stub.behaviour = lambda _seen: Reply(status=503)
    slept: list[float] = []
    real_sleep = asyncio.sleep

    async def recording_sleep(seconds: float) -> None:
        slept.append(seconds)
        await real_sleep(seconds)

    monkeypatch.setattr("assembler.rerank.http.asyncio.sleep", recording_sleep)
    p = provider(stub.url)
    clock = FakeClock()  # the deadline's clock stands still: 60 ms remain throughout
    assert call(p, Deadline(clock() + 0.06, clock)) == RerankFailure("provider_error", retryable=True)
    assert len(stub.requests) == 2 and slept == [pytest.approx(0.06)]
    slept.clear()
    assert call(provider(stub.url), Deadline.after(5)).reason == "provider_error"
    assert slept == [0.1]


def test_an_expired_deadline_is_timeout_without_a_request(stub: StubServer) -> None:
    p = provider(stub.url)
    assert call(p, Deadline.after(0)) == RerankFailure("timeout", retryable=False)
    assert stub.requests == []
    assert p.breaker.snapshot().consecutive_failures == 0


def test_a_body_that_stalls_after_the_headers_is_a_body_read_error(stub: StubServer) -> None:
    stub.behaviour = lambda _seen: Reply(body=b'{"results":[{"index":1},{"index":0}]}', partial=5, delay=5)
    p = provider(stub.url)
    started = time.perf_counter()
    assert call(p, Deadline.after(0.5)) == PROVIDER_ERROR  # not timeout, and not retried (as Taguru's decode)
    assert len(stub.requests) == 1
    assert time.perf_counter() - started < 2


def test_the_attempt_timeout_is_wall_clock_not_per_read(stub: StubServer) -> None:
    # One byte every 50 ms: every read is quick, but the whole body would take about two seconds.
    stub.behaviour = lambda _seen: Reply(body=b'{"results":[{"index":1},{"index":0}]}', drip=0.05)
    p = provider(stub.url, timeout=0.2)
    started = time.perf_counter()
    assert call(p, Deadline.after(5)) == PROVIDER_ERROR  # cut while reading the body
    assert time.perf_counter() - started < 1.0
    assert len(stub.requests) == 1


def test_the_breaker_opens_and_the_retry_of_the_opening_call_reports_circuit_open(stub: StubServer) -> None:
    stub.behaviour = lambda _seen: Reply(status=503)
    p = provider(stub.url, breaker=CircuitBreaker(threshold=2))
    assert call(p) == RerankFailure("provider_error", retryable=True)
    assert len(stub.requests) == 2
    assert call(p) == RerankFailure("circuit_open", retryable=False)
    assert len(stub.requests) == 2  # no new request
    p3 = provider(stub.url, breaker=CircuitBreaker(threshold=3))
    assert call(p3).reason == "provider_error"
    assert call(p3) == RerankFailure("circuit_open", retryable=False)  # 3rd attempt opened it; the retry is refused
    assert len(stub.requests) == 5


def test_a_huge_configured_timeout_still_works(stub: StubServer) -> None:
    assert call(provider(stub.url, timeout=2**64 - 1), Deadline.after(2**64 - 1)) == [1, 0]


def test_a_non_ascii_key_is_sent_as_its_utf8_bytes(stub: StubServer) -> None:
    call(provider(stub.url, key="sk-ké"))
    assert stub.requests[0].headers["authorization"] == "Bearer sk-ké".encode().decode("latin-1")


def test_a_key_that_cannot_be_a_header_value_forced_past_the_config_is_a_provider_error(stub: StubServer) -> None:
    # RerankConfig refuses such a key (test_rerank_config.py); the provider still sends nothing.
    config = RerankConfig(url=stub.url, model="m")
    object.__setattr__(config, "api_key", "sk\nInjected: 1")
    assert call(HttpProvider(config)).reason == "provider_error"
    assert stub.requests == []
