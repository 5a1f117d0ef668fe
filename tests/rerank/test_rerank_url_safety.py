"""URL safety: userinfo in the reranker URL is refused; a key over plain http:// to a remote host warns once."""

from __future__ import annotations

import asyncio
import json
import logging
from pathlib import Path

import pytest

from assembler.cli import main
from assembler.errors import UsageError
from assembler.rerank import Deadline, HttpProvider, RerankConfig
from assembler.stages.reorder import RerankCandidate

from .records import MODEL, record
from .stub import StubServer

KEY = "sk-live-do-not-print"
CANDIDATES = [RerankCandidate("passage", 1, "a"), RerankCandidate("passage", 2, "b")]


def with_userinfo(url: str, userinfo: str) -> str:
    scheme, rest = url.split("://", 1)
    return f"{scheme}://{userinfo}@{rest}"


def lanes_file(tmp_path: Path, *, rerank: bool) -> Path:
    path = tmp_path / "lanes.jsonl"
    rows = [record(f"q{i}", rerank={} if rerank else None) for i in range(3)]
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


@pytest.mark.parametrize("userinfo", ["user:hunter2", "user", ":hunter2", ""])
def test_the_library_refuses_a_url_with_userinfo_without_echoing_it(userinfo: str) -> None:
    url = with_userinfo("http://127.0.0.1:8080/rerank", userinfo)
    with pytest.raises(UsageError) as caught:
        RerankConfig(url=url, model=MODEL, api_key=KEY)
    message = str(caught.value)
    assert "userinfo" in message and "url" in message
    assert KEY not in message and "hunter2" not in message and url not in message


def test_the_environment_cannot_smuggle_userinfo_past_the_library() -> None:
    env = {"TAGURU_RERANK_URL": "https://u:hunter2@rerank.example/r", "TAGURU_RERANK_MODEL": MODEL}
    with pytest.raises(UsageError) as caught:
        RerankConfig.from_env(env)
    assert "hunter2" not in str(caught.value)


def test_the_http_provider_refuses_userinfo_even_in_a_config_forced_past_validation(stub: StubServer) -> None:
    config = RerankConfig(url=stub.url, model=MODEL, api_key=KEY)
    object.__setattr__(config, "url", with_userinfo(stub.url, "u:hunter2"))
    with pytest.raises(UsageError) as caught:
        HttpProvider(config)
    assert "hunter2" not in str(caught.value) and KEY not in str(caught.value)
    assert stub.requests == []


@pytest.mark.parametrize("userinfo", ["u:hunter2", "operator-7"])
def test_the_command_refuses_a_url_flag_with_userinfo_with_exit_2_and_sends_nothing(
    stub: StubServer, tmp_path: Path, userinfo: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("TAGURU_RERANK_API_KEY", KEY)
    url = with_userinfo(stub.url, userinfo)
    out = tmp_path / "out.jsonl"
    argv = ["assemble", str(lanes_file(tmp_path, rerank=True)), "-o", str(out), "--rerank-url", url]
    assert main([*argv, "--rerank-model", MODEL]) == 2
    captured = capsys.readouterr()
    assert captured.err.startswith("assembler: error: --rerank-url: must not carry userinfo")
    assert userinfo not in captured.err + captured.out and KEY not in captured.err + captured.out
    assert stub.requests == [] and not out.exists()


def test_the_command_refuses_a_url_variable_with_userinfo_naming_the_variable(
    stub: StubServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("TAGURU_RERANK_URL", with_userinfo(stub.url, "u:hunter2"))
    monkeypatch.setenv("TAGURU_RERANK_MODEL", MODEL)
    assert main(["assemble", str(lanes_file(tmp_path, rerank=True)), "-o", str(tmp_path / "out.jsonl")]) == 2
    err = capsys.readouterr().err
    assert "TAGURU_RERANK_URL: must not carry userinfo" in err and "hunter2" not in err
    assert stub.requests == []


def test_a_key_over_plain_http_to_a_remote_host_warns_once_without_the_key_or_host(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.WARNING, logger="assembler.rerank"):
        RerankConfig(url="http://rerank.example:8080/rerank", model=MODEL, api_key=KEY)
        RerankConfig(url="http://rerank.example:8080/rerank", model=MODEL, api_key=KEY)
    [message] = caplog.messages
    assert "plain http://" in message and "loopback" in message
    assert KEY not in message and "rerank.example" not in message


def test_the_plain_http_warning_is_per_host(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="assembler.rerank"):
        RerankConfig(url="http://10.0.0.7/rerank", model=MODEL, api_key=KEY)
        RerankConfig(url="http://rerank.example/rerank", model=MODEL, api_key=KEY)
    assert len(caplog.messages) == 2


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:8080/r",
        "http://127.200.3.4/r",
        "http://[::1]:8080/r",
        "http://localhost/r",
        "HTTP://LocalHost./r",
        "http://[::ffff:127.0.0.1]/r",
        "https://rerank.example/r",
    ],
)
def test_loopback_hosts_and_https_do_not_warn(url: str, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="assembler.rerank"):
        RerankConfig(url=url, model=MODEL, api_key=KEY)
    assert caplog.messages == []


@pytest.mark.parametrize("key", [None, ""])
def test_no_key_or_an_empty_key_over_plain_http_does_not_warn(
    key: str | None, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="assembler.rerank"):
        RerankConfig(url="http://rerank.example/r", model=MODEL, api_key=key)
    assert caplog.messages == []


def test_a_key_over_plain_http_to_loopback_is_sent_without_a_warning(
    stub: StubServer, caplog: pytest.LogCaptureFixture
) -> None:
    async def go(provider: HttpProvider) -> object:
        try:
            return await provider.rerank("q", CANDIDATES, Deadline.unbounded())
        finally:
            await provider.aclose()

    with caplog.at_level(logging.WARNING, logger="assembler.rerank"):
        provider = HttpProvider(RerankConfig(url=stub.url, model=MODEL, api_key=KEY))
        assert asyncio.run(go(provider)) == [1, 0]
    assert caplog.messages == []
    assert [seen.headers["authorization"] for seen in stub.requests] == [f"Bearer {KEY}"]


def test_the_command_prints_the_plain_http_warning_once_with_its_prefix(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # No record asks for the reranker, so nothing is sent to the unroutable documentation address.
    monkeypatch.setenv("TAGURU_RERANK_API_KEY", KEY)
    argv = ["assemble", str(lanes_file(tmp_path, rerank=False)), "-o", str(tmp_path / "out.jsonl")]
    assert main([*argv, "--rerank-url", "http://192.0.2.1:9/rerank", "--rerank-model", MODEL]) == 0
    err = capsys.readouterr().err
    warnings = [line for line in err.splitlines() if "plain http://" in line]
    assert len(warnings) == 1 and warnings[0].startswith("assembler: warning: ")
    assert KEY not in err and "192.0.2.1" not in err


def test_the_command_prints_the_half_configured_warning_with_its_prefix(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("TAGURU_RERANK_URL", "http://127.0.0.1:9/rerank")
    assert main(["assemble", str(lanes_file(tmp_path, rerank=False)), "-o", str(tmp_path / "out.jsonl"), "-q"]) == 0
    err = capsys.readouterr().err
    assert "assembler: warning: TAGURU_RERANK_URL is set but TAGURU_RERANK_MODEL is not" in err


@pytest.mark.parametrize(
    ("url", "rule"),
    [
        ("file:///etc/passwd", "must be an http:// or https:// URL"),
        ("ftp://127.0.0.1/rerank", "must be an http:// or https:// URL"),
        ("http://127.0.0.1:99999/rerank", "has an invalid port (a port is a number from 1 to 65535)"),
        ("http:///rerank", "has no host"),
    ],
)
@pytest.mark.parametrize("given", ["flag", "variable"])
def test_the_command_refuses_a_url_no_request_could_be_sent_to_naming_its_source(
    stub: StubServer,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    url: str,
    rule: str,
    given: str,
) -> None:
    out = tmp_path / "out.jsonl"
    argv = ["assemble", str(lanes_file(tmp_path, rerank=True)), "-o", str(out), "--rerank-model", MODEL]
    if given == "flag":
        argv += ["--rerank-url", url]
    else:
        monkeypatch.setenv("TAGURU_RERANK_URL", url)
    assert main(argv) == 2
    source = "--rerank-url" if given == "flag" else "TAGURU_RERANK_URL"
    err = capsys.readouterr().err
    assert err == f"assembler: error: {source}: {rule}; no request could be sent\n"
    assert stub.requests == [] and not out.exists()


@pytest.mark.parametrize("variable", [None, "MY_RERANK_KEY"])
def test_the_command_refuses_a_key_with_a_line_break_naming_the_variable_never_the_key(
    stub: StubServer,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    variable: str | None,
) -> None:
    monkeypatch.setenv(variable or "TAGURU_RERANK_API_KEY", KEY + "\r\n")
    out = tmp_path / "out.jsonl"
    argv = ["assemble", str(lanes_file(tmp_path, rerank=True)), "-o", str(out)]
    argv += ["--rerank-url", stub.url, "--rerank-model", MODEL]
    if variable is not None:
        argv += ["--rerank-key-env", variable]
    assert main(argv) == 2
    captured = capsys.readouterr()
    holder = "TAGURU_RERANK_API_KEY" if variable is None else f"--rerank-key-env {variable}"
    assert captured.err == (
        f"assembler: error: {holder}: the key holds a control character (such as CR or LF), "
        "which an HTTP header cannot carry; no request could be sent\n"
    )
    assert KEY not in captured.err + captured.out
    assert stub.requests == [] and not out.exists()


def test_the_http_provider_refuses_a_file_url_forced_past_validation(stub: StubServer) -> None:
    config = RerankConfig(url=stub.url, model=MODEL)
    object.__setattr__(config, "url", "file:///etc/passwd")
    with pytest.raises(UsageError, match="url is not an http:// or https:// URL"):
        HttpProvider(config)
