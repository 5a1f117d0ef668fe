"""End to end on the committed mini set: baseline, --assembly, thresholds, compare, sweep, bad input."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
from evalkit import EVAL, LANES, Writer, dumps, passage, record

from assembler.cli import main
from assembler.contract.request import Limits
from assembler.contract.wire import PASSAGE_HIT, validate
from assembler.evaluate.baseline import truncate
from assembler.evaluate.catalog import METRICS

LIVE_ONLY = (
    "citations.locator_validity",
    "citations.no_paragraph",
    "citations.no_source",
    "citations.other",
    "citations.quote_match",
    "citations.resolved",
    "citations.section_match",
    "latency.citation_ms",
    "latency.query_ms",
    "latency.resolve_ms",
    "rerank.ran",
)


def run(*args: str | Path) -> int:
    return main(["evaluate", *map(str, args)])


def evaluate(tmp_path: Path, name: str, *flags: str) -> dict[str, Any]:
    out = tmp_path / name
    assert run("--eval", EVAL, "--lanes", LANES, "--out", out, *flags) == 0
    loaded: dict[str, Any] = json.loads(out.read_text(encoding="utf-8"))
    return loaded


def cases(artifact: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {block["case_id"]: block for block in artifact["cases"]}


def test_a_baseline_run_writes_the_artifact(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    artifact = evaluate(tmp_path, "base.json")
    captured = capsys.readouterr()
    assert "no --thresholds given — this run is report-only and always exits 0" in captured.err
    assert f"wrote {tmp_path / 'base.json'}" in captured.out
    assert list(artifact) == [
        "taguru_evaluation",
        "generated_at",
        "matching",
        "inputs",
        "corpus",
        "thresholds",
        "definitions",
        "cases",
        "metrics",
    ]
    assert list(artifact["metrics"]) == list(METRICS) == list(artifact["definitions"])
    inputs = artifact["inputs"]
    assert inputs["mode"] == "baseline" and "budget" not in inputs and "policy" not in inputs
    assert inputs["eval"] == {"path": str(EVAL), "name": "brewery-mini", "cases": 11}
    assert inputs["context"] == "brewery" and artifact["thresholds"] is None
    assert all("budget" not in block and "evidence" not in block for block in artifact["cases"])
    metrics = artifact["metrics"]
    for name in LIVE_ONLY:
        assert metrics[name]["n"] == 0
        assert "live server" in metrics[name]["absent"] or "reranker" in metrics[name]["absent"]
    assert metrics["budget.items_used"]["absent"].startswith("no --max-* flag")
    assert metrics["latency.passage_ms"]["n"] == 0 and metrics["latency.evidence_ms"]["n"] == 0
    assert metrics["passage.failure_rate"] == {"value": 0.0, "n": 11, "numerator": 0}
    text = (tmp_path / "base.json").read_text(encoding="utf-8")
    assert "青嶺酒造は、" not in text  # hits carry locators, never passage text
    # Hand-checked cases: ja-030 hits [aliases.md#1] only; ja-018 declares nothing.
    by_id = cases(artifact)
    ja030 = by_id["ja-030"]
    assert [(h["source"], h["paragraph"]) for h in ja030["passage"]["hits"]] == [("corpus/aliases.md", 1)]
    assert ja030["recall"] == {
        "recall_at_k": 0.5,
        "mrr": 1.0,
        "ndcg": pytest.approx(3 / (3 + 1 / math.log2(3))),
        "expected_total": 2,
        "matched": 1,
    }
    assert ja030["missed"] == ["expected_sources: 'corpus/table_noisy.md' not found among passage hits"]
    assert "recall" not in by_id["ja-018"] and by_id["ja-018"]["diversity_sources"] == 2
    assert by_id["ja-021"]["recall"]["expected_total"] == 2  # the relevance-0 entry is not counted
    assert "structural" not in by_id["ja-029"] and "structural" in by_id["ja-005"]
    assert metrics["structural.case_rate"] == {"value": 6 / 11, "n": 11, "numerator": 6}
    assert metrics["recall.recall_at_k"]["n"] == 10


def test_an_assembly_run_records_budget_policy_and_latency(tmp_path: Path) -> None:
    artifact = evaluate(tmp_path, "asm.json", "--assembly")
    inputs = artifact["inputs"]
    assert inputs["mode"] == "assembly" and inputs["policy"] == "contract"
    assert inputs["budget"] == {"max_items": 40, "max_bytes": 65536, "max_tokens": 4000}
    for block in artifact["cases"]:
        assert block["evidence"]["outcome"] == "assembled"
        assert block["budget"]["limits"] == inputs["budget"]
        assert all(hit["score"] == 0.0 and hit["lanes"] == {} for hit in block["passage"]["hits"])
        assert len(block["passage"]["hits"]) <= block["limit"]
        assert "plan" not in block["passage"]
    metrics = artifact["metrics"]
    assert metrics["latency.evidence_ms"]["n"] == 11 and "absent" not in metrics["latency.evidence_ms"]
    assert metrics["latency.passage_ms"]["n"] == 11
    assert metrics["budget.items_used"]["n"] == 11


def test_the_baseline_budget_block_is_the_truncation_of_the_dump(tmp_path: Path) -> None:
    artifact = evaluate(tmp_path, "b.json", "--max-tokens", "300")
    assert artifact["inputs"]["budget"] == {"max_items": 40, "max_bytes": 65536, "max_tokens": 300}
    dumps_by_id = {json.loads(line)["query_id"]: json.loads(line) for line in LANES.read_text("utf-8").splitlines()}
    limits = Limits(max_items=40, max_bytes=65536, max_tokens=300)
    for block in artifact["cases"]:
        raw = dumps_by_id[block["case_id"]]
        hits = [validate(PASSAGE_HIT, hit, "h") for hit in raw["lanes"]["passages"]][: block["limit"]]
        expected = truncate(raw["context"], hits, limits)
        assert block["budget"] == {
            "items_used": expected.items_used,
            "bytes_used": expected.bytes_used,
            "tokens_used": expected.tokens_used,
            "limits": {"max_items": 40, "max_bytes": 65536, "max_tokens": 300},
            "omitted_total": expected.omitted_total,
        }
        assert [(h["source"], h["paragraph"]) for h in block["passage"]["hits"]] == [
            (hits[i]["source"], hits[i]["paragraph"]) for i in expected.kept
        ]
        assert block["budget"]["tokens_used"] <= 300 or block["budget"]["items_used"] == 0
    rate = artifact["metrics"]["budget.omitted_rate"]
    omitted = sum(b["budget"]["omitted_total"] for b in artifact["cases"])
    assert rate["numerator"] == omitted and rate["n"] == omitted + sum(
        b["budget"]["items_used"] for b in artifact["cases"]
    )


def test_equal_budget_compare_of_baseline_and_assembly(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    evaluate(tmp_path, "b3.json", "--max-items", "3")
    evaluate(tmp_path, "a3.json", "--assembly", "--max-items", "3")
    capsys.readouterr()
    out = tmp_path / "changes.jsonl"
    assert run("compare", tmp_path / "b3.json", tmp_path / "a3.json", "--out", out) == 0
    captured = capsys.readouterr()
    assert "budget differs" not in captured.err
    assert "mode baseline, policy -, budget max_items=3 max_bytes=65536 max_tokens=4000" in captured.out
    assert "mode assembly, policy contract, budget max_items=3 max_bytes=65536 max_tokens=4000" in captured.out
    lines = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    header = lines[0]
    counts = header["counts"]
    assert counts["cases_base"] == counts["cases_head"] == 11
    assert counts["improved"] + counts["regressed"] + counts["unchanged"] == 11
    assert len(lines) == 1 + counts["improved"] + counts["regressed"]
    assert "warnings" not in header


def test_compare_warns_on_a_budget_mismatch_and_still_exits_0(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    evaluate(tmp_path, "base.json")
    evaluate(tmp_path, "asm.json", "--assembly", "--max-items", "2")
    capsys.readouterr()
    assert run("compare", tmp_path / "base.json", tmp_path / "asm.json", "--out", tmp_path / "c.jsonl") == 0
    assert (
        "assembler: evaluate: warning: budget differs: BASE none (untruncated baseline) vs HEAD max_items=2 "
        "max_bytes=65536 max_tokens=4000 — not an equal-budget comparison"
    ) in capsys.readouterr().err


def test_two_runs_differ_only_in_time_fields(tmp_path: Path) -> None:
    first = evaluate(tmp_path, "one.json", "--assembly", "--max-items", "3")
    second = evaluate(tmp_path, "two.json", "--assembly", "--max-items", "3")

    def scrub(value: Any) -> Any:
        if isinstance(value, dict):
            return {
                k: scrub(v)
                for k, v in value.items()
                if k not in ("latency_ms", "generated_at", "out") and not k.startswith("latency.")
            }
        if isinstance(value, list):
            return [scrub(v) for v in value]
        return value

    assert scrub(first) == scrub(second)


def test_thresholds_pass_fail_and_bad_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    good = tmp_path / "good.json"
    good.write_text(dumps({"taguru_evaluate_thresholds": 1, "aggregate": {"recall.recall_at_k": {"min": 0.5}}}))
    out = tmp_path / "run.json"
    assert run("--eval", EVAL, "--lanes", LANES, "--thresholds", good, "--out", out) == 0
    assert "thresholds: PASS (sha256 " in capsys.readouterr().out
    assert json.loads(out.read_text())["thresholds"]["passed"] is True

    strict = tmp_path / "strict.json"
    strict.write_text(
        dumps(
            {
                "taguru_evaluate_thresholds": 1,
                "aggregate": {"citations.resolved": {"min": 0.5}},
                "cases": {"default": {"diversity.sources": {"min": 3}}},
            }
        )
    )
    out = tmp_path / "fail.json"
    assert run("--eval", EVAL, "--lanes", LANES, "--thresholds", strict, "--out", out) == 3
    report = json.loads(out.read_text())["thresholds"]
    assert not report["passed"] and report["violations"][0]["scope"] == "aggregate"
    assert report["violations"][0]["reason"].startswith("no samples for this metric (n=0): needs a live server")
    assert "thresholds: FAIL — " in capsys.readouterr().out

    bad = tmp_path / "bad.json"
    bad.write_text(
        dumps({"taguru_evaluate_thresholds": 1, "aggregate": {"nope": {}}, "cases": {"overrides": {"x": {}}}})
    )
    out = tmp_path / "never.json"
    assert run("--eval", EVAL, "--lanes", LANES, "--thresholds", bad, "--out", out) == 2
    assert not out.exists()
    assert (
        f"assembler: error: {bad}: aggregate: unknown metric name 'nope'; cases.overrides: unknown case_id 'x'"
        in capsys.readouterr().err
    )


def test_a_case_without_lanes_is_an_input_error_naming_every_such_case(
    tmp_path: Path, write_eval: Writer, write_lanes: Writer, capsys: pytest.CaptureFixture[str]
) -> None:
    eval_path = write_eval(
        [{"case_id": "q1", "query": "x"}, {"case_id": "q2", "query": "y"}, {"case_id": "q3", "query": "z"}]
    )
    lanes = write_lanes([record("q2", [passage("a.md", 0)]), record("extra", [])])
    out = tmp_path / "never.json"
    assert run("--eval", eval_path, "--lanes", lanes, "--out", out) == 2
    err = capsys.readouterr().err.splitlines()
    assert err == [
        f"assembler: error: {eval_path}: line 2: case 'q1': no lane-dump record with query_id 'q1' in {lanes}",
        f"assembler: error: {eval_path}: line 4: case 'q3': no lane-dump record with query_id 'q3' in {lanes}",
    ]
    assert not out.exists()


def test_unused_dump_records_and_offline_filters_warn(
    tmp_path: Path, write_eval: Writer, write_lanes: Writer, capsys: pytest.CaptureFixture[str]
) -> None:
    eval_path = write_eval([{"case_id": "q1", "query": "x", "options": {"tags": ["蔵"], "floor": 0.5}}])
    lanes = write_lanes([record("q1", [passage("a.md", 0)]), record("extra", [])])
    assert run("--eval", eval_path, "--lanes", lanes, "--out", tmp_path / "r.json") == 0
    err = capsys.readouterr().err
    assert (
        "warning: case 'q1': options.floor/tags not applied: an offline run uses the lane dump's lanes as dumped" in err
    )
    assert f"warning: ignored 1 lane-dump record of {lanes} that no case asks for" in err
    artifact = json.loads((tmp_path / "r.json").read_text())
    assert len(artifact["warnings"]) == 2
    assert artifact["metrics"]["coverage.concepts"]["absent"] == "no case declares expected_concepts"


def test_structural_metrics_are_absent_when_the_dump_has_no_graph_lane(
    tmp_path: Path, write_eval: Writer, write_lanes: Writer
) -> None:
    eval_path = write_eval(
        [{"case_id": "q1", "query": "x", "expected_concepts": ["c"], "expected_sources": [{"source": "a.md"}]}]
    )
    lanes = write_lanes([record("q1", [passage("a.md", 0)])])
    assert run("--eval", eval_path, "--lanes", lanes, "--out", tmp_path / "r.json") == 0
    metrics = json.loads((tmp_path / "r.json").read_text())["metrics"]
    for name in ("coverage.concepts", "structural.case_rate", "lanes.both"):
        assert metrics[name]["n"] == 0 and metrics[name]["absent"].startswith("the lane dump carries no graph lane")


def test_a_bad_lane_dump_record_names_file_line_and_field(
    tmp_path: Path, write_eval: Writer, write_lanes: Writer, capsys: pytest.CaptureFixture[str]
) -> None:
    eval_path = write_eval([{"case_id": "q1", "query": "x"}])
    bad = record("q1", [passage("a.md", 0)])
    bad["lanes"]["passages"][0]["paragraph"] = -1
    lanes = write_lanes([record("q0", []), bad])
    assert run("--eval", eval_path, "--lanes", lanes, "--out", tmp_path / "r.json") == 2
    err = capsys.readouterr().err
    assert f"{lanes}:2: query_id 'q1' field lanes.passages[0].paragraph: must be an integer from 0" in err
    assert not (tmp_path / "r.json").exists()


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (("--lanes", "x"), "--eval FILE is required"),
        (("--eval", "x"), "--lanes FILE is required"),
        (("--eval", str(EVAL), "--lanes", str(LANES), "--policy", "contract"), "--policy requires --assembly"),
        (("--eval", str(EVAL), "--lanes", str(LANES), "--assembly", "--policy", "nope"), "unknown policy 'nope'"),
        (("--eval", str(EVAL), "--lanes", str(LANES), "--out", "/nonexistent/dir/r.json"), "folder /nonexistent/dir"),
        (("--eval", "/nonexistent.jsonl", "--lanes", str(LANES)), "cannot read /nonexistent.jsonl"),
        (("--eval", str(EVAL), "--lanes", "/nonexistent.jsonl"), "cannot read /nonexistent.jsonl"),
    ],
)
def test_usage_and_input_errors_exit_2(
    argv: tuple[str, ...], message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: Any
) -> None:
    monkeypatch.chdir(tmp_path)
    assert run(*argv) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "evaluation.json").exists()


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (("--max-items", "0"), "needs a positive integer, got 0"),
        (("--max-tokens", "abc"), "needs a positive integer, got 'abc'"),
        (("--out", "a", "--out", "b"), "--out given twice"),
        (("--assembly", "--assembly"), "--assembly given twice"),
        (("--max-bytes", "5", "--max-bytes", "6"), "--max-bytes given twice"),
        (("bogus",), "invalid choice: 'bogus'"),
    ],
)
def test_flag_errors_exit_2(argv: tuple[str, ...], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as caught:
        run(*argv)
    assert caught.value.code == 2
    assert message in capsys.readouterr().err


def test_compare_usage_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as caught:
        run("compare", "only-one.json")
    assert caught.value.code == 2
    assert run("compare", tmp_path / "a.json", tmp_path / "b.json", "--out", tmp_path / "c.jsonl") == 2
    assert "BASE reading" in capsys.readouterr().err
    assert not (tmp_path / "c.jsonl").exists()


def test_sweep_writes_the_table_and_one_artifact_per_budget_and_mode(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out_dir = tmp_path / "sweep"
    status = main(
        ["evaluate", "sweep", "--eval", str(EVAL), "--lanes", str(LANES), "--budgets", "items=2,5,default",
         "--out-dir", str(out_dir), "--no-plot"]
    )  # fmt: skip
    assert status == 0
    table = json.loads((out_dir / "sweep.json").read_text())
    assert [b["budget"] for b in table["budgets"]] == ["items=2", "items=5", "default"]
    assert len(table["rows"]) == 3 * 2 * len(METRICS)
    csv_lines = (out_dir / "sweep.csv").read_text().splitlines()
    assert csv_lines[0] == "budget,max_items,max_bytes,max_tokens,mode,policy,metric,value,n"
    assert len(csv_lines) == 1 + len(table["rows"])
    runs = sorted(p.name for p in (out_dir / "runs").iterdir())
    assert len(runs) == 6 and "baseline-items2-bytes65536-tokens4000.json" in runs
    baseline = json.loads((out_dir / "runs" / "baseline-items2-bytes65536-tokens4000.json").read_text())
    assembly = json.loads((out_dir / "runs" / "assembly-items2-bytes65536-tokens4000.json").read_text())
    assert baseline["inputs"]["budget"] == assembly["inputs"]["budget"]  # equal budget, both modes
    assert not (out_dir / "sweep.png").exists()
    out = capsys.readouterr().out
    assert "recall@k" in out and "items=5" in out


def test_sweep_budget_spec_errors(capsys: pytest.CaptureFixture[str]) -> None:
    for spec, message in (
        ("5", "needs an entry with exactly one KEY=N"),
        ("weight=3", "unknown budget key 'weight'"),
        ("tokens=0", "'0' is not a positive integer"),
        ("tokens=5,,", "empty entry"),
    ):
        argv = ["evaluate", "sweep", "--eval", str(EVAL), "--lanes", str(LANES), "--budgets", spec, "--no-plot"]
        assert main(argv) == 2
        assert message in capsys.readouterr().err


def test_sweep_plot(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    out_dir = tmp_path / "plot"
    argv = ["evaluate", "sweep", "--eval", str(EVAL), "--lanes", str(LANES), "--budgets", "tokens=300,1000,4000",
            "--out-dir", str(out_dir)]  # fmt: skip
    assert main(argv) == 0
    assert (out_dir / "sweep.png").read_bytes().startswith(b"\x89PNG")
    svg = (out_dir / "sweep.svg").read_text()
    assert "<svg" in svg and "recall@k" in svg


def test_sweep_without_matplotlib_asks_for_the_extra_before_any_work(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import importlib

    real = importlib.import_module

    def no_matplotlib(name: str, package: str | None = None) -> Any:
        if name.startswith("matplotlib"):
            raise ImportError(name)
        return real(name, package)

    monkeypatch.setattr(importlib, "import_module", no_matplotlib)
    out_dir = tmp_path / "none"
    argv = ["evaluate", "sweep", "--eval", str(EVAL), "--lanes", str(LANES), "--budgets", "tokens=300", "--out-dir"]
    assert main([*argv, str(out_dir)]) == 2
    assert "install the 'plot' extra: python -m pip install -e '.[plot]'" in capsys.readouterr().err
    assert not out_dir.exists()


HOSTILE_ID = "\x1b[31mRED\x1b[0m\nassembler: error: fake"
HUGE_ID = "x" * 20_000_000
LINE_BOUND = 600  # every line below, prefix included, whatever the length of the id


def single_stderr_line(capsys: pytest.CaptureFixture[str]) -> str:
    """The one line on stderr: no raw control character, bounded."""
    err = capsys.readouterr().err
    assert err.endswith("\n") and err.count("\n") == 1, err[:500]
    line = err[:-1]
    assert "\x1b" not in line and "\r" not in line
    assert line.startswith("assembler: error: ") and len(line) < LINE_BOUND
    return line


def _hostile_eval(write_eval: Writer, case_id: str, problem: str) -> Path:
    case: dict[str, Any] = {"case_id": case_id, "query": "q"}
    if problem == "limit":
        case["options"] = {"limit": 5000}
    if problem == "empty query":
        case["query"] = ""
    return write_eval([case, case] if problem == "duplicate" else [case])


@pytest.mark.parametrize("case_id", [HOSTILE_ID, HUGE_ID], ids=["escape-and-newline", "20MB"])
@pytest.mark.parametrize("problem", ["no lane record", "duplicate", "limit", "empty query"])
def test_a_hostile_case_id_is_one_escaped_bounded_error_line(
    tmp_path: Path,
    write_eval: Writer,
    write_lanes: Writer,
    capsys: pytest.CaptureFixture[str],
    case_id: str,
    problem: str,
) -> None:
    eval_path = _hostile_eval(write_eval, case_id, problem)
    lanes = write_lanes([record("other", [passage("a.md", 0)])])
    assert run("--eval", eval_path, "--lanes", lanes, "--out", tmp_path / "r.json") == 2
    line = single_stderr_line(capsys)
    if case_id == HOSTILE_ID:
        assert "case_id '\\x1b[31mRED\\x1b[0m\\x0aassembler: error: fake'" in line or (
            "case '\\x1b[31mRED\\x1b[0m\\x0aassembler: error: fake'" in line
        )
    else:
        assert "…(19999920 more)" in line
    assert not (tmp_path / "r.json").exists()


def test_a_hostile_case_id_in_a_warning_is_escaped(
    tmp_path: Path, write_eval: Writer, write_lanes: Writer, capsys: pytest.CaptureFixture[str]
) -> None:
    eval_path = write_eval([{"case_id": HOSTILE_ID, "query": "q", "options": {"tags": ["t"]}}])
    lanes = write_lanes([record(HOSTILE_ID, [passage("a.md", 0)])])
    assert run("--eval", eval_path, "--lanes", lanes, "--out", tmp_path / "r.json") == 0
    captured = capsys.readouterr()
    assert "\x1b" not in captured.err + captured.out
    [warning] = [line for line in captured.err.splitlines() if "options.tags not applied" in line]
    assert warning.startswith("assembler: evaluate: warning: case '\\x1b[31mRED\\x1b[0m\\x0aassembler: error: fake'")
    assert not any(line.startswith("assembler: error:") for line in captured.err.splitlines())


@pytest.mark.parametrize("key", [HOSTILE_ID, HUGE_ID], ids=["escape-and-newline", "20MB"])
def test_hostile_threshold_keys_are_one_escaped_bounded_error_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], key: str
) -> None:
    thresholds = tmp_path / "t.json"
    body = {"taguru_evaluate_thresholds": 1, key: 1, "aggregate": {key: {"min": 0}}, "cases": {"overrides": {key: {}}}}
    thresholds.write_text(json.dumps(body), encoding="utf-8")
    assert run("--eval", EVAL, "--lanes", LANES, "--thresholds", thresholds, "--out", tmp_path / "r.json") == 2
    line = single_stderr_line(capsys)
    assert "unknown field" in line and "unknown metric name" in line and "unknown case_id" in line


def test_many_threshold_problems_are_cut_to_the_first_ten(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    thresholds = tmp_path / "t.json"
    body = {"taguru_evaluate_thresholds": 1, "aggregate": {f"nope{i}": {"min": 0} for i in range(500)}}
    thresholds.write_text(json.dumps(body), encoding="utf-8")
    assert run("--eval", EVAL, "--lanes", LANES, "--thresholds", thresholds, "--out", tmp_path / "r.json") == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.count("unknown metric name") == 10 and "... and 490 more" in err


def test_many_cases_without_lanes_print_at_most_twenty_lines_and_a_count(
    tmp_path: Path, write_eval: Writer, write_lanes: Writer, capsys: pytest.CaptureFixture[str]
) -> None:
    eval_path = write_eval([{"case_id": f"c{i}", "query": "q"} for i in range(50)])
    lanes = write_lanes([record("other", [passage("a.md", 0)])])
    assert run("--eval", eval_path, "--lanes", lanes, "--out", tmp_path / "r.json") == 2
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 21 and lines[-1] == "assembler: error: ... and 30 more"


HOSTILE_NAME = "in\n\x1b[2Jassembler: error: forged.json"


def test_a_missing_eval_file_named_with_control_characters_is_one_escaped_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run("--eval", tmp_path / HOSTILE_NAME, "--lanes", LANES, "--out", tmp_path / "r.json") == 2
    line = single_stderr_line(capsys)
    assert line.startswith("assembler: error: cannot read ") and "in\\x0a\\x1b[2Jassembler: error: forged.json" in line


def test_an_output_in_a_missing_folder_named_with_control_characters_is_one_escaped_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / HOSTILE_NAME / "r.json"
    assert run("--eval", EVAL, "--lanes", LANES, "--out", out) == 2
    assert single_stderr_line(capsys).startswith("assembler: error: cannot write ")


def test_compare_of_a_missing_artifact_named_with_control_characters_is_one_escaped_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    head = evaluate(tmp_path, "head.json")
    assert head["cases"]
    capsys.readouterr()
    assert run("compare", tmp_path / HOSTILE_NAME, tmp_path / "head.json", "--out", tmp_path / "c.jsonl") == 2
    line = single_stderr_line(capsys)
    assert line.startswith("assembler: error: BASE reading ") and "\\x0a\\x1b[2J" in line


def test_compare_escapes_hostile_ids_and_metric_names_of_an_artifact(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    artifact = evaluate(tmp_path, "base.json")
    artifact["cases"].append(dict(artifact["cases"][0], case_id=HOSTILE_ID))
    artifact["cases"].append(dict(artifact["cases"][0], case_id=HOSTILE_ID))
    artifact["metrics"][HOSTILE_ID] = {"n": 1, "value": 1.0}
    artifact["inputs"]["context"] = HUGE_ID
    (tmp_path / "head.json").write_text(json.dumps(artifact), encoding="utf-8")
    capsys.readouterr()
    assert run("compare", tmp_path / "base.json", tmp_path / "head.json", "--out", tmp_path / "c.jsonl") == 0
    captured = capsys.readouterr()
    assert "\x1b" not in captured.err + captured.out
    assert all(len(line) < LINE_BOUND for line in (captured.err + captured.out).splitlines())
    assert not any(line.startswith("assembler: error:") for line in captured.err.splitlines())


# --- what the commands say: no file unasked, a non-artifact named, the batch time, plurals, progress ---


def test_compare_without_out_writes_no_file_and_says_how_to_write_the_changes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    evaluate(tmp_path, "b.json", "--max-items", "3")
    evaluate(tmp_path, "a.json", "--assembly", "--max-items", "3")
    monkeypatch.chdir(tmp_path)
    capsys.readouterr()
    assert run("compare", "b.json", "a.json") == 0
    assert sorted(path.name for path in tmp_path.iterdir()) == ["a.json", "b.json"]
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("evaluate compare: 11 cases in BASE, 11 in HEAD")
    assert out[-1] == "per-case changes not written: give --out FILE to write them (JSON Lines)"
    assert not any(line.startswith("wrote") for line in out)


def test_compare_of_a_file_that_is_not_an_artifact_is_one_line_naming_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    evaluate(tmp_path, "b.json")
    tuned = tmp_path / "tuned.json"
    tuned.write_text(json.dumps({"assembler_policy_config": 1, "policy": {"name": "quality"}}), encoding="utf-8")
    capsys.readouterr()
    assert run("compare", tmp_path / "b.json", tuned) == 2
    assert capsys.readouterr().err == (
        f"assembler: error: HEAD {tuned} is not an evaluation artifact (the JSON object 'assembler evaluate --out' "
        "writes): it has no field taguru_evaluation (it is a policy config, as 'evaluate tune' writes)\n"
    )
    assert run("compare", LANES, tmp_path / "b.json") == 2
    assert capsys.readouterr().err.endswith(": it is JSON Lines (one object per line)\n")


def test_the_summary_gives_the_assembly_batch_time_not_per_case_statistics(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    artifact = evaluate(tmp_path, "a.json", "--assembly")
    out = capsys.readouterr().out
    assert "p90" not in out and "mean" not in next(line for line in out.splitlines() if "ms" in line)
    timing = next(line for line in out.splitlines() if line.startswith("assembly: "))
    assert timing.endswith(
        " for 11 cases in one batch (each case's latency_ms in the artifact is this time divided evenly)"
    )
    # The artifact keeps its per-case fields (compare and the thresholds read them): equal shares.
    # Their mean is a float sum divided by the count, within a rounding of the share, not always it.
    shares = {block["evidence"]["latency_ms"] for block in artifact["cases"]}
    evidence = artifact["metrics"]["latency.evidence_ms"]
    assert len(shares) == 1
    share = shares.pop()
    assert evidence["p90"] == share and evidence["mean"] == pytest.approx(share, rel=1e-12)


def test_a_count_of_one_is_singular_in_every_summary(
    tmp_path: Path, write_eval: Writer, capsys: pytest.CaptureFixture[str]
) -> None:
    first = next(line for line in EVAL.read_text(encoding="utf-8").splitlines()[1:] if '"ja-002"' in line)
    one = write_eval([first])
    for name, flags in (("b.json", ()), ("a.json", ("--assembly",))):
        assert run("--eval", one, "--lanes", LANES, "--out", tmp_path / name, *flags) == 0
    assert run("compare", tmp_path / "b.json", tmp_path / "a.json") == 0
    captured = capsys.readouterr()
    assert "(s)" not in captured.out + captured.err
    assert "— 1 case, mode baseline" in captured.out and " for 1 case in one batch" in captured.out
    assert "evaluate compare: 1 case in BASE" in captured.out and "over 1 case, p " in captured.out
    assert main(["evaluate", "tune", "--eval", str(one), "--lanes", str(LANES), "--out", str(tmp_path / "t.json")]) == 2
    assert "--folds 5: the eval set has only 1 case\n" in capsys.readouterr().err


def test_sweep_reports_each_run_done_and_explains_n_a(tmp_path: Path) -> None:
    from assembler.evaluate.dump import load_lanes
    from assembler.evaluate.loader import load_eval
    from assembler.evaluate.sweep import parse_budgets, run_sweep

    evalset = load_eval(str(EVAL))
    steps: list[list[Any]] = []

    def progress(label: str, total: int) -> Any:
        steps.append([label, total, 0])
        return lambda done: steps[-1].__setitem__(2, steps[-1][2] + done)

    result = run_sweep(
        evalset, load_lanes(str(LANES), evalset), parse_budgets("items=2,5"), "contract", out_dir=str(tmp_path),
        progress=progress,
    )  # fmt: skip
    assert steps == [["runs (budgets x baseline, assembly)", 4, 4]]
    assert not any("n/a" in line for line in result.summary())
    result.artifacts[("items=5", "assembly")]["metrics"]["citations.recall"] |= {"n": 0, "mean": None}
    lines = result.summary()
    assert lines[-2].startswith("items=5  assembly") and "n/a" in lines[-2]
    assert lines[-1] == "  n/a: that run has no sample of the metric (its artifact in runs/ says why)"


@pytest.mark.parametrize(
    ("command", "steps"),
    [
        (["--assembly", "--out", "a.json"], ["assembling 11 cases in one batch: ", "cases scored: "]),
        (
            ["sweep", "--budgets", "items=2,5", "--no-plot", "--out-dir", "sweep"],
            ["runs (budgets x baseline, assembly): "],
        ),
        (
            ["tune", "--lags", "none,1", "--shares", "none", "--folds", "2", "--out", "t.json"],
            ["settings scored: ", "folds: "],
        ),
    ],
    ids=["evaluate", "sweep", "tune"],
)
def test_progress_bars_show_on_a_terminal_unless_quiet(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    command: list[str],
    steps: list[str],
) -> None:
    import sys

    monkeypatch.chdir(tmp_path)
    subcommand = [] if command[0].startswith("-") else command[:1]
    argv = ["evaluate", *subcommand, "--eval", str(EVAL), "--lanes", str(LANES), *command[len(subcommand) :]]
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)
    assert main(argv) == 0
    shown = capsys.readouterr().err
    assert all(f"\r{step}  0%|" in shown for step in steps), shown  # each bar's first frame (tqdm)
    assert main([*argv, "-q"]) == 0
    assert not any(step in capsys.readouterr().err for step in steps)
    monkeypatch.setattr(sys.stderr, "isatty", lambda: False)  # not a terminal: no bar, as for assemble
    assert main(argv) == 0
    assert not any(step in capsys.readouterr().err for step in steps)
