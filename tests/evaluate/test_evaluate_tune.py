"""``assembler evaluate tune`` and ``--policy-config``: the fast reselection equals the harness, the
search is deterministic, the choice rule holds, and tuned files are checked strictly."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from evalkit import EVAL, LANES

from assembler.cli import main
from assembler.errors import UsageError
from assembler.evaluate.assembly import assemble_case
from assembler.evaluate.dump import load_lanes
from assembler.evaluate.harness import resolve_budget
from assembler.evaluate.loader import load_eval
from assembler.evaluate.reselect import baseline_hits, policy_hits, prepare
from assembler.evaluate.sweep import parse_budgets
from assembler.evaluate.tune import _choose, fold_assignment, grid, tune
from assembler.selection import CONTRACT, QualityPolicy, get_policy, load_policy_config
from assembler.selection.quality import head_order

ROOT = Path(__file__).resolve().parents[2]
LOCOMO = ROOT / "data" / "eval" / "locomo"
SMALL_GRID = ["--lags", "none,1,3", "--shares", "none,0.4", "--folds", "3"]


def locomo_subset(tmp_path: Path, cases: int) -> Path:
    """The committed LoCoMo set's first ``cases`` cases (the lane dump is used whole)."""
    lines = (LOCOMO / "eval.jsonl").read_text(encoding="utf-8").splitlines()
    path = tmp_path / "eval.jsonl"
    path.write_text("\n".join(lines[: cases + 1]) + "\n", encoding="utf-8")
    return path


def tune_cli(tmp_path: Path, out: str, *flags: str, eval_path: Path | None = None) -> int:
    eval_file = eval_path or locomo_subset(tmp_path, 20)
    args = ["evaluate", "tune", "--eval", str(eval_file), "--lanes", str(LOCOMO / "lanes.jsonl")]
    return main([*args, *SMALL_GRID, *flags, "--out", str(tmp_path / out)])


# --- the fast path equals the harness -----------------------------------------------------------------


@pytest.mark.parametrize("overrides", [{"max_items": 5, "max_tokens": 1500}, {}])
def test_reselection_gives_the_harness_hit_lists_on_locomo(tmp_path: Path, overrides: dict[str, int]) -> None:
    evalset = load_eval(str(locomo_subset(tmp_path, 15)))
    lanes = load_lanes(str(LOCOMO / "lanes.jsonl"), evalset)
    limits = resolve_budget(True, overrides)
    assert limits is not None
    prepared = prepare(evalset, lanes, limits)
    pairs = list(zip(evalset.cases, lanes.records, strict=True))
    tuned = QualityPolicy(name="t", fact_lag=0, statement_share=None, guard=False)
    for policy in (CONTRACT, get_policy("quality"), get_policy("quality-facts-last"), tuned):
        expected = [assemble_case(d.raw, c.limit, limits, policy).hits for c, d in pairs]
        assert policy_hits(prepared, policy) == expected, policy.name


def test_reselection_gives_the_harness_hit_lists_on_the_mini_set() -> None:
    evalset = load_eval(str(EVAL))
    lanes = load_lanes(str(LANES), evalset)
    limits = resolve_budget(True, {"max_items": 3})
    assert limits is not None
    prepared = prepare(evalset, lanes, limits)
    pairs = list(zip(evalset.cases, lanes.records, strict=True))
    for name in ("contract", "quality", "quality-no-statement-test"):
        policy = get_policy(name)
        expected = [assemble_case(d.raw, c.limit, limits, policy).hits for c, d in pairs]
        assert policy_hits(prepared, policy) == expected
    assert all(isinstance(hits, list) for hits in baseline_hits(evalset, lanes, limits))


# --- the choice rule ------------------------------------------------------------------------------


def test_a_tie_keeps_the_untuned_setting() -> None:
    scores = np.array([[[1.0, 0.0]], [[0.0, 1.0]]])  # two settings, one budget, two cases: equal means
    assert _choose(scores, np.zeros((1, 2)), np.arange(2), margin=0.0) == 0


def test_a_setting_below_the_baseline_at_any_budget_is_not_chosen() -> None:
    # setting 1 has the best mean over budgets but falls below the baseline at budget 0
    scores = np.array([[[0.5], [0.5]], [[0.4], [1.0]]])
    baseline = np.array([[0.45], [0.5]])
    assert _choose(scores, baseline, np.arange(1), margin=0.0) == 0
    assert _choose(scores, np.array([[0.3], [0.5]]), np.arange(1), margin=0.0) == 1


def test_a_gain_within_the_margin_keeps_the_untuned_setting() -> None:
    scores = np.array([[[0.5]], [[0.51]]])
    assert _choose(scores, np.zeros((1, 1)), np.arange(1), margin=0.02) == 0
    assert _choose(scores, np.zeros((1, 1)), np.arange(1), margin=0.0) == 1


def test_the_grid_starts_with_the_untuned_quality_and_has_no_repeats() -> None:
    settings = grid(fact_lanes=("graph_activate", "graph_query"))
    untuned = QualityPolicy()
    assert (settings[0].fact_lag, settings[0].statement_share, settings[0].guard) == (
        untuned.fact_lag,
        untuned.statement_share,
        untuned.guard,
    )
    assert len(settings) == len(set(settings))
    assert any(dict(s.lane_offsets).get("graph_query", 0) is None for s in settings)


def test_folds_partition_the_cases_and_follow_the_seed() -> None:
    folds = fold_assignment(23, 4, seed=7)
    assert sorted(int(i) for fold in folds for i in fold) == list(range(23))
    assert [list(f) for f in folds] == [list(f) for f in fold_assignment(23, 4, seed=7)]
    assert [list(f) for f in folds] != [list(f) for f in fold_assignment(23, 4, seed=8)]


def test_tuning_on_locomo_keeps_the_facts_gain_held_out(tmp_path: Path) -> None:
    evalset = load_eval(str(locomo_subset(tmp_path, 30)))
    lanes = load_lanes(str(LOCOMO / "lanes.jsonl"), evalset)
    result = tune(evalset, lanes, parse_budgets("items=5/tokens=1500"), folds=3, seed=1, lags=(None, 3), shares=(None,))
    held = result.held_out
    assert held["tuned"][0] is not None and held["baseline"][0] is not None
    assert held["tuned"][0] >= held["baseline"][0]
    assert [fold.held_out_cases for fold in result.folds] == [10, 10, 10]


# --- the command and the file ---------------------------------------------------------------------


def test_the_same_seed_writes_the_same_file_byte_for_byte(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert tune_cli(tmp_path, "a.json", "--seed", "3") == 0
    assert tune_cli(tmp_path, "b.json", "--seed", "3") == 0
    assert (tmp_path / "a.json").read_bytes() == (tmp_path / "b.json").read_bytes()
    assert "held out" in capsys.readouterr().out


def test_the_tuned_file_records_every_mode_per_fold_and_applies(tmp_path: Path) -> None:
    assert tune_cli(tmp_path, "t.json", "--seed", "0") == 0
    tuned: dict[str, Any] = json.loads((tmp_path / "t.json").read_text(encoding="utf-8"))
    tuning = tuned["tuning"]
    assert len(tuning["per_fold"]) == 3
    for fold in tuning["per_fold"]:
        for part in ("train", "held_out"):
            assert set(fold[part]) == {"tuned", "quality", "contract", "baseline"}
            assert all(len(values) == 3 for values in fold[part].values())
    assert set(tuning["held_out_differences"]) == {"tuned-baseline", "tuned-quality", "tuned-contract"}
    policy = load_policy_config(tmp_path / "t.json")
    assert policy.to_config() == tuned["policy"]
    # Applied through evaluate, the tuned setting scores what the search measured on every case.
    out = tmp_path / "run.json"
    eval_file = tmp_path / "eval.jsonl"
    args = ["evaluate", "--eval", str(eval_file), "--lanes", str(LOCOMO / "lanes.jsonl"), "--assembly"]
    assert main([*args, "--policy-config", str(tmp_path / "t.json"), "--max-items", "5", "--max-tokens", "1500",
                 "--out", str(out)]) == 0  # fmt: skip
    artifact = json.loads(out.read_text(encoding="utf-8"))
    assert artifact["inputs"]["policy"] == "quality-tuned"
    recall = artifact["metrics"]["recall.recall_at_k"]["mean"]
    assert recall == pytest.approx(tuning["all_cases"]["tuned"][0], abs=1e-6)


def test_the_contract_bytes_do_not_change_with_a_policy_config_elsewhere(tmp_path: Path) -> None:
    conformance = ROOT / "data" / "conformance"
    assert main(["assemble", str(conformance / "lanes.jsonl"), "-o", str(tmp_path / "x.jsonl"), "-q"]) == 0
    assert (tmp_path / "x.jsonl").read_bytes() == (conformance / "expected.jsonl").read_bytes()


BAD_CONFIGS = [
    ({"assembler_policy_config": 1, "policy": {"lag": 2}}, "key policy.lag: unknown key"),
    ({"assembler_policy_config": 1, "policy": {"fact_lag": "2"}}, "key policy.fact_lag: must be an integer"),
    ({"assembler_policy_config": 1, "policy": {"guard": 1}}, "key policy.guard: must be true or false"),
    ({"assembler_policy_config": 1, "policy": {"statement_share": 0}}, "key policy.statement_share"),
    ({"assembler_policy_config": 2, "policy": {}}, "key assembler_policy_config: must be 1"),
    ({"assembler_policy_config": 1, "policy": {}, "extra": 1}, "key extra: unknown key"),
    ({"assembler_policy_config": 1, "policy": {"name": "quality"}}, "key policy.name"),
    ({"assembler_policy_config": 1, "policy": {"lane_offsets": {"passages": 1}}}, "key policy.lane_offsets.passages"),
    ({"assembler_policy_config": 1, "policy": {"base": "contract"}}, "key policy.base"),
    ({"policy": {}}, "key assembler_policy_config"),
]


@pytest.mark.parametrize(("config", "message"), BAD_CONFIGS)
def test_a_bad_policy_config_exits_2_naming_the_file_and_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], config: dict[str, Any], message: str
) -> None:
    path = tmp_path / "tuned.json"
    path.write_text(json.dumps(config), encoding="utf-8")
    lanes = str(LOCOMO / "lanes.jsonl")
    assert main(["assemble", lanes, "--policy-config", str(path), "-o", str(tmp_path / "o.jsonl"), "-q"]) == 2
    err = capsys.readouterr().err
    assert str(path) in err and message in err
    args = ["evaluate", "--eval", str(locomo_subset(tmp_path, 3)), "--lanes", lanes, "--assembly"]
    assert main([*args, "--policy-config", str(path), "--out", str(tmp_path / "r.json")]) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "r.json").exists()


def test_a_policy_config_with_another_policy_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "tuned.json"
    path.write_text(json.dumps({"assembler_policy_config": 1, "policy": {}}), encoding="utf-8")
    lanes = str(LOCOMO / "lanes.jsonl")
    code = main(["assemble", lanes, "--policy", "contract", "--policy-config", str(path), "-o", "-", "-q"])
    assert code == 2 and "quality" in capsys.readouterr().err
    with pytest.raises(UsageError):
        get_policy("contract", config={})


def test_a_policy_config_round_trips_and_only_names_what_it_changes() -> None:
    policy = QualityPolicy.from_config({"fact_lag": None, "lane_offsets": {"graph_query": None}})
    assert policy.name == "quality-tuned" and policy.fact_lag is None and policy.statement_share == 0.4
    assert QualityPolicy.from_config(policy.to_config()) == policy


# --- per-lane offsets -----------------------------------------------------------------------------


def test_a_lane_offset_moves_that_lanes_facts_only() -> None:
    sources = ["a", "b", "c", "d", "e"]
    facts = [frozenset({"x"}), frozenset({"y"})]
    plain = head_order(sources, facts, lag=0, head=5, guard=False)
    moved = head_order(sources, facts, lag=0, head=5, guard=False, offsets=[2, 0])
    assert plain[:4] == [(False, 0), (True, 0), (False, 1), (True, 1)]
    # the first fact moves two passages later; the second keeps the fused order behind it
    assert moved[:5] == [(False, 0), (False, 1), (False, 2), (True, 0), (True, 1)]


def test_a_lane_mapped_to_none_keeps_its_facts_behind_the_passages() -> None:
    from tests.selection.test_selection import act, assoc, cite, passage, record

    lanes = {
        "graph_activate": [act(assoc("s", "l", "a statement long enough to count", ("c.md", 0, 1.0)))],
        "passages": [passage("a.md", "first"), passage("b.md", "second"), passage("d.md", "third")],
        "citations": [cite("c.md", 0)],
    }
    from assembler import assemble_batch

    def kinds(policy: QualityPolicy) -> list[str]:
        package = json.loads(assemble_batch([record(lanes)], policy=policy).packages[0])
        return [item["kind"] for item in package["items"]]

    early = QualityPolicy(fact_lag=0, statement_share=None, guard=False)
    assert kinds(early)[:2] == ["passage", "association"]
    late = QualityPolicy(fact_lag=0, statement_share=None, guard=False, lane_offsets=(("graph_activate", None),))
    assert kinds(late) == ["passage", "passage", "passage", "association"]
