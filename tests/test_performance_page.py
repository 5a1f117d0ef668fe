"""docs/performance.md's figures are the ones the benchmark files hold: its block is generated."""

from __future__ import annotations

from benchmarks.summary import FIGURES_END, FIGURES_START, PAGE, figures


def test_the_performance_page_shows_the_committed_measurements() -> None:
    page = PAGE.read_text(encoding="utf-8")
    block = page[page.index(FIGURES_START) : page.index(FIGURES_END) + len(FIGURES_END)]
    assert block == figures(), "docs/performance.md is stale: run `python -m benchmarks.summary`"


def test_the_generated_block_names_its_commands() -> None:
    block = figures()
    assert block.count("`python -m") >= 3
    assert "code " in block
