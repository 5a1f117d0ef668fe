"""Shared fixtures for the input/CLI tests: a small valid lane-dump record and a JSONL writer."""

from __future__ import annotations

import copy
import json
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
from hypothesis import settings

# Before any test module imports Ray: a local Ray instance listens on 127.0.0.1 only.
os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")

from assembler.errors import RecordError
from assembler.run.io import read_raw
from assembler.run.records import iter_records

# CI draws the property tests' examples from a fixed sequence, so whether a submission lands does
# not depend on chance; local runs keep exploring new examples (and keep what fails in .hypothesis/).
settings.register_profile("ci", derandomize=True)
if os.environ.get("CI"):
    settings.load_profile("ci")

Line = dict[str, Any] | str | bytes
RecordFactory = Callable[..., dict[str, Any]]
JsonlWriter = Callable[[str, Sequence[Line]], Path]
Rejector = Callable[[Line], RecordError]

_BASE: dict[str, Any] = {
    "query_id": "q1",
    "context": "ctx",
    "request": {"origins": ["青嶺酒造"], "labels": ["杜氏"]},
    "lanes": {
        "graph_query": [
            {
                "subject": "青嶺酒造",
                "label": "杜氏",
                "object": "高瀬",
                "weight": 1.0,
                "count": 1,
                "attributions": [
                    {"source": "kura.md", "weight": 1.0, "count": 1, "paragraph": 0, "section": None, "locator": None}
                ],
            }
        ],
        "graph_activate": [],
        "passages": [
            {
                "source": "kura.md",
                "paragraph": 0,
                "score": 0.86304635,
                "text": "青嶺酒造は雲居県霧沢町の蔵元である。",
                "lanes": {"bm25": {"rank": 1, "score": 0.86304635}},
            }
        ],
        "communities": None,
        "citations": [
            {
                "source": "kura.md",
                "paragraph": 0,
                "citation": {"text": "青嶺酒造は蔵元。", "source": "kura.md", "section": None, "locator": None},
            }
        ],
    },
}


def base_record(query_id: str = "q1") -> dict[str, Any]:
    """A fresh, valid lane-dump record (deep copy: tests may mutate it)."""
    record = copy.deepcopy(_BASE)
    record["query_id"] = query_id
    return record


def line_bytes(line: Line) -> bytes:
    """One JSONL line's bytes (without newline): dicts are dumped, text is taken verbatim."""
    if isinstance(line, bytes):
        return line
    if isinstance(line, str):
        return line.encode("utf-8")
    return json.dumps(line, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


@pytest.fixture
def make_record() -> RecordFactory:
    """``make_record(query_id="q1")``: a fresh valid record."""
    return base_record


@pytest.fixture
def write_jsonl(tmp_path: Path) -> JsonlWriter:
    """``write_jsonl(name, lines)``: write lines (dict, str or raw bytes) to ``tmp_path/name``."""

    def write(name: str, lines: Sequence[Line]) -> Path:
        path = tmp_path / name
        path.write_bytes(b"".join(line_bytes(line) + b"\n" for line in lines))
        return path

    return write


@pytest.fixture
def reject(write_jsonl: JsonlWriter) -> Rejector:
    """``reject(bad_line)``: put ``bad_line`` on line 2 of a file after a good record; return its one error.

    Fails the test unless exactly that one record is rejected and the good one accepted.
    """

    def run(bad: Line) -> RecordError:
        path = write_jsonl("input.jsonl", [base_record("good"), bad])
        errors: list[RecordError] = []
        accepted = [
            record.query_id for _, record in iter_records(read_raw([str(path)]), lambda _r, e: errors.append(e))
        ]
        assert accepted == ["good"]
        assert len(errors) == 1, errors
        assert errors[0].file == str(path)
        assert errors[0].line == 2
        return errors[0]

    return run
