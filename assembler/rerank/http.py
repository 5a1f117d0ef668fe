"""The Cohere/Jina-compatible HTTP provider of section 11.3, on httpx.

``POST`` to the URL exactly as configured, ``{"documents","model","query","top_n"}`` in (keys in
serde_json's alphabetical order), ``{"results":[{"index":i,...},...]}`` out; the array order of
``results`` is the permutation. At most 4 MiB of response is read. Every attempt is bounded by
``min(timeout, deadline remaining)`` of wall-clock time (send, headers and body together), goes
through the circuit breaker, and a retryable failure is retried once after ``min(100 ms,
remaining)``. Failures are the fixed tokens only: no status text, body, URL or key is kept.
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import ssl
from collections import Counter
from collections.abc import Sequence
from typing import Any

import httpx

from assembler.errors import UsageError
from assembler.rerank.breaker import Admission, CircuitBreaker
from assembler.rerank.config import RerankConfig, url_problem
from assembler.rerank.provider import PROVIDER_ERROR, TIMEOUT, Deadline, RerankFailure
from assembler.stages.reorder import RerankCandidate

__all__ = ["MAX_RESPONSE_BYTES", "RETRY_ATTEMPTS", "RETRY_BACKOFF", "HttpProvider", "decode_results"]

log = logging.getLogger("assembler.rerank")

MAX_RESPONSE_BYTES = 4 * 1024 * 1024
RETRY_ATTEMPTS = 1
RETRY_BACKOFF = 0.1
_U64_MAX = 2**64 - 1
_LONGEST_WAIT = 1e6  # seconds: keeps every timer within what any platform clock type can hold

_NOT_RETRYABLE = RerankFailure(PROVIDER_ERROR, retryable=False)
_RETRYABLE = RerankFailure(PROVIDER_ERROR, retryable=True)
_TIMED_OUT = RerankFailure(TIMEOUT, retryable=False)
_CLIENT_ERRORS = (httpx.HTTPError, httpx.InvalidURL, httpx.StreamError, OSError)


@functools.cache
def _default_tls() -> ssl.SSLContext:
    """httpx's default TLS context, built once per process (it takes tens of milliseconds)."""
    return httpx.create_ssl_context()


class HttpProvider:
    """A ``/rerank`` endpoint behind a circuit breaker; one httpx client per event loop run."""

    def __init__(self, config: RerankConfig, *, breaker: CircuitBreaker | None = None) -> None:
        if _httpx_userinfo(config.url):  # RerankConfig refuses it; httpx's own parse is checked too
            raise UsageError("url must not carry userinfo (user:password@ before the host); give the key as api_key")
        if url_problem(config.url) is not None or _httpx_invalid(config.url):  # RerankConfig refuses these too
            raise UsageError("url is not an http:// or https:// URL with a host and a valid port")
        self._config = config
        self._breaker = breaker if breaker is not None else CircuitBreaker()
        self._client: httpx.AsyncClient | None = None
        self._tls = _default_tls()
        self.retried: Counter[str] = Counter()
        """Attempts retried after a transient failure, by reason: reported once, in the run's summary."""
        headers = {b"Content-Type": b"application/json"}
        if config.api_key is not None:
            # The key's bytes as given (UTF-8; undecodable environment bytes restored). Trailing
            # blanks are optional whitespace on the wire (receivers strip them, h11 refuses to send
            # them): an empty key goes out as "Bearer", as the server receives it from Taguru.
            key = config.api_key.encode("utf-8", "surrogateescape")
            headers[b"Authorization"] = (b"Bearer " + key).rstrip(b" \t")
        self._headers = httpx.Headers(headers)

    def __repr__(self) -> str:
        return f"HttpProvider(model={self._config.model!r})"

    @property
    def model(self) -> str:
        """The configured model identity."""
        return self._config.model

    @property
    def breaker(self) -> CircuitBreaker:
        """The breaker every attempt goes through."""
        return self._breaker

    async def rerank(
        self, query: str, candidates: Sequence[RerankCandidate], deadline: Deadline
    ) -> list[int] | RerankFailure:
        """Section 11.3's retry loop around :meth:`_attempt`."""
        body = self._body(query, candidates)
        if body is None:
            return _NOT_RETRYABLE
        retries = 0
        while True:
            if deadline.expired():
                return _TIMED_OUT
            admission = self._breaker.admit()
            if admission is None:
                return RerankFailure("circuit_open", retryable=False)
            result = await self._guarded_attempt(admission, body, deadline)
            if not isinstance(result, RerankFailure):
                return result
            if result.retryable and retries < RETRY_ATTEMPTS and not deadline.expired():
                retries += 1
                self.retried[result.reason] += 1
                await asyncio.sleep(min(RETRY_BACKOFF, deadline.remaining()))
                continue
            return result

    async def aclose(self) -> None:
        """Close the connections of the current run."""
        client, self._client = self._client, None
        if client is not None:
            await client.aclose()

    def _body(self, query: str, candidates: Sequence[RerankCandidate]) -> bytes | None:
        documents = [candidate.text for candidate in candidates]
        payload = {"documents": documents, "model": self._config.model, "query": query, "top_n": len(documents)}
        try:
            return json.dumps(payload, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
        except UnicodeEncodeError:  # a lone surrogate; the message would quote the text
            return None

    async def _guarded_attempt(
        self, admission: Admission, body: bytes, deadline: Deadline
    ) -> list[int] | RerankFailure:
        try:
            result = await self._attempt(body, deadline)
        except BaseException:  # cancelled: no evidence about the provider
            self._breaker.abandon(admission)
            raise
        self._breaker.record(admission, not isinstance(result, RerankFailure))
        return result

    async def _attempt(self, body: bytes, deadline: Deadline) -> list[int] | RerankFailure:
        """One round trip, classified; never raises for a provider fault."""
        if self._client is None:
            # Redirects are not followed (the URL is used exactly as configured, and a key must not
            # travel to another host); concurrency is bounded by the reranker, not the pool.
            self._client = httpx.AsyncClient(
                verify=self._tls, follow_redirects=False, limits=httpx.Limits(max_connections=None)
            )
        remaining = deadline.remaining()
        budget = min(self._config.timeout_secs, remaining, _LONGEST_WAIT)
        deadline_bound = remaining <= self._config.timeout_secs
        reading_body = False
        try:
            async with (
                asyncio.timeout(budget),
                self._client.stream(
                    "POST", self._config.url, content=body, headers=self._headers, timeout=httpx.Timeout(budget)
                ) as response,
            ):
                status = response.status_code
                if not 200 <= status < 300:
                    return RerankFailure(PROVIDER_ERROR, retryable=status == 429 or status >= 500)
                reading_body = True
                data = await _read_capped(response)
        except (TimeoutError, httpx.TimeoutException):
            if reading_body:
                return _NOT_RETRYABLE
            return _TIMED_OUT if deadline_bound or deadline.expired() else _RETRYABLE
        except _CLIENT_ERRORS:
            return _NOT_RETRYABLE if reading_body else _RETRYABLE
        if data is None:
            return _NOT_RETRYABLE
        return decode_results(data)


def _httpx_userinfo(url: str) -> bool:
    """Whether httpx reads userinfo in ``url`` (it would send it as Basic credentials)."""
    try:
        return bool(httpx.URL(url).userinfo)
    except (httpx.InvalidURL, TypeError, ValueError):  # refused per attempt, as before
        return False


def _httpx_invalid(url: str) -> bool:
    """Whether httpx cannot parse ``url`` or reads no host or an impossible port in it."""
    try:
        parsed = httpx.URL(url)
    except (httpx.InvalidURL, TypeError, ValueError):
        return True
    return not parsed.host or (parsed.port is not None and not 1 <= parsed.port <= 65535)


async def _read_capped(response: httpx.Response) -> bytes | None:
    """The body, or None once it is over :data:`MAX_RESPONSE_BYTES` (reading stops there)."""
    declared = response.headers.get("content-length", "")
    if "content-encoding" not in response.headers and declared.isdigit() and int(declared) > MAX_RESPONSE_BYTES:
        return None
    data = bytearray()
    async for chunk in response.aiter_bytes():
        data += chunk
        if len(data) > MAX_RESPONSE_BYTES:
            return None
    return bytes(data)


def _refuse_constant(_name: str) -> Any:
    raise ValueError("not JSON")  # NaN, Infinity: serde_json refuses them too


def decode_results(data: bytes) -> list[int] | RerankFailure:
    """``results[].index`` in array order; not yet judged as a permutation.

    Each ``index`` must be a JSON integer in u64 range (``1.0``, ``-1``, ``true``, strings fail).

    >>> decode_results(b'{"results":[{"index":1,"relevance_score":0.9},{"index":0}]}')
    [1, 0]
    >>> decode_results(b'{"results":[{"index":1.0}]}')
    RerankFailure(reason='provider_error', retryable=False)
    """
    try:
        parsed = json.loads(data.decode("utf-8"), parse_constant=_refuse_constant)
    except (ValueError, RecursionError):  # invalid UTF-8 or JSON, or nested past the parser's depth
        return _NOT_RETRYABLE
    results = parsed.get("results") if isinstance(parsed, dict) else None
    if not isinstance(results, list):
        return _NOT_RETRYABLE
    order: list[int] = []
    for entry in results:
        index = entry.get("index") if isinstance(entry, dict) else None
        if type(index) is not int or not 0 <= index <= _U64_MAX:
            return _NOT_RETRYABLE
        order.append(index)
    return order
