"""Configuration from the environment (section 11.3) and the Python API."""

from __future__ import annotations

import logging

import pytest

from assembler.errors import UsageError
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


BAD_URLS = [
    ("file:///etc/passwd", "must be an http:// or https:// URL"),
    ("ftp://rerank.example/rerank", "must be an http:// or https:// URL"),
    ("rerank.example:8080/rerank", "must be an http:// or https:// URL"),
    ("http:///rerank", "has no host"),
    ("http://:8080/rerank", "has no host"),
    ("http://127.0.0.1:99999/rerank", "has an invalid port (a port is a number from 1 to 65535)"),
    ("http://127.0.0.1:0/rerank", "has an invalid port (a port is a number from 1 to 65535)"),
    ("http://127.0.0.1:http/rerank", "has an invalid port (a port is a number from 1 to 65535)"),
    ("http://[::1/rerank", "is not a valid URL"),
    ("http://127.0.0.1/rerank\r\nX-Injected: 1", "must not contain spaces or control characters (percent-encode them)"),
    ("http://rerank example/rerank", "must not contain spaces or control characters (percent-encode them)"),
]


@pytest.mark.parametrize(("url", "rule"), BAD_URLS)
def test_a_url_no_request_could_be_sent_to_is_refused_without_echoing_it(url: str, rule: str) -> None:
    with pytest.raises(UsageError) as caught:
        RerankConfig(url=url, model=MODEL)
    assert str(caught.value) == f"url {rule}"


@pytest.mark.parametrize("url", ["HTTPS://Rerank.Example/v1/rerank", "http://[::1]:65535/r", "http://h:/r", URL])
def test_http_and_https_urls_with_a_host_and_a_valid_port_are_accepted(url: str) -> None:
    assert RerankConfig(url=url, model=MODEL).url == url


def test_the_environment_cannot_configure_a_file_url() -> None:
    with pytest.raises(UsageError, match="url must be an http:// or https:// URL"):
        RerankConfig.from_env({"TAGURU_RERANK_URL": "file:///etc/passwd", "TAGURU_RERANK_MODEL": MODEL})


@pytest.mark.parametrize("key", ["sk-secret\r\n", "sk-\nsecret", "sk-\x00secret", "sk-\x7fsecret", "\rsk-secret"])
def test_a_key_no_header_can_carry_is_refused_without_echoing_it(key: str) -> None:
    with pytest.raises(UsageError) as caught:
        RerankConfig(url=URL, model=MODEL, api_key=key)
    message = str(caught.value)
    assert message == "api_key holds a control character (such as CR or LF), which an HTTP header cannot carry"
    assert "secret" not in message


@pytest.mark.parametrize("key", ["sk-1", "", "sk with spaces", "sk\twith-tab", "sk-ké"])
def test_keys_a_header_can_carry_are_accepted(key: str) -> None:
    assert RerankConfig(url=URL, model=MODEL, api_key=key).api_key == key


def test_the_summary_line_escapes_the_model_name() -> None:
    from assembler.rerank import build_reranker

    line = build_reranker(RerankConfig(url=URL, model="m\x1b[2J\nassembler: error: forged")).summary_line()
    assert "\x1b" not in line and "\n" not in line
    assert line.startswith("rerank (model m\\x1b[2J\\x0aassembler: error: forged): 0 requested")
