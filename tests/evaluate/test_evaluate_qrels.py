"""``--qrels FILE --queries FILE`` in place of ``--eval``: TREC and BEIR qrels, BEIR and TSV queries,
the mapping onto eval cases, the artifact (the same as from the equivalent eval file, plus the
``qrels`` block), and every refusal as one located line with exit status 2."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pytest
from evalkit import dumps, passage, record

from assembler.cli import main
from assembler.errors import AssemblerError
from assembler.evaluate.errors import EvaluateError
from assembler.evaluate.loader import ExpectedSource
from assembler.evaluate.qrels import load_qrels, load_qrels_set, parse_qrels, qrels_block, standard_scores

ROOT = Path(__file__).resolve().parents[2]
HOTPOT = ROOT / "data" / "eval" / "hotpotqa"


def write(path: Path, text: str, *, gz: bool = False) -> Path:
    data = text.encode("utf-8")
    path.write_bytes(gzip.compress(data) if gz else data)
    return path


def beir_qrels(rows: list[tuple[str, str, int]]) -> str:
    return "query-id\tcorpus-id\tscore\n" + "".join(f"{q}\t{d}\t{r}\n" for q, d, r in rows)


def beir_queries(texts: dict[str, str]) -> str:
    return "".join(json.dumps({"_id": q, "text": t, "metadata": {}}) + "\n" for q, t in texts.items())


# --- qrels files ---------------------------------------------------------------------------------


def test_trec_qrels_ignore_the_iteration_and_keep_every_grade_in_file_order() -> None:
    qrels = parse_qrels("q1 0 d1 2\nq1\tQ0\td2   -1\n\nq2 7 d9 0\r\nq1 0 d3 1\n", "run.qrels")
    assert qrels.format == "trec"
    assert qrels.judgments == {"q1": {"d1": 2, "d2": -1, "d3": 1}, "q2": {"d9": 0}}
    assert list(qrels.judgments["q1"]) == ["d1", "d2", "d3"]
    assert qrels.lines == {"q1": 1, "q2": 4}


def test_beir_qrels_need_their_header_and_keep_spaces_in_ids() -> None:
    qrels = parse_qrels(beir_qrels([("q 1", "Nobody's Hero", 1), ("q 1", "Neil Peart", 2)]), "test.tsv")
    assert qrels.format == "beir"
    assert qrels.judgments == {"q 1": {"Nobody's Hero": 1, "Neil Peart": 2}}
    assert qrels.lines == {"q 1": 2}


def test_gzip_is_detected_by_content_not_by_name(tmp_path: Path) -> None:
    packed = write(tmp_path / "qrels.txt", "q1 0 d1 1\n", gz=True)
    plain = write(tmp_path / "qrels.gz", "q1 0 d1 1\n")
    assert load_qrels(str(packed)).judgments == load_qrels(str(plain)).judgments == {"q1": {"d1": 1}}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "empty file: expected TREC qrels"),
        ("q1 d1 1\n", "line 1: not a qrels line: expected TREC 'qid iter docid rel'"),
        ("q1\td1\t1\n", "line 1: a tab-separated qrels file must start with the BEIR header"),
        ("query-id\tcorpus-id\tscore\n", "no judgments: expected at least one line after the header"),
        ("query-id\tcorpus-id\tscore\nq1\td1\n", "line 2: expected 3 tab-separated fields"),
        ("query-id\tcorpus-id\tscore\nq1\t\t1\n", "line 2: corpus-id must not be empty"),
        ("q1 0 d1 1\nq1 0 d2\n", "line 2: expected 4 fields (qid iter docid rel), got 3"),
        ("q1 0 d1 1.5\n", "line 1: rel must be an integer, got '1.5'"),
        ("query-id\tcorpus-id\tscore\nq1\td1\thigh\n", "line 2: score must be an integer, got 'high'"),
        ("q1 0 d1 1\n\nq1 0 d1 0\n", "line 3: query 'q1' judges document 'd1' a second time (first at line 1)"),
        ("q\x1b[2J 0 d1 1\nq\x1b[2J 0 d1 1\n", "query 'q\\x1b[2J' judges"),
    ],
)
def test_bad_qrels_are_refused_with_file_and_line(text: str, message: str) -> None:
    with pytest.raises(EvaluateError) as caught:
        parse_qrels(text, "qrels.txt")
    assert caught.value.lines[0].startswith("qrels.txt: ")
    assert message in caught.value.lines[0]


def test_unreadable_qrels_name_the_file(tmp_path: Path) -> None:
    broken = tmp_path / "broken.gz"
    broken.write_bytes(gzip.compress(b"q1 0 d1 1\n")[:-6])
    with pytest.raises(EvaluateError, match=r"broken\.gz: not a valid gzip file"):
        load_qrels(str(broken))
    latin = write(tmp_path / "latin.txt", "q1 0 d1 1\n")
    latin.write_bytes(b"q1 0 d1 1\nq2 0 caf\xe9 1\n")
    with pytest.raises(EvaluateError, match=r"latin\.txt: line 2: not valid UTF-8"):
        load_qrels(str(latin))
    with pytest.raises(EvaluateError, match=r"cannot read .*missing\.txt"):
        load_qrels(str(tmp_path / "missing.txt"))


# --- queries and the cases ------------------------------------------------------------------------


def test_cases_map_judgments_to_expected_sources(tmp_path: Path) -> None:
    qrels = write(tmp_path / "q.txt", "b 0 d1 3\nb 0 d2 0\nb 0 d3 -2\na 0 d4 1\nb 0 d5 4\n")
    queries = write(tmp_path / "queries.jsonl", beir_queries({"a": "first?", "b": "second?"}))
    qset = load_qrels_set(str(qrels), str(queries))
    assert [case.case_id for case in qset.cases] == ["b", "a"]  # first appearance in the qrels
    b = qset.cases[0]
    assert (b.query, b.line, b.limit) == ("second?", 1, 10)
    # grade >= 1: an expected source of any paragraph, the grade as gain (not capped at 3); <= 0: dropped
    assert b.expected_sources == (ExpectedSource("d1", (), 3), ExpectedSource("d5", (), 4))
    assert qset.format == "trec" and qset.warnings == ()
    assert qset.judgments["b"] == {"d1": 3, "d2": 0, "d3": -2, "d5": 4}
    assert load_qrels_set(str(qrels), str(queries), limit=3).cases[0].limit == 3


def test_queries_as_tsv_with_integer_ids_and_gzip(tmp_path: Path) -> None:
    qrels = write(tmp_path / "q.tsv", beir_qrels([("1", "d", 1), ("2", "e", 1)]))
    tsv = write(tmp_path / "queries.tsv", "1\twhat\tis it?\n2\tother\n", gz=True)
    assert [c.query for c in load_qrels_set(str(qrels), str(tsv)).cases] == ["what\tis it?", "other"]
    jsonl = write(tmp_path / "queries.jsonl", '{"_id": 1, "text": "what"}\n{"_id": "2", "text": "other"}\n')
    assert [c.case_id for c in load_qrels_set(str(qrels), str(jsonl)).cases] == ["1", "2"]


def test_queries_on_one_side_only_are_left_out_with_a_warning(tmp_path: Path) -> None:
    qrels = write(tmp_path / "q.txt", "".join(f"j{i} 0 d 1\n" for i in range(6)) + "z 0 d 0\n")
    texts = {"j0": "x", "j1": "y", "z": "none relevant", "other": "unjudged", "more": "unjudged"}
    queries = write(tmp_path / "queries.jsonl", beir_queries(texts))
    qset = load_qrels_set(str(qrels), str(queries))
    assert [case.case_id for case in qset.cases] == ["j0", "j1", "z"]
    assert qset.cases[2].expected_sources == ()
    assert qset.warnings == (
        f"left out 4 judged query ids of {qrels} without a text in {queries} ('j2', 'j3', 'j4' and 1 more)",
        f"left out 2 query ids of {queries} without a judgment in {qrels}",
        "no document judged relevant (relevance >= 1) for 1 case: no recall block; the qrels block scores 0 there, "
        "as trec_eval does ('z')",
    )


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", ": no queries: expected BEIR queries"),
        ('{"_id": "q1", "text": "x"}\n[1]\n', ":2: must be a JSON object"),
        ('{"_id": "q1", "text": "x"\n', ":1: invalid JSON at column 26: Expecting ',' delimiter"),
        ('{"text": "x"}\n', ":1: field _id: must be a non-blank string or an integer"),
        ('{"_id": true, "text": "x"}\n', ":1: field _id: must be a non-blank string or an integer"),
        ('{"_id": "q1"}\n', ":1: query_id 'q1' field text: must be a non-blank string"),
        ('{"_id": "q1", "text": "  "}\n', ":1: query_id 'q1' field text: must be a non-blank string"),
        ('{"_id": "q1", "_id": "q2", "text": "x"}\n', ":1: field _id: duplicate field"),
        ('{"_id": "q1", "text": NaN}\n', ":1: field text: must be a finite number (NaN is not a JSON number)"),
        ('{"_id": "q1", "text": "x", "metadata": {"a": 1, "a": 2}}\n', ":1: field metadata.a: duplicate field"),
        (
            '{"_id": "q1", "text": "x"}\n{"_id": "q1", "text": "y"}\n',
            ":2: query_id 'q1' field _id: repeated query id (first at line 1)",
        ),
        ("q1 what\n", ":1: must be qid<TAB>text (no tab in the line)"),
        ("\tx\n", ":1: field qid: must not be blank"),
    ],
)
def test_bad_queries_are_refused_with_file_and_line(tmp_path: Path, text: str, message: str) -> None:
    """The queries file is read by the shared reader of lanes from-runs (run/queries.py): its
    messages, each naming the file and line."""
    qrels = write(tmp_path / "q.txt", "q1 0 d 1\n")
    queries = write(tmp_path / "queries.txt", text)
    with pytest.raises(AssemblerError) as caught:
        load_qrels_set(str(qrels), str(queries))
    assert str(caught.value).startswith(f"{queries}{message}")


def test_no_common_query_is_an_error(tmp_path: Path) -> None:
    qrels = write(tmp_path / "q.txt", "q1 0 d 1\n")
    queries = write(tmp_path / "queries.tsv", "q2\ttext\n")
    with pytest.raises(EvaluateError, match="no judged query has a text in"):
        load_qrels_set(str(qrels), str(queries))
    with pytest.raises(EvaluateError, match=r"limit must be 1\.\.=1000, got 1001"):
        load_qrels_set(str(qrels), str(queries), limit=1001)


# --- standard scores ------------------------------------------------------------------------------


def test_standard_scores_count_a_repeated_document_once_at_its_first_position() -> None:
    judged = {"a": 1, "b": 2}
    repeated = standard_scores([["a", "a", "x", "b"]], [judged], [3])
    plain = standard_scores([["a", "x", "b"]], [judged], [3])
    for key in ("recall", "mrr", "ndcg"):
        assert repeated[key].tolist() == plain[key].tolist()
    assert plain["recall"].tolist() == [1.0]


def test_standard_scores_of_a_query_without_relevant_documents_or_hits_are_zero() -> None:
    scores = standard_scores([[], ["a"], ["b", "a"]], [{"a": 1}, {"a": 0}, {"a": 1, "c": 1}], [10, 10, 1])
    assert scores["recall"].tolist() == [0.0, 0.0, 0.0]
    assert scores["mrr"].tolist() == [0.0, 0.0, 0.0]
    assert scores["ndcg"].tolist() == [0.0, 0.0, 0.0]


# --- the command ----------------------------------------------------------------------------------


def run(*args: str | Path) -> int:
    return main(["evaluate", *map(str, args)])


def graded_hotpot(tmp_path: Path) -> tuple[Path, Path, Path]:
    """BEIR qrels and queries of the committed HotpotQA set, with grades 1..3 and a judged
    non-relevant retrieved document per case, and the eval file that says the same."""
    lines = (HOTPOT / "eval.jsonl").read_text(encoding="utf-8").splitlines()[1:]
    lanes = [json.loads(line) for line in (HOTPOT / "lanes.jsonl").read_text(encoding="utf-8").splitlines()]
    last_hit = {item["query_id"]: item["lanes"]["passages"][-1]["source"] for item in lanes}
    rows: list[tuple[str, str, int]] = []
    texts: dict[str, str] = {}
    cases: list[dict[str, Any]] = []
    for i, line in enumerate(lines):
        case = json.loads(line)
        qid = case["case_id"]
        texts[qid] = case["query"]
        expected = []
        for j, entry in enumerate(case["expected_sources"]):
            grade = 1 + (i + j) % 3
            rows.append((qid, entry["source"], grade))
            expected.append({"source": entry["source"], "relevance": grade})
        if last_hit[qid] not in {doc for judged, doc, _ in rows if judged == qid}:
            rows.append((qid, last_hit[qid], 0))
        cases.append({"case_id": qid, "query": case["query"], "expected_sources": expected})
    qrels = write(tmp_path / "test.tsv", beir_qrels(rows))
    queries = write(tmp_path / "queries.jsonl", beir_queries(texts))
    eval_path = write(tmp_path / "eval.jsonl", "\n".join([dumps({"taguru_eval": 1}), *map(dumps, cases)]) + "\n")
    return qrels, queries, eval_path


def untimed(value: Any) -> Any:
    """``value`` without its wall times (``latency_ms`` keys, ``latency.*`` metrics)."""
    if isinstance(value, dict):
        return {k: untimed(v) for k, v in value.items() if k != "latency_ms" and not k.startswith("latency.")}
    return [untimed(item) for item in value] if isinstance(value, list) else value


def comparable(artifact: dict[str, Any]) -> dict[str, Any]:
    """The artifact without what names the files and without times."""
    rest = {key: value for key, value in artifact.items() if key not in ("generated_at", "qrels")}
    rest["inputs"] = {key: value for key, value in artifact["inputs"].items() if key not in ("eval", "out")}
    return untimed(rest)  # type: ignore[no-any-return]


@pytest.mark.parametrize("flags", [(), ("--assembly", "--max-items", "4")])
def test_qrels_give_the_artifact_of_the_equivalent_eval_file(tmp_path: Path, flags: tuple[str, ...]) -> None:
    qrels, queries, eval_path = graded_hotpot(tmp_path)
    lanes = HOTPOT / "lanes.jsonl"
    assert run("--eval", eval_path, "--lanes", lanes, "--out", tmp_path / "e.json", *flags) == 0
    assert run("--qrels", qrels, "--queries", queries, "--lanes", lanes, "--out", tmp_path / "q.json", *flags) == 0
    from_eval = json.loads((tmp_path / "e.json").read_text(encoding="utf-8"))
    from_qrels = json.loads((tmp_path / "q.json").read_text(encoding="utf-8"))
    assert comparable(from_qrels) == comparable(from_eval)
    assert from_qrels["inputs"]["eval"] == {"path": str(qrels), "name": None, "cases": 100}
    assert "qrels" not in from_eval
    block = from_qrels["qrels"]
    assert list(block) == ["path", "format", "queries", "k", "definition", "metrics", "cases"]
    assert (block["path"], block["format"], block["queries"], block["k"]) == (str(qrels), "beir", str(queries), 10)
    assert list(block["metrics"]) == ["ndcg@10", "recall@10", "mrr@10"]
    assert [case["case_id"] for case in block["cases"]] == [case["case_id"] for case in from_qrels["cases"]]


def test_the_qrels_block_is_computed_from_the_case_hits(tmp_path: Path) -> None:
    qrels, queries, _ = graded_hotpot(tmp_path)
    qset = load_qrels_set(str(qrels), str(queries), limit=5)
    assert run("--qrels", qrels, "--queries", queries, "--limit", "5", "--lanes", HOTPOT / "lanes.jsonl",
               "--out", tmp_path / "q.json") == 0  # fmt: skip
    artifact = json.loads((tmp_path / "q.json").read_text(encoding="utf-8"))
    assert all(case["limit"] == 5 and len(case["passage"]["hits"]) == 5 for case in artifact["cases"])
    assert artifact["qrels"] == json.loads(json.dumps(qrels_block(qset, artifact)))
    assert artifact["qrels"]["k"] == 5


def test_sweep_and_tune_take_qrels(tmp_path: Path) -> None:
    qrels, queries, _ = graded_hotpot(tmp_path)
    lanes = HOTPOT / "lanes.jsonl"
    given = ("--qrels", qrels, "--queries", queries, "--lanes", lanes)
    assert main(["evaluate", "sweep", *map(str, given), "--budgets", "items=3", "--no-plot",
                 "--out-dir", str(tmp_path / "sweep")]) == 0  # fmt: skip
    table = json.loads((tmp_path / "sweep" / "sweep.json").read_text(encoding="utf-8"))
    assert table  # one row per budget and mode
    assert main(["evaluate", "tune", *map(str, given), "--budgets", "items=3", "--folds", "2", "--lags", "none,1",
                 "--shares", "none", "--out", str(tmp_path / "tuned.json")]) == 0  # fmt: skip
    tuned = json.loads((tmp_path / "tuned.json").read_text(encoding="utf-8"))
    assert str(qrels) in json.dumps(tuned)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (("--eval", "e.jsonl", "--qrels", "q", "--queries", "t"), "--eval and --qrels/--queries are alternatives"),
        (("--qrels", "q"), "--qrels needs --queries FILE"),
        (("--queries", "t"), "--queries needs --qrels FILE"),
        (("--lanes", "x"), "--eval FILE is required (or --qrels FILE --queries FILE)"),
        (("--qrels", "q", "--queries", "t"), "--lanes FILE is required"),
    ],
)
def test_flag_combinations_are_checked(
    argv: tuple[str, ...], message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: Any
) -> None:
    monkeypatch.chdir(tmp_path)
    assert run(*argv) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "evaluation.json").exists()


def test_limit_needs_qrels(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    eval_path = write(tmp_path / "eval.jsonl", '{"taguru_eval": 1}\n{"case_id": "q1", "query": "x"}\n')
    lanes = write(tmp_path / "lanes.jsonl", dumps(record("q1", [passage("a.md", 0)])) + "\n")
    assert run("--eval", eval_path, "--lanes", lanes, "--limit", "3", "--out", tmp_path / "r.json") == 2
    assert "--limit needs --qrels" in capsys.readouterr().err
    with pytest.raises(SystemExit) as caught:
        run("--qrels", "q", "--queries", "t", "--limit", "0")
    assert caught.value.code == 2
    with pytest.raises(SystemExit) as caught:
        run("--qrels", "q", "--queries", "t", "--limit", "1001")
    assert caught.value.code == 2
    assert "--limit: needs an integer from 1 to 1000, got 1001" in capsys.readouterr().err


def test_bad_qrels_exit_2_with_one_line_and_nothing_written(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    qrels = write(tmp_path / "q.txt", "q1 0 d1 1\nq1 0 d2 yes\n")
    queries = write(tmp_path / "t.tsv", "q1\tx\n")
    lanes = write(tmp_path / "lanes.jsonl", dumps(record("q1", [passage("d1", 0)])) + "\n")
    out = tmp_path / "r.json"
    assert run("--qrels", qrels, "--queries", queries, "--lanes", lanes, "--out", out) == 2
    err = capsys.readouterr().err
    assert err == f"assembler: error: {qrels}: line 2: rel must be an integer, got 'yes'\n"
    assert not out.exists()


def test_queries_are_read_as_lanes_from_runs_reads_them_a_qrels_file_given_as_queries_is_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """One query-file reader for every command: a qrels file given as --queries says what it is,
    and a bad line is one located line, exit 2, no artifact."""
    qrels = write(tmp_path / "q.txt", "q1 0 d1 1\n")
    lanes = write(tmp_path / "lanes.jsonl", dumps(record("q1", [passage("d1", 0)])) + "\n")
    out = tmp_path / "r.json"
    assert run("--qrels", qrels, "--queries", qrels, "--lanes", lanes, "--out", out) == 2
    assert capsys.readouterr().err == (
        f"assembler: error: {qrels} is not a query file: its first line is a TREC qrels line (qid 0 docid relevance)\n"
    )
    queries = write(tmp_path / "t.jsonl", '{"_id": "q1", "text": "x"}\n{"_id": "q1", "text": "y"}\n')
    assert run("--qrels", qrels, "--queries", queries, "--lanes", lanes, "--out", out) == 2
    err = capsys.readouterr().err
    assert err == f"assembler: error: {queries}:2: query_id 'q1' field _id: repeated query id (first at line 1)\n"
    assert not out.exists()


def test_a_case_without_a_lane_record_names_its_qrels_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    qrels = write(tmp_path / "q.txt", "q1 0 d1 1\nq2 0 d1 1\n")
    queries = write(tmp_path / "t.tsv", "q1\tx\nq2\ty\n")
    lanes = write(tmp_path / "lanes.jsonl", dumps(record("q1", [passage("d1", 0)])) + "\n")
    assert run("--qrels", qrels, "--queries", queries, "--lanes", lanes, "--out", tmp_path / "r.json") == 2
    assert f"{qrels}: line 2: case 'q2': no lane-dump record with query_id 'q2' in {lanes}" in capsys.readouterr().err


def test_warnings_reach_stderr_and_the_artifact(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    qrels = write(tmp_path / "q.txt", "q1 0 d1 1\nq9 0 d1 1\n")
    queries = write(tmp_path / "t.tsv", "q1\tx\n")
    lanes = write(tmp_path / "lanes.jsonl", dumps(record("q1", [passage("d2", 0), passage("d1", 0)])) + "\n")
    out = tmp_path / "r.json"
    assert run("--qrels", qrels, "--queries", queries, "--lanes", lanes, "--out", out) == 0
    warning = f"left out 1 judged query id of {qrels} without a text in {queries} ('q9')"
    captured = capsys.readouterr()
    assert f"assembler: evaluate: warning: {warning}" in captured.err
    assert "qrels (trec_eval definitions) over 1 case: ndcg@10 0.631, recall@10 1.000, mrr@10 0.500" in captured.out
    artifact = json.loads(out.read_text(encoding="utf-8"))
    assert artifact["warnings"] == [warning]
    assert artifact["cases"][0]["recall"]["mrr"] == artifact["qrels"]["cases"][0]["mrr@10"] == 0.5


def test_thresholds_take_qrels_case_ids(tmp_path: Path) -> None:
    qrels = write(tmp_path / "q.txt", "q1 0 d1 1\n")
    queries = write(tmp_path / "t.tsv", "q1\tx\n")
    lanes = write(tmp_path / "lanes.jsonl", dumps(record("q1", [passage("d1", 0)])) + "\n")
    gate = write(
        tmp_path / "t.json",
        json.dumps({"taguru_evaluate_thresholds": 1, "cases": {"overrides": {"q1": {"recall.mrr": {"min": 1.0}}}}}),
    )
    argv = ("--qrels", qrels, "--queries", queries, "--lanes", lanes, "--thresholds", gate)
    assert run(*argv, "--out", tmp_path / "r.json") == 0
