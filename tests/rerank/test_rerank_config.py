"""Configuration from the environment (section 11.3) and the Python API."""

from __future__ import annotations

import logging

import pytest

from assembler.rerank import RerankConfig
from assembler.rerank.config import parse_timeout_secs

URL, MODEL = "http://127.0.0.1:8080/rerank", "bge-reranker-v2-m3"


def test_url_and_model_together_configure_it_with_the_defaults() -> None:
    config = RerankConfig.from_env({"TAGURU_RERANK_URL": URL, "TAGURU_RERANK_MODEL": MODEL})
    assert config == RerankConfig(url=URL, model=MODEL, api_key=None, timeout_secs=5)


@pytest.mark.parametrize("present", ["TAGURU_RERANK_URL", "TAGURU_RERANK_MODEL"])
def test_one_without_the_other_warns_and_leaves_it_off(present: str, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="assembler.rerank"):
        assert RerankConfig.from_env({present: "secret-looking-value"}) is None
    [message] = caplog.messages
    assert present in message and "off" in message and "secret-looking-value" not in message


def test_nothing_set_is_off_without_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.DEBUG):
        assert RerankConfig.from_env({}) is None
    assert caplog.messages == []


def test_the_key_is_optional_an_empty_key_counts_and_a_custom_variable_can_hold_it() -> None:
    env = {"TAGURU_RERANK_URL": URL, "TAGURU_RERANK_MODEL": MODEL}
    assert RerankConfig.from_env({**env, "TAGURU_RERANK_API_KEY": ""}).api_key == ""  # type: ignore[union-attr]
    config = RerankConfig.from_env({**env, "MY_KEY": "sk-1"}, key_env="MY_KEY")
    assert config is not None and config.api_key == "sk-1"


@pytest.mark.parametrize(
    ("text", "expected", "warns"),
    [
        (None, 5, False),
        ("12", 12, False),
        ("+3", 3, False),
        ("007", 7, False),
        ("0", 1, False),
        ("18446744073709551615", 18446744073709551615, False),
        ("18446744073709551616", 5, True),
        ("", 5, True),
        ("-1", 5, True),
        ("1.5", 5, True),
        (" 7", 5, True),
        ("7s", 5, True),
        ("１２", 5, True),
        ("1_000", 5, True),
    ],
)
def test_timeout_secs_parsing(text: str | None, expected: int, warns: bool, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="assembler.rerank"):
        assert parse_timeout_secs(text) == expected
    assert bool(caplog.messages) is warns
    if text:
        assert all(text not in message for message in caplog.messages)


def test_the_key_never_shows_in_repr() -> None:
    config = RerankConfig(url=URL, model=MODEL, api_key="sk-very-secret")
    assert "sk-very-secret" not in repr(config) and "sk-very-secret" not in str(config)


@pytest.mark.parametrize("timeout", [0, -1, float("nan")])
def test_the_python_api_refuses_a_non_positive_timeout(timeout: float) -> None:
    with pytest.raises(ValueError):
        RerankConfig(url=URL, model=MODEL, timeout_secs=timeout)
