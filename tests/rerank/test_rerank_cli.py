"""``assembler assemble --rerank-url ... --rerank-model ...``: flags, environment, summary, metrics file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from assembler.cli import main

from .records import MODEL, record
from .stub import Reply, StubServer


@pytest.fixture
def lanes(tmp_path: Path) -> Path:
    path = tmp_path / "lanes.jsonl"
    rows = [record(f"q{i}", rerank={} if i < 5 else None) for i in range(6)]
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


def plans(out: Path) -> list[dict[str, object]]:
    return [json.loads(line)["package"]["plan"]["reranker"] for line in out.read_text().splitlines()]


def test_flags_configure_the_reranker_and_the_summary_says_what_happened(
    stub: StubServer, lanes: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out, metrics = tmp_path / "out.jsonl", tmp_path / "rerank.prom"
    flags = ["--rerank-concurrency", "2", "--rerank-timeout", "2", "--metrics-out", str(metrics)]
    status = main(["assemble", str(lanes), "-o", str(out), "--rerank-url", stub.url, "--rerank-model", MODEL, *flags])
    assert status == 0
    assert plans(out) == [{"configured": True, "ran": True, "model": MODEL}] * 5 + [{"configured": True, "ran": False}]
    err = capsys.readouterr().err
    assert f"rerank (model {MODEL}): 5 requested, 5 reranked, 0 fell back" in err
    text = metrics.read_text()
    assert 'assembler_rerank_outcomes_total{outcome="ok"} 5.0' in text
    assert "assembler_rerank_breaker_state 0.0" in text
    assert all("authorization" not in seen.headers for seen in stub.requests)


def test_the_environment_configures_it_and_the_default_key_variable_is_used(
    stub: StubServer, lanes: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TAGURU_RERANK_URL", stub.url)
    monkeypatch.setenv("TAGURU_RERANK_MODEL", MODEL)
    monkeypatch.setenv("TAGURU_RERANK_API_KEY", "sk-env")
    out = tmp_path / "out.jsonl"
    assert main(["assemble", str(lanes), "-o", str(out), "-q"]) == 0
    assert plans(out)[0] == {"configured": True, "ran": True, "model": MODEL}
    assert {seen.headers["authorization"] for seen in stub.requests} == {"Bearer sk-env"}


def test_flags_override_the_environment_field_by_field(
    stub: StubServer, lanes: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TAGURU_RERANK_URL", "http://127.0.0.1:9/unused")
    monkeypatch.setenv("TAGURU_RERANK_MODEL", MODEL)
    out = tmp_path / "out.jsonl"
    assert main(["assemble", str(lanes), "-o", str(out), "-q", "--rerank-url", stub.url]) == 0
    assert plans(out)[0]["ran"] is True


def test_an_outage_run_reports_the_fallbacks(
    stub: StubServer, lanes: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    stub.behaviour = lambda _seen: Reply(status=503)
    out = tmp_path / "out.jsonl"
    args = ["assemble", str(lanes), "-o", str(out), "--rerank-url", stub.url, "--rerank-model", MODEL]
    assert main([*args, "--rerank-concurrency", "1"]) == 0
    assert "5 requested, 0 reranked, 5 fell back (circuit_open 4, provider_error 1)" in capsys.readouterr().err


def test_without_any_configuration_nothing_changes(lanes: Path, tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    assert main(["assemble", str(lanes), "-o", str(out), "-q"]) == 0
    assert plans(out)[0] == {"configured": False, "ran": False, "reason": "not_configured"}


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--rerank-url", "http://127.0.0.1:9/rerank"], "--rerank-url and --rerank-model go together"),
        (["--rerank-model", MODEL], "--rerank-url and --rerank-model go together"),
        (["--metrics-out", "m.prom"], "--metrics-out needs a reranker"),
        (["--rerank-url", "u", "--rerank-model", "m", "--rerank-key-env", "NOT_SET_ANYWHERE"], "--rerank-key-env"),
        (["--rerank-url", "u", "--rerank-model", "m", "--metrics-out", "-"], "--metrics-out -"),
    ],
)
def test_inconsistent_flags_are_usage_errors(
    lanes: Path, extra: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["assemble", str(lanes), "-o", "-", *extra]) == 2
    assert message in capsys.readouterr().err


@pytest.mark.parametrize("flag", ["--rerank-key-env", "--rerank-key"])  # argparse accepts the abbreviation
def test_a_key_given_where_a_variable_name_belongs_is_not_repeated(
    lanes: Path, flag: str, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["assemble", str(lanes), "--rerank-url", "u", "--rerank-model", "m", flag, "sk_live_abc123"]
    assert main(argv) == 2
    captured = capsys.readouterr()
    assert "sk_live_abc123" not in captured.err + captured.out


def test_no_flag_takes_the_key_itself(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["assemble", "--help"])
    help_text = capsys.readouterr().out
    assert "--rerank-key-env NAME" in help_text
    assert "--rerank-key " not in help_text and "--api-key" not in help_text
