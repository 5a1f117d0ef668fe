"""``assembler explain``'s view, and the analysis page's pandas / Arrow examples."""

from __future__ import annotations

import doctest
from pathlib import Path

import polars as pl
import pytest

from assembler.analysis import analyze
from assembler.analysis.explain import WALK_LEGEND, explain_frame, render_explanation

ROOT = Path(__file__).resolve().parent.parent.parent
SAMPLE = ROOT / "data" / "sample" / "lanes.jsonl"


def test_explain_says_the_running_total_counts_citations() -> None:
    result = analyze(SAMPLE).result
    text = render_explanation(result, "ja-005")
    lines = text.splitlines()
    start = lines.index(WALK_LEGEND[0])
    assert lines[start : start + len(WALK_LEGEND)] == list(WALK_LEGEND)
    assert "citation entries" in WALK_LEGEND[1] and "more than the item" in WALK_LEGEND[2]
    # What the legend warns of happens: an admitted item whose citations make the total grow by more
    # than its own bytes plus a comma.
    walked = explain_frame(result, "ja-005").filter(pl.col("admitted")).sort("walk_step")
    before = pl.concat([pl.Series([4], dtype=pl.Int64), walked["bytes_after"].head(-1)])
    growth = walked["bytes_after"] - before
    assert (growth > walked["item_bytes"] + 1).any()
    assert (growth >= walked["item_bytes"]).all()


def test_analysis_doc_examples_run(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("pandas")
    monkeypatch.chdir(ROOT)
    failed, attempted = doctest.testfile(str(ROOT / "docs" / "analysis.md"), module_relative=False)
    assert attempted >= 8 and failed == 0
