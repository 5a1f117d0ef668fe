"""The notebooks' plots say what they show: labelled columns and axes, legends, readable labels."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from assembler.analysis import BatchAnalysis, analyze, budget_sweep, dice_matrix, kernel_timings, passage_pool
from assembler.stages.fuse import RRF_K

matplotlib = pytest.importorskip("matplotlib")
matplotlib.use("Agg")

from assembler.analysis import plotting  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent.parent
SAMPLE = ROOT / "data" / "sample" / "lanes.jsonl"


@pytest.fixture(scope="module")
def sample() -> BatchAnalysis:
    return analyze(SAMPLE)


@pytest.fixture(autouse=True)
def close_figures() -> Iterator[None]:
    yield
    plotting.pyplot().close("all")


def tick_labels(ax: Any) -> list[str]:
    return [label.get_text() for label in ax.get_xticklabels()]


def legend_texts(ax: Any) -> list[str]:
    legend = ax.get_legend()
    assert legend is not None, "the plot has no legend"
    return [text.get_text() for text in legend.get_texts()]


def fused_labels(ax: Any) -> list[str]:
    return [text.get_text() for text in ax.texts if text.get_text().startswith("#")]


def test_rank_flow_has_one_labelled_tick_per_lane_and_the_fused_column(sample: BatchAnalysis) -> None:
    ax = plotting.rank_flow(sample.lanes, "ja-005")
    # Graph lanes left of the fused column, the passage lane right of it.
    assert tick_labels(ax) == ["graph_query", "graph_activate", plotting.RANK_FLOW_FUSED, "passage_bm25"]
    assert ax.get_ylabel() == "rank (1 = top)" and ax.get_xlabel()
    passages_only = sample.lanes.filter(pl.col("lane") == "passage_bm25")
    ax = plotting.rank_flow(passages_only, "ja-005")
    assert tick_labels(ax) == ["passage_bm25", plotting.RANK_FLOW_FUSED]


def test_rank_flow_labels_every_candidate_at_its_fused_rank(sample: BatchAnalysis) -> None:
    ax = plotting.rank_flow(sample.lanes, "ja-005")
    query = sample.query("ja-005")
    labels = fused_labels(ax)
    assert [int(label.split()[0][1:]) for label in labels] == query["fused_rank"].to_list()
    for label, row in zip(labels, query.iter_rows(named=True), strict=True):
        assert label.split()[1] == row["kind"][0]
        assert f"Σ{1000 * row['score']:.1f}" in label
        assert label.endswith(plotting.OUTCOME_MARKS["admitted" if row["admitted"] else row["reason"]])
    # A passage carries its short id; the near-duplicate drop is marked as one.
    assert labels[3].startswith("#4 p long_dense.md:2 ") and labels[5].endswith("✗ dup")


def test_rank_flow_draws_one_line_per_candidate_and_dashes_the_omitted(sample: BatchAnalysis) -> None:
    ax = plotting.rank_flow(sample.lanes, "ja-005")
    query = sample.query("ja-005")
    drawn = [line for line in ax.get_lines() if len(line.get_xdata()) > 2]  # the lanes' guides have 2 points
    # ja-005's candidates come from the graph lanes or the passage lane, never both: one line each.
    assert len(drawn) == query.height
    dashed = [line for line in drawn if line.get_linestyle() == "--"]
    assert len(dashed) == query.filter(~pl.col("admitted")).height == 1


def test_rank_flow_shows_each_lanes_rrf_contribution_at_its_point(sample: BatchAnalysis) -> None:
    ax = plotting.rank_flow(sample.lanes, "ja-005")
    numbers = sorted(text.get_text() for text in ax.texts if not text.get_text().startswith("#"))
    lanes = sample.lanes.filter(pl.col("query_id") == "ja-005")
    assert numbers == sorted(f"{1000 / (RRF_K + rank):.1f}" for rank in lanes["lane_rank"])


def test_rank_flow_legend_explains_colours_numbers_and_outcomes(sample: BatchAnalysis) -> None:
    texts = legend_texts(plotting.rank_flow(sample.lanes, "ja-005"))
    assert texts[:3] == ["best lane graph_query", "best lane graph_activate", "best lane passage_bm25"]
    assert "dashed: omitted" in texts
    assert any(text.startswith("numbers: RRF contribution x1000 = 1000 / (60 + lane rank)") for text in texts)
    assert any("✓ = admitted" in text for text in texts) and any("✗ dup = duplicate_passage" in text for text in texts)


def test_rank_flow_shows_the_first_top_candidates_and_says_so(sample: BatchAnalysis) -> None:
    total = sample.query("ja-023").height
    assert total > 20
    ax = plotting.rank_flow(sample.lanes, "ja-023")
    assert len(fused_labels(ax)) == 20 and f"(first 20 of {total} fused)" in ax.get_title()
    assert len(fused_labels(plotting.rank_flow(sample.lanes, "ja-023", top=5))) == 5


def test_rank_flow_never_draws_a_glyph_the_font_lacks(sample: BatchAnalysis) -> None:
    ax = plotting.rank_flow(sample.lanes, "ja-005")
    assert all(plotting._renderable(text.get_text()) for text in ax.texts)
    assert plotting._renderable("long_dense.md:2 Σ16.4 ✓ ✗")


def test_short_label_names_passages_by_file_and_paragraph_and_cuts_long_ids() -> None:
    assert plotting.short_label("passage\x00brewery\x00corpus/long_dense.md\x002") == "long_dense.md:2"
    assert plotting.short_label("community\x00ctx\x00community:c7\x000") == "community:c7:0"
    assert plotting.short_label("association\x00s\x00rel\x00o") == "s·rel·o"
    cut = plotting.short_label("association\x00" + "x" * 40 + "\x00rel\x00o", 12)
    assert len(cut) == 12 and cut.endswith("…")


def test_tiering_has_a_legend_with_the_tier_entries(sample: BatchAnalysis) -> None:
    ax = plotting.tiering(sample.candidates, "ja-003")
    texts = legend_texts(ax)
    assert tuple(texts[:3]) == plotting.TIER_LEGEND
    assert "admitted" in texts and "refused: budget_exceeded" in texts
    assert any(text.startswith("label: #fused rank") for text in texts)
    assert {"tier 0", "tier 1"} <= {text.get_text() for text in ax.texts}
    assert ax.get_ylabel() and tick_labels(ax) == ["fused unit order", "admission order"]


def test_dice_heatmap_says_what_the_red_outline_means_under_any_title(sample: BatchAnalysis) -> None:
    texts = passage_pool(sample.candidates, "ja-023")["text"].to_list()
    ax = plotting.dice_heatmap(dice_matrix(texts), [str(i) for i in range(len(texts))])
    ax.set_title("a caller's own title")
    colorbar = ax.figure.axes[-1]
    assert "red outline: >= 0.9" in colorbar.get_ylabel()


def test_dice_histogram_outlines_each_data_set() -> None:
    values = {"a": [0.1, 0.2, 0.95], "b": [0.1, 0.2, 0.3]}
    ax = plotting.dice_histogram(values)
    outlines = [patch for patch in ax.patches if not patch.get_fill()]
    assert len(outlines) == 2 and len({patch.get_linestyle() for patch in outlines}) == 2
    assert legend_texts(ax)[:2] == ["a (3 pairs)", "b (3 pairs)"]
    assert ax.get_xlabel() and ax.get_ylabel() and ax.get_title()


def test_kernel_cost_ticks_the_sizes_timed_and_names_each_part() -> None:
    texts = ["青嶺酒造は蔵元である。", "青嶺酒造は蔵元である", "杜氏は高瀬", "x"] * 5
    ax = plotting.kernel_cost(kernel_timings(texts, [2, 5, 10, 20], repeat=1))
    assert tick_labels(ax) == ["2", "5", "10", "20"]
    labels = legend_texts(ax)
    assert labels[:3] == list(plotting.KERNEL_PARTS.values())
    assert any("∝ n (" in label for label in labels) and any("∝ n² (" in label for label in labels)


def test_budget_usage_titles_both_panels() -> None:
    axes = plotting.budget_usage(budget_sweep(SAMPLE, "tokens", [300, 1000, 4000]))
    assert all(axis.get_title() and axis.get_xlabel() and axis.get_ylabel() for axis in axes)
