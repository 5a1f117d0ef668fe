"""Privacy (section 11.5): candidate text reaches the provider and nowhere else; the key only its header."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest

from assembler.cli import main
from assembler.pipeline import assemble_records
from assembler.rerank import Deadline, ProviderReranker, RerankConfig, RerankFailure, build_reranker
from assembler.stages.reorder import RerankCandidate

from .records import MODEL, parsed, record, reranker_plan
from .stub import Reply, Seen, StubServer, closed_port_url, results, reversing

SECRET_TEXT = "MARKER-candidate-text-7f3a"
SECRET_KEY = "sk-MARKER-key-91c2"

BEHAVIOURS: dict[str, Callable[[Seen], Reply]] = {
    "reverse": reversing,
    "503": lambda _seen: Reply(status=503, body=SECRET_TEXT.encode()),
    "404": lambda _seen: Reply(status=404, body=b"no such route"),
    "500": lambda _seen: Reply(status=500, body=b"Traceback: " + SECRET_TEXT.encode()),
    "non-json": lambda seen: Reply(body=b"<html>" + seen.body + b"</html>"),
    "no-results": lambda seen: Reply(body=json.dumps({"echo": seen.json}).encode()),
    "bad-index": lambda _seen: Reply(body=json.dumps({"results": [{"index": SECRET_TEXT}]}).encode()),
    "oversized": lambda seen: Reply(body=seen.body * (4 * 1024 * 1024 // len(seen.body) + 2)),
    "duplicates": lambda _seen: results([0, 0, 1]),
    "silent": lambda _seen: Reply(delay=5),
}


def secret_records() -> list[dict[str, object]]:
    return [
        record(
            "secret",
            n=2,
            rerank={},
            fallback=f"query {SECRET_TEXT}",
            passages=[f"passage {SECRET_TEXT}"],
            communities=[f"community {SECRET_TEXT}"],
        )
    ]


def assert_clean(text: str, where: str) -> None:
    assert SECRET_TEXT not in text, f"candidate text leaked into {where}"
    assert SECRET_KEY not in text, f"the key leaked into {where}"


@pytest.mark.parametrize("mode", list(BEHAVIOURS))
def test_nothing_leaks_through_the_python_api(stub: StubServer, mode: str, caplog: pytest.LogCaptureFixture) -> None:
    stub.behaviour = BEHAVIOURS[mode]
    reranker = build_reranker(
        RerankConfig(url=stub.url, model=MODEL, api_key=SECRET_KEY, timeout_secs=2),
        deadline_secs=0.3 if mode == "silent" else 2,
    )
    with caplog.at_level(logging.DEBUG):
        [package] = assemble_records(parsed(*secret_records()), reranker=reranker).packages
    seen = stub.requests[0]
    assert seen.headers["authorization"] == f"Bearer {SECRET_KEY}"  # the provider gets both
    assert SECRET_TEXT in seen.body.decode()
    assert_clean(json.dumps(reranker_plan(package)), "plan.reranker")
    assert_clean(reranker.metrics.render().decode(), "metrics")
    assert_clean(caplog.text, "logs")
    assert_clean(" ".join(f"{r.getMessage()} {r.args!r} {r.exc_text}" for r in caplog.records), "log records")
    assert_clean(repr(reranker) + repr(reranker.provider) + reranker.summary_line(), "reprs")
    assert_clean(repr(reranker.outcomes), "outcomes")


def test_nothing_leaks_when_unreachable(caplog: pytest.LogCaptureFixture) -> None:
    reranker = build_reranker(RerankConfig(url=closed_port_url(), model=MODEL, api_key=SECRET_KEY))
    with caplog.at_level(logging.DEBUG):
        [package] = assemble_records(parsed(*secret_records()), reranker=reranker).packages
    assert reranker_plan(package)["reason"] == "provider_error"
    assert_clean(caplog.text + json.dumps(reranker_plan(package)) + reranker.metrics.render().decode(), "output")


def test_a_raising_provider_logs_only_the_exception_type(caplog: pytest.LogCaptureFixture) -> None:
    class Raising:
        model = MODEL
        breaker = None

        async def rerank(
            self, query: str, candidates: Sequence[RerankCandidate], deadline: Deadline
        ) -> list[int] | RerankFailure:
            raise ValueError(f"{candidates[0].text} {SECRET_KEY}")

        async def aclose(self) -> None:
            pass

    with caplog.at_level(logging.DEBUG):
        [package] = assemble_records(parsed(*secret_records()), reranker=ProviderReranker(Raising())).packages
    assert reranker_plan(package)["reason"] == "provider_error"
    assert "ValueError" in caplog.text
    assert_clean(caplog.text, "logs")


@pytest.mark.parametrize("mode", ["reverse", "500", "non-json", "silent"])
def test_nothing_leaks_through_the_command_line(
    stub: StubServer,
    mode: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    stub.behaviour = BEHAVIOURS[mode]
    lanes = tmp_path / "lanes.jsonl"
    bad = '{"query_id":"bad","context":"c","request":{},"lanes":{}}'
    lanes.write_text(json.dumps(secret_records()[0], ensure_ascii=False) + "\n" + bad + "\n", encoding="utf-8")
    monkeypatch.setenv("RERANK_TEST_KEY", SECRET_KEY)
    out, errors, metrics = tmp_path / "out.jsonl", tmp_path / "errors.jsonl", tmp_path / "rerank.prom"
    argv = [
        "assemble",
        str(lanes),
        "-o",
        str(out),
        "--on-error",
        "skip",
        "--errors",
        str(errors),
        "--rerank-url",
        stub.url,
        "--rerank-model",
        MODEL,
        "--rerank-key-env",
        "RERANK_TEST_KEY",
        "--rerank-deadline",
        "0.3" if mode == "silent" else "2",
        "--metrics-out",
        str(metrics),
    ]
    assert SECRET_KEY not in argv
    with caplog.at_level(logging.DEBUG):
        assert main(argv) == 0
    captured = capsys.readouterr()
    assert stub.requests[0].headers["authorization"] == f"Bearer {SECRET_KEY}"
    [line] = out.read_text(encoding="utf-8").splitlines()
    assert_clean(json.dumps(json.loads(line)["package"]["plan"]), "plan")
    assert_clean(captured.err + captured.out, "stderr/stdout")
    assert_clean(errors.read_text(encoding="utf-8"), "errors file")
    assert_clean(metrics.read_text(encoding="utf-8"), "metrics file")
    reason = {"reverse": "ok", "silent": "timeout"}.get(mode, "provider_error")
    assert f'assembler_rerank_outcomes_total{{outcome="{reason}"}} 1.0' in metrics.read_text(encoding="utf-8")
    assert "assembler_rerank_breaker_state" in metrics.read_text(encoding="utf-8")
    assert_clean(caplog.text, "logs")
