"""``evaluate --engine ray``: the assembly side as one Ray job gives the same scores as local."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from assembler.cli import main

pytest.importorskip("ray")

DATA = Path(__file__).resolve().parent / "data"


def run(tmp_path: Path, *extra: str) -> dict[str, Any]:
    out = tmp_path / f"run{len(list(tmp_path.iterdir()))}.json"
    args = ["evaluate", "--eval", str(DATA / "eval.jsonl"), "--lanes", str(DATA / "lanes.jsonl"), "--assembly"]
    assert main([*args, "--max-items", "5", "--max-tokens", "1500", *extra, "--out", str(out)]) == 0
    artifact: dict[str, Any] = json.loads(out.read_text(encoding="utf-8"))
    return artifact


def test_ray_engine_scores_every_case_exactly_as_the_local_engine(tmp_path: Path) -> None:
    local = run(tmp_path)
    ray = run(tmp_path, "--engine", "ray", "--policy", "contract")
    assert [c["passage"]["hits"] for c in ray["cases"]] == [c["passage"]["hits"] for c in local["cases"]]

    def evidence(artifact: dict[str, Any]) -> list[dict[str, Any]]:
        return [{k: v for k, v in c["evidence"].items() if k != "latency_ms"} for c in artifact["cases"]]

    assert evidence(ray) == evidence(local)
    for key in ("recall.recall_at_k", "recall.ndcg", "recall.mrr", "diversity.sources"):
        assert ray["metrics"][key] == local["metrics"][key]


def test_engine_ray_needs_assembly(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    args = ["evaluate", "--eval", str(DATA / "eval.jsonl"), "--lanes", str(DATA / "lanes.jsonl")]
    assert main([*args, "--engine", "ray", "--out", str(tmp_path / "x.json")]) == 2
    assert "requires --assembly" in capsys.readouterr().err
