"""Fixtures for the evaluation tests: eval and lane-dump file writers."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from evalkit import Writer, dumps


@pytest.fixture
def write_eval(tmp_path: Path) -> Writer:
    """Write a header and case lines (dicts or raw strings) to an eval file; return its path."""

    def write(cases: Sequence[Any], *, header: Any = None, name: str = "eval.jsonl") -> Path:
        head = {"taguru_eval": 1} if header is None else header
        lines = [head if isinstance(head, str) else dumps(head)]
        lines += [case if isinstance(case, str) else dumps(case) for case in cases]
        path = tmp_path / name
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
        return path

    return write


@pytest.fixture
def write_lanes(tmp_path: Path) -> Writer:
    """Write lane-dump records to a JSON Lines file; return its path."""

    def write(records: Sequence[dict[str, Any]], *, name: str = "lanes.jsonl") -> Path:
        path = tmp_path / name
        path.write_text("".join(dumps(r) + "\n" for r in records), encoding="utf-8")
        return path

    return write
