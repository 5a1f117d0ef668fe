"""Assembly mode (projection of section 3.6) and the offline structural lane."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path
from typing import Any

import pytest
from evalkit import association, passage, record

import assembler.evaluate.assembly as assembly_module
from assembler.contract.request import Limits
from assembler.evaluate.assembly import assemble_case, assemble_cases, evidence_block, project
from assembler.evaluate.dump import load_lanes
from assembler.evaluate.harness import RunConfig, run_artifact
from assembler.evaluate.loader import load_eval, parse_eval_text
from assembler.evaluate.structural import run_structural
from assembler.evaluate.sweep import parse_budgets, run_sweep
from assembler.run.batch import assemble_table
from assembler.selection import CONTRACT, get_policy
from assembler.stages.lanes import parse_record

DEFAULTS = Limits(max_items=40, max_bytes=65536, max_tokens=4000)
DATA = Path(__file__).resolve().parent / "data"


def item(kind: str, own: tuple[str, int] | None = None, refs: tuple[tuple[str, int], ...] = ()) -> dict[str, Any]:
    entry: dict[str, Any] = {"kind": kind, "citation_refs": [{"source": s, "paragraph": p} for s, p in refs]}
    if kind == "passage" and own:
        entry["passage"] = {"source": own[0], "paragraph": own[1]}
    if kind == "community" and own:
        entry["community"] = {"community": own[0], "paragraph": own[1]}
    return entry


def test_projection_walks_items_in_package_order_own_locator_first_then_refs() -> None:
    items = [
        item("association", refs=(("a.md", 1), ("b.md", 2))),
        item("passage", ("a.md", 1)),
        item("community", ("L0-3", 5)),
    ]
    assert project(items, 10) == [("a.md", 1), ("b.md", 2), ("a.md", 1), ("community:L0-3", 5)]


def test_projection_never_exceeds_the_case_limit_and_keeps_order() -> None:
    items = [item("passage", (f"s{i}.md", i)) for i in range(5)]
    assert project(items, 3) == [("s0.md", 0), ("s1.md", 1), ("s2.md", 2)]
    assert project(items, 1) == [("s0.md", 0)]


def test_an_association_without_refs_contributes_nothing() -> None:
    assert project([item("association"), item("passage", ("a.md", 0))], 5) == [("a.md", 0)]


def test_assembly_uses_the_case_limit_as_search_limit_and_the_run_budget() -> None:
    raw = record(
        "q", [passage(f"s{i}.md", 0, text=f"第{i}段落の本文です。" * (i + 1)) for i in range(6)], graph_activate=None
    )
    raw["request"]["budget"] = {"max_items": 1}  # the dump's own budget is replaced by the run's
    assembled = assemble_case(raw, 4, DEFAULTS, CONTRACT)
    package = assembled.package
    assert package["budget"]["limits"] == {"max_items": 40, "max_bytes": 65536, "max_tokens": 4000}
    assert len(package["items"]) == 4  # search_limit = case limit 4, not the default 5
    assert [locator[0] for locator in assembled.hits] == ["s0.md", "s1.md", "s2.md", "s3.md"]
    assert assembled.latency_ms >= 0
    assert raw["request"]["budget"] == {"max_items": 1} and "search_limit" not in raw["request"]  # input untouched


def test_a_tight_budget_is_applied_and_counted() -> None:
    raw = record("q", [passage(f"s{i}.md", 0, text=f"本文{i}") for i in range(3)])
    assembled = assemble_case(raw, 10, Limits(max_items=1, max_bytes=65536, max_tokens=4000), CONTRACT)
    assert assembled.package["budget"]["items_used"] == 1
    assert assembled.package["omitted_by_reason"] == {"budget_exceeded": 2}


def test_the_evidence_block_carries_locators_never_text() -> None:
    raw = record(
        "q",
        [passage("a.md", 0, text="秘密の本文")],
        graph_activate=[{"strength": 0.5, "path": ["q"], "association": association("q", "杜氏", "高瀬", ("k.md", 3))}],
        citations=[
            {
                "source": "k.md",
                "paragraph": 3,
                "citation": {"text": "引用本文", "source": "k.md", "section": None, "locator": None},
            }
        ],
    )
    assembled = assemble_case(raw, 10, DEFAULTS, CONTRACT)
    block = evidence_block(assembled)
    text = json.dumps(block, ensure_ascii=False)
    assert "秘密の本文" not in text and "引用本文" not in text
    assert block["outcome"] == "assembled"
    kinds = {entry["kind"]: entry for entry in block["items"]}
    assert "source" not in kinds["association"] and kinds["association"]["citation_refs"] == [
        {"source": "k.md", "paragraph": 3}
    ]
    assert (kinds["passage"]["source"], kinds["passage"]["paragraph"]) == ("a.md", 0)
    assert set(block) == {"outcome", "latency_ms", "items", "selection", "reranker"}
    assert ("k.md", 3) in assembled.hits  # graph evidence reaches the scored hit list


def test_structural_lane_matches_with_normalize_entry_and_collects_attributions() -> None:
    case_line = json.dumps(
        {
            "case_id": "q",
            "query": "q",
            "expected_concepts": ["ﾀｶｾ", "不在"],
            "expected_labels": ["杜氏"],
            "expected_associations": [
                {"subject": "青嶺酒造", "label": "杜氏", "object": " タカセ "},
                {"subject": "青嶺酒造", "label": "杜氏", "object": "別人"},
            ],
        },
        ensure_ascii=False,
    )
    case = parse_eval_text('{"taguru_eval":1}\n' + case_line, "e.jsonl").cases[0]
    raw = record(
        "q",
        [],
        graph_query=[association("青嶺酒造", "杜氏", "たかせ", ("k.md", 1), ("l.md", 2))],
        graph_activate=[{"strength": 0.5, "path": ["青嶺酒造"], "association": association("a", "b", "c")}],
    )
    structural = run_structural(case, parse_record(raw))
    assert structural.concepts_matched(case.expected_concepts) == 1
    assert structural.labels_matched(case.expected_labels) == 1
    assert [probe.total for probe in structural.probes] == [1, 0]
    assert structural.served() == {("k.md", 1), ("l.md", 2)}
    block = structural.block(case)
    assert block["associations"][0]["query"] == {
        "outcome": "queried",
        "total": 1,
        "matches": 1,
        "attributions": [{"source": "k.md", "paragraph": 1}, {"source": "l.md", "paragraph": 2}],
    }
    assert "青嶺酒造" in block["concept_names"] and block["label_names"] == ["杜氏", "b"]


@pytest.mark.parametrize("policy", ["contract", "quality"])
@pytest.mark.parametrize("limits", [DEFAULTS, Limits(max_items=3, max_bytes=65536, max_tokens=700)])
def test_batched_assembly_gives_every_case_the_package_of_its_own_call(policy: str, limits: Limits) -> None:
    evalset = load_eval(str(DATA / "eval.jsonl"))
    lanes = load_lanes(str(DATA / "lanes.jsonl"), evalset)
    # Varied case limits: each case's search_limit is its own, even inside one batch.
    pairs = [(dump.raw, 1 + i % 7) for i, dump in enumerate(lanes.records)]
    batched = assemble_cases(pairs, limits, get_policy(policy))
    alone = [assemble_case(raw, limit, limits, get_policy(policy)) for raw, limit in pairs]
    assert [a.package for a in batched] == [a.package for a in alone]
    assert [a.hits for a in batched] == [a.hits for a in alone]
    assert len({a.latency_ms for a in batched}) == 1  # the batch's wall time, shared evenly


def test_a_records_own_text_gives_the_package_of_the_request_written_anew() -> None:
    """The dump's text is used as is where the case limit is the record's own search limit (the
    committed HotpotQA dump: 10, as its cases ask), and the request is written anew where it is
    not: the same packages either way."""
    hotpotqa = Path(__file__).resolve().parents[2] / "data" / "eval" / "hotpotqa"
    evalset = load_eval(str(hotpotqa / "eval.jsonl"))
    lanes = load_lanes(str(hotpotqa / "lanes.jsonl"), evalset)
    records = lanes.records[:12]
    pairs = [(dump.raw, 10 if i % 2 else 3) for i, dump in enumerate(records)]
    assert all(dump.raw["request"]["search_limit"] == 10 for dump in records)  # half the texts are used
    with_texts = assemble_cases(pairs, DEFAULTS, CONTRACT, [dump.text for dump in records])
    written = assemble_cases(pairs, DEFAULTS, CONTRACT)
    assert [a.package for a in with_texts] == [a.package for a in written]


def test_no_case_means_no_pipeline_call(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(assembly_module, "assemble_table", None)  # calling it would fail
    assert assemble_cases([], DEFAULTS, CONTRACT) == []


def _count_pipeline_calls(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Spy on the pipeline entry the assembly mode calls; returns the batch sizes seen."""
    sizes: list[int] = []

    def spy(table: Any, **kwargs: Any) -> Any:
        sizes.append(table.num_rows)
        return assemble_table(table, **kwargs)

    monkeypatch.setattr(assembly_module, "assemble_table", spy)
    return sizes


def test_an_assembly_run_assembles_all_its_cases_in_one_batch(monkeypatch: pytest.MonkeyPatch) -> None:
    evalset = load_eval(str(DATA / "eval.jsonl"))
    lanes = load_lanes(str(DATA / "lanes.jsonl"), evalset)
    sizes = _count_pipeline_calls(monkeypatch)
    artifact, _ = run_artifact(evalset, lanes, RunConfig(assembly=True), out="a.json")
    assert sizes == [len(evalset.cases)]
    latencies = {case["evidence"]["latency_ms"] for case in artifact["cases"]}
    assert len(latencies) == 1 and {case["passage"]["latency_ms"] for case in artifact["cases"]} == latencies
    assert artifact["metrics"]["latency.evidence_ms"]["n"] == len(evalset.cases)


def test_a_sweep_assembles_each_budget_in_one_batch(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    evalset = load_eval(str(DATA / "eval.jsonl"))
    lanes = load_lanes(str(DATA / "lanes.jsonl"), evalset)
    sizes = _count_pipeline_calls(monkeypatch)
    run_sweep(evalset, lanes, parse_budgets("items=2,5,default"), "contract", out_dir=str(tmp_path))
    assert sizes == [len(evalset.cases)] * 3  # the baseline runs never call the pipeline


def test_a_ctrl_c_during_the_assembly_step_is_raised_once_it_is_done(monkeypatch: pytest.MonkeyPatch) -> None:
    """Held while the pipeline runs, as in ``assemble`` (raised inside Polars' native code, it came
    out as another error with a traceback); delivered as soon as the step ends."""
    finished: list[int] = []

    def interrupted(table: Any, **kwargs: Any) -> Any:
        os.kill(os.getpid(), signal.SIGINT)  # a Ctrl-C as the pipeline starts
        result = assemble_table(table, **kwargs)
        finished.append(table.num_rows)
        return result

    monkeypatch.setattr(assembly_module, "assemble_table", interrupted)
    evalset = load_eval(str(DATA / "eval.jsonl"))
    lanes = load_lanes(str(DATA / "lanes.jsonl"), evalset)
    with pytest.raises(KeyboardInterrupt):
        assemble_cases([(dump.raw, 5) for dump in lanes.records], DEFAULTS, CONTRACT)
    assert finished == [len(lanes.records)]
