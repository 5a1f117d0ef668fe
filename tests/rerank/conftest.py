"""Fixtures of the reranker tests: a loopback stub service; the tests need the ``rerank`` extra."""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator

import pytest

from .stub import StubServer

if importlib.util.find_spec("httpx") is None or importlib.util.find_spec("prometheus_client") is None:
    collect_ignore_glob = ["test_*.py"]  # install '.[rerank]' to run them


@pytest.fixture
def stub() -> Iterator[StubServer]:
    """A reversing rerank service on loopback (set ``stub.behaviour`` to script it)."""
    server = StubServer()
    yield server
    server.close()


@pytest.fixture(autouse=True)
def _plain_http_warned_afresh() -> Iterator[None]:
    """Each test sees the once-per-host plain-http warning afresh."""
    from assembler.rerank import config

    config._warned_plain_http.clear()
    yield
    config._warned_plain_http.clear()


@pytest.fixture(autouse=True)
def _no_rerank_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("TAGURU_RERANK_URL", "TAGURU_RERANK_MODEL", "TAGURU_RERANK_API_KEY", "TAGURU_RERANK_TIMEOUT_SECS"):
        monkeypatch.delenv(name, raising=False)
