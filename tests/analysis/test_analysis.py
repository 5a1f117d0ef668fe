"""The analysis frames agree with the packages they explain, on the committed data and random pools."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pytest
from hypothesis import given, settings

from assembler import InputError, assemble_batch, get_policy
from assembler.analysis import (
    BatchAnalysis,
    analyze,
    binding_limits,
    budget_sweep,
    decision_diff,
    dice_matrix,
    kernel_timings,
    load_records,
    passage_pool,
    position_wins,
    threshold_sweep,
    without_lane,
)
from assembler.analysis.explain import explain_frame
from assembler.contract.text import normalize_entry
from assembler.stages.neardup import bigram_codes, dice_matches
from tests.oracle.pools import generate_records
from tests.strategies import lane_batches

ROOT = Path(__file__).resolve().parent.parent.parent
CONFORMANCE = ROOT / "data" / "conformance" / "lanes.jsonl"
SAMPLE = ROOT / "data" / "sample" / "lanes.jsonl"
POLICIES = ["contract", "quality"]
PROPERTY = settings(max_examples=60, deadline=None)
FEWER = settings(max_examples=30, deadline=None)


def read(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def check_agreement(analysis: BatchAnalysis) -> None:
    """Every claim the frames make is what the packages say."""
    result, candidates = analysis.result, analysis.candidates
    assert candidates.height == result.decisions.height
    for q, (query_id, text) in enumerate(zip(result.query_ids, result.packages, strict=True)):
        package = json.loads(text)
        rows = candidates.filter(pl.col("q") == q)
        assert rows["query_id"].unique().to_list() in ([query_id], [])
        assert rows["fused_rank"].to_list() == list(range(1, rows.height + 1))
        # Admitted rows, in package order, are the package items.
        admitted = rows.filter("admitted").sort("package_position")
        assert admitted["package_position"].to_list() == list(range(admitted.height))
        items = package["items"]
        assert admitted["candidate_id"].to_list() == [item["candidate_id"] for item in items]
        assert admitted["fused_rank"].to_list() == [item["fused_rank"] for item in items]
        assert admitted["item_bytes"].to_list() == [item["bytes"] for item in items]
        assert admitted["item_tokens"].to_list() == [item["estimated_tokens"] for item in items]
        for row, item in zip(admitted.iter_rows(named=True), items, strict=True):
            assert list(zip(row["lanes"], row["lane_ranks"], strict=True)) == [
                (entry["lane"], entry["rank"]) for entry in item["lane_ranks"]
            ]
        # Omissions: counts by reason, total, and the listed ones in package order.
        omitted = rows.filter(~pl.col("admitted")).sort("omitted_position")
        assert dict(Counter(omitted["reason"].to_list())) == package["omitted_by_reason"]
        assert omitted.height == package["omitted_total"]
        assert omitted["omitted_position"].to_list() == list(range(omitted.height))
        listed = [(entry["candidate_id"], entry["reason"]) for entry in package["omitted"]]
        assert list(omitted.select("candidate_id", "reason").iter_rows())[: len(listed)] == listed
        # Budget consumed so far ends at the package's usage.
        budget = package["budget"]
        walked = rows.filter(pl.col("walk_step").is_not_null()).sort("walk_step")
        if admitted.height:
            last = walked.filter("admitted").tail(1).row(0, named=True)
            assert (last["items_after"], last["bytes_after"], last["tokens_after"]) == (
                budget["items_used"],
                budget["bytes_used"],
                budget["tokens_used"],
            )
        assert walked["items_after"].to_list() == sorted(walked["items_after"].to_list())
        assert walked["tier"].to_list() == sorted(walked["tier"].to_list())
        assert rows["max_items"].unique().to_list() in ([budget["limits"]["max_items"]], [])
        # Exact-dedup merges, contradiction groups, near-duplicate survivors.
        selection = package["plan"]["selection"]
        assert int(rows["dedup_merged"].sum()) == selection["dedup_dropped"]
        groups = analysis.groups.filter(pl.col("q") == q)
        assert groups.height == selection["contradiction_groups"]
        assert groups["admitted"].to_list() == groups["any_admitted"].to_list()
        for group in groups.iter_rows(named=True):
            members = rows.filter(pl.col("group") == group["group"])
            assert members["unit_size"].to_list() == [group["members"]] * group["members"]
            first = group["walk_step"]
            # Walked one after another; in survivor order, which under the quality policy can put
            # a statement fact ahead of a group member with a better fused rank.
            assert sorted(members["walk_step"].to_list()) == list(range(first, first + group["members"]))
        drops = rows.filter("near_duplicate")
        assert (drops["duplicate_of_rank"] < drops["fused_rank"]).all()
        survivors = rows.filter(pl.col("fused_rank").is_in(drops["duplicate_of_rank"].implode()))
        assert not survivors["near_duplicate"].any() and (survivors["kind"] == "passage").all()


def check_contributions(analysis: BatchAnalysis) -> None:
    """RRF contributions add up, in lane-name order, to the fused score; rank flow is consistent."""
    candidates, lanes = analysis.candidates, analysis.lanes
    for row in candidates.iter_rows(named=True):
        assert row["lanes"] == sorted(row["lanes"])
        assert len(row["contributions"]) == len(row["lanes"])
        total = 0.0
        for value in row["contributions"]:
            total += value
        assert total == row["score"]
        assert row["lead_rank"] == min(row["lane_ranks"])
        assert row["lane_entries"] == row["dedup_merged"] + 1 >= len(row["lanes"])
    paired = lanes.group_by("q", "fused_rank", maintain_order=True).agg("lane", "lane_rank")
    joined = candidates.join(paired, on=["q", "fused_rank"])
    assert joined.height == candidates.height
    assert (joined["lanes"] == joined["lane"]).all() and (joined["lane_ranks"] == joined["lane_rank"]).all()
    # Fused order is score order; among candidates from one lane only, it keeps that lane's order.
    for (_,), rows in candidates.group_by("q"):
        scores = rows.sort("fused_rank")["score"].to_list()
        assert scores == sorted(scores, reverse=True)
    single = lanes.filter(pl.len().over("q", "fused_rank") == 1).sort("q", "lane", "lane_rank")
    for (_, _), rows in single.group_by("q", "lane"):
        assert rows["fused_rank"].to_list() == sorted(rows["fused_rank"].to_list())
    # Every lane entry is counted once.
    assert int(lanes["lane_entries"].sum()) == int(candidates["lane_entries"].sum())


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("path", [CONFORMANCE, SAMPLE], ids=["conformance", "sample"])
def test_frames_agree_with_packages_on_committed_data(path: Path, policy: str) -> None:
    analysis = analyze(path, policy=get_policy(policy))
    assert analysis.result.packages == assemble_batch(read(path), policy=get_policy(policy)).packages
    check_agreement(analysis)
    check_contributions(analysis)


@pytest.mark.parametrize("overrides", [{"max_items": 3}, {"max_tokens": 700}, {"max_bytes": 2500}])
def test_frames_agree_under_tight_budgets(overrides: dict[str, int]) -> None:
    analysis = analyze(SAMPLE, overrides=overrides)
    check_agreement(analysis)
    assert analysis.queries["omitted_budget_exceeded"].sum() > 0


@pytest.mark.parametrize("policy", POLICIES)
def test_frames_agree_on_synthetic_pools(policy: str) -> None:
    records = generate_records(40, seed=8, profile="typical")
    analysis = analyze(records, policy=get_policy(policy))
    assert analysis.result.packages == assemble_batch(records, policy=get_policy(policy)).packages
    check_agreement(analysis)
    check_contributions(analysis)
    # Every lane entry that survived the search-limit cut is folded into exactly one candidate.
    entries = sum(len(lane or []) for r in analysis.records for lane in r.lanes.values()) - sum(
        len(r.lanes["citations"] or []) for r in analysis.records
    )
    assert int(analysis.candidates["lane_entries"].sum()) == entries


@PROPERTY
@given(lane_batches())
def test_frames_agree_on_random_pools(records: list[dict[str, Any]]) -> None:
    analysis = analyze(records)
    check_agreement(analysis)
    check_contributions(analysis)


@FEWER
@given(lane_batches(max_size=2))
def test_quality_frames_agree_on_random_pools(records: list[dict[str, Any]]) -> None:
    check_agreement(analyze(records, policy=get_policy("quality")))


@FEWER
@given(lane_batches())
def test_threshold_sweep_at_the_contract_threshold_is_the_pipeline(records: list[dict[str, Any]]) -> None:
    analysis = analyze(records)
    candidates = analysis.candidates
    sweep = threshold_sweep(candidates, [0.9, 1.0, 0.0])
    at = {t: part for (t,), part in sweep.group_by("threshold")}
    if sweep.height:
        assert at[0.9]["dropped"].to_list() == at[0.9]["pipeline"].to_list()
        # A lower threshold never keeps more passages than a higher one (the first passage always stays).
        assert (at[0.0]["dropped"] == at[0.0]["passages"] - 1).all()
        assert (at[1.0]["dropped"] <= at[0.9]["dropped"]).all()
    for query_id in analysis.result.query_ids:
        texts = passage_pool(candidates, query_id)["text"].to_list()
        sets = [bigram_codes(normalize_entry(text)) for text in texts]
        assert np.array_equal(dice_matrix(texts) >= 0.9, dice_matches(sets))


def test_dice_matrix_is_symmetric_with_a_unit_diagonal() -> None:
    texts = ["the quick brown fox", "the quick brown fox!", "", "", "a"]
    dice = dice_matrix(texts)
    assert np.array_equal(dice, dice.T)
    assert (np.diag(dice) == 1.0).all()
    assert dice[2, 3] == 1.0 and dice[2, 4] == 0.0
    assert 0.9 <= dice[0, 1] < 1.0


def test_explain_frame_is_the_candidate_rows_of_one_query() -> None:
    analysis = analyze(SAMPLE)
    frame = explain_frame(analysis.result, "ja-005")
    assert frame.equals(analysis.query("ja-005").drop("lane_entries", "dedup_merged", "contributions"))
    with pytest.raises(KeyError):
        explain_frame(analysis.result, "nope")
    with pytest.raises(KeyError):
        analysis.query("nope")


def test_load_records_takes_paths_frames_objects_and_records() -> None:
    raw = read(CONFORMANCE)
    parsed = load_records(CONFORMANCE)
    assert [r.query_id for r in load_records(raw)] == [r.query_id for r in parsed]
    assert [r.limits.max_items for r in load_records(parsed, {"max_items": 2})] == [2] * len(parsed)
    frame = pl.DataFrame([{"query_id": r["query_id"], "context": r["context"]} for r in raw])
    with pytest.raises(InputError):
        load_records(frame)
    with pytest.raises(InputError, match="duplicate query_id"):
        load_records([raw[0], raw[0]])


def test_budget_sweep_rows_are_the_pipeline_summaries() -> None:
    raw = read(SAMPLE)
    sweep = budget_sweep(SAMPLE, "tokens", [500, 4000], fixed={"items": 12})
    assert sweep.height == 2 * len(raw)
    for value in (500, 4000):
        expected = assemble_batch(raw, overrides={"max_tokens": value, "max_items": 12}).summaries
        got = sweep.filter(pl.col("budget") == value).select(expected.columns)
        assert got.equals(expected)
    assert set(sweep["max_tokens"].to_list()) == {500, 4000} and set(sweep["max_items"].to_list()) == {12}
    with pytest.raises(ValueError, match="unknown limit"):
        budget_sweep(SAMPLE, "pages", [1])


def test_binding_limits() -> None:
    roomy = binding_limits(SAMPLE, {"max_items": 1000, "max_bytes": 1048576, "max_tokens": 10**9})
    assert roomy["binding"].unique().to_list() == ["none"]
    tight = binding_limits(SAMPLE, {"max_items": 1000, "max_bytes": 1048576, "max_tokens": 600})
    assert set(tight["binding"].to_list()) == {"tokens", "none"}
    assert (tight.filter(pl.col("binding") == "none")["refused"] == 0).all()
    full = binding_limits(SAMPLE, {"max_items": 2})
    refused = full.filter(pl.col("refused") > 0)
    assert refused.height and (refused["binding"].str.contains("items") == (refused["items_used"] == 2)).all()


def test_lane_removal_and_decision_diff() -> None:
    raw = read(SAMPLE)
    full = analyze(raw)
    same = decision_diff(full.candidates, analyze(raw).candidates)
    assert set(same["change"].to_list()) <= {"kept", "neither"}
    assert same.height == full.candidates.height
    ablated = analyze(without_lane(raw, "passages"))
    assert ablated.candidates.filter(pl.col("kind") == "passage").height == 0
    diff = decision_diff(full.candidates, ablated.candidates)
    lost_passages = diff.filter((pl.col("change") == "lost") & (pl.col("kind") == "passage"))
    assert lost_passages.height == full.candidates.filter(pl.col("admitted") & (pl.col("kind") == "passage")).height
    with pytest.raises(ValueError, match="unknown lane"):
        without_lane(raw, "bm25")


def test_position_wins_shares_add_up() -> None:
    wins = position_wins(analyze(SAMPLE).candidates, top=5)
    totals = wins.group_by("fused_rank").agg(pl.col("share").sum(), pl.col("count").sum()).sort("fused_rank")
    assert totals["share"].to_list() == pytest.approx([1.0] * 5)
    assert totals["fused_rank"].to_list() == [1, 2, 3, 4, 5]


def test_kernel_timings_reports_each_size() -> None:
    texts = ["青嶺酒造は蔵元である。", "青嶺酒造は蔵元である", "杜氏は高瀬", "x"]
    timings = kernel_timings(texts, [1, 2, 4], repeat=2)
    assert timings["size"].to_list() == [1, 2, 4]
    assert timings["pairs"].to_list() == [0, 1, 6]
    assert timings["duplicates"].to_list() == [0, 1, 1]
    assert (timings.select("prepare", "matrix", "walk").to_numpy() >= 0).all()


def test_plots_draw_without_error() -> None:
    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg")
    from assembler.analysis import plotting

    plt = plotting.pyplot()
    analysis = analyze(SAMPLE)
    plotting.rank_flow(analysis.lanes, "ja-005")
    plotting.lane_wins(position_wins(analysis.candidates, top=5))
    plotting.budget_usage(budget_sweep(SAMPLE, "tokens", [300, 1000, 4000]))
    texts = passage_pool(analysis.candidates, "ja-005")["text"].to_list()
    plotting.dice_heatmap(dice_matrix(texts), [str(i) for i in range(len(texts))])
    plotting.kernel_cost(kernel_timings(texts * 4, [2, 5, 10], repeat=1))
    plotting.tiering(analysis.candidates, "ja-009")
    frame = pl.DataFrame({"budget": [1, 2, 1, 2], "mode": ["a", "a", "b", "b"], "value": [0.1, 0.2, 0.3, 0.4]})
    plotting.curves(frame, "budget", "value", "mode", log_x=True)
    plotting.bars(frame, "budget", "value", "mode")
    assert len(plt.get_fignums()) == 8
    plt.close("all")
