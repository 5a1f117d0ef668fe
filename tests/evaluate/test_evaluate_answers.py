"""Answer-in-context (``--answers``): the normalization rules, the evidence text of each mode, the
sidecar file's checks, and an additive artifact block that older readers still read."""

from __future__ import annotations

import json
import re
import string
from pathlib import Path
from typing import Any

import pytest
from evalkit import Writer, association, dumps, passage, record

from assembler.cli import main
from assembler.evaluate.answers import (
    evidence_text,
    in_context,
    japanese_case,
    load_answers,
    normalize_text,
)
from assembler.evaluate.compare import compare_reports, load_report
from assembler.evaluate.loader import load_eval

ROOT = Path(__file__).resolve().parents[2]
EVAL_DATA = ROOT / "data" / "eval"
SHARED = ROOT.parent / "shared"
JSQUAD = EVAL_DATA / "jsquad"


def squad_normalize(text: str) -> str:
    """``normalize_answer`` of the official SQuAD v1.1 evaluation script, verbatim in substance."""

    def remove_articles(value: str) -> str:
        return re.sub(r"\b(a|an|the)\b", " ", value)

    def white_space_fix(value: str) -> str:
        return " ".join(value.split())

    def remove_punc(value: str) -> str:
        exclude = set(string.punctuation)
        return "".join(ch for ch in value if ch not in exclude)

    return white_space_fix(remove_articles(remove_punc(text.lower())))


# --- normalization ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "The Eiffel Tower",
        "  a  cat\tand AN apple\n",
        "Rock-'n'-roll (1955)!",
        "theatre, anthem, Thea",
        "U.S.A. $5,000 ~ 10%",
        'Beyoncé\'s "Lemonade"',
        "the",
        "",
    ],
)
def test_the_english_rule_is_the_squad_script(text: str) -> None:
    assert normalize_text(text) == squad_normalize(text)


def test_the_japanese_rule_folds_width_drops_punctuation_and_spaces_but_keeps_articles() -> None:
    assert normalize_text("「東京」は、日本の 首都です。", japanese=True) == "東京は日本の首都です"
    assert normalize_text("ＡＢＣ　１２３・The", japanese=True) == "abc123the"
    assert normalize_text("The cat", japanese=True) == "thecat"  # no article step


def test_a_case_takes_the_japanese_rule_by_its_script() -> None:
    assert japanese_case("日本で梅雨がないのは北海道とどこか。", ["小笠原諸島"])
    assert japanese_case("Who?", ["カタカナ"])
    assert not japanese_case("Which band released Counterparts?", ["Rush"])


def test_every_committed_jsquad_answer_is_found_in_its_paragraph_however_it_is_spaced(tmp_path: Path) -> None:
    """The Japanese rule on the committed JSQuAD set: every gold answer is in its own paragraph
    after normalization, also when the paragraph is written with spaces between characters and
    full-width digits and letters, which the English rule would not forgive."""
    evalset = load_eval(str(JSQUAD / "eval.jsonl"))
    answers = load_answers(str(JSQUAD / "answers.jsonl"), evalset)
    assert answers.scored == len(evalset.cases) == 100 and all(answers.japanese)
    paragraphs = {}
    for line in (JSQUAD / "citations.jsonl").read_text(encoding="utf-8").splitlines():
        value = json.loads(line)
        paragraphs[(value["source"], value["paragraph"])] = value["citation"]["text"]
    texts = []
    for case in evalset.cases:
        source = case.expected_sources[0]
        texts.append(paragraphs[(source.source, source.paragraphs[0])])
    # three answers are their article's title (JSQuAD's answer_start 0 points into "title [SEP]"),
    # which the paragraph's text does not hold
    verbatim = [int(any(a in text for a in answers.by_case[i] or ())) for i, text in enumerate(texts)]
    assert sum(verbatim) == 97
    assert in_context(answers, texts) == verbatim
    wide = str.maketrans({chr(c): chr(c + 0xFEE0) for c in range(0x21, 0x7F)})
    spaced = [" ".join(text.translate(wide)) for text in texts]
    assert in_context(answers, spaced) == verbatim
    # the served text of another case does not hold this case's answer
    assert sum(value or 0 for value in in_context(answers, texts[1:] + texts[:1])) < 10


# --- the evidence text of each mode -------------------------------------------------------------

ANSWER = "Ottawa"


def _set(write_eval: Writer, write_lanes: Writer, tmp_path: Path, answers: list[Any] | None = None) -> list[str]:
    """Two cases: q1's answer is in its third passage only; q2's in a graph fact only."""
    write_eval(
        [
            {"case_id": "q1", "query": "What is the capital?", "expected_sources": [{"source": "c.md"}]},
            {"case_id": "q2", "query": "Which city hosts it?", "expected_sources": [{"source": "f.md"}]},
        ]
    )
    filler = "x" * 400
    write_lanes(
        [
            record(
                "q1",
                [
                    passage("a.md", 0, f"First {filler}"),
                    passage("b.md", 0, f"Second {filler}"),
                    passage("c.md", 0, f"The capital is {ANSWER}."),
                ],
            ),
            record(
                "q2",
                [passage("d.md", 0, "Nothing here.")],
                graph_query=[association("The parliament", "sits in", ANSWER, ("f.md", 0))],
                citations=[
                    {
                        "source": "f.md",
                        "paragraph": 0,
                        "citation": {"text": "cited", "source": "f.md", "section": None, "locator": None},
                    }
                ],
            ),
        ]
    )
    lines = answers
    if lines is None:
        lines = [{"case_id": "q1", "answers": [ANSWER]}, {"case_id": "q2", "answers": [ANSWER.upper()]}]
    path = tmp_path / "answers.jsonl"
    text = "".join((line if isinstance(line, str) else dumps(line)) + "\n" for line in lines)
    path.write_text(text, encoding="utf-8")
    return ["--eval", str(tmp_path / "eval.jsonl"), "--lanes", str(tmp_path / "lanes.jsonl"), "--answers", str(path)]


def run(tmp_path: Path, name: str, *args: str) -> dict[str, Any]:
    out = tmp_path / name
    assert main(["evaluate", *args, "--out", str(out)]) == 0
    artifact: dict[str, Any] = json.loads(out.read_text(encoding="utf-8"))
    return artifact


def scores(artifact: dict[str, Any]) -> dict[str, Any]:
    return {block["case_id"]: block.get("answer_in_context") for block in artifact["cases"]}


def test_the_baseline_serves_only_the_passages_its_budget_keeps(
    write_eval: Writer, write_lanes: Writer, tmp_path: Path
) -> None:
    args = _set(write_eval, write_lanes, tmp_path)
    assert scores(run(tmp_path, "all.json", *args)) == {"q1": 1, "q2": 0}
    assert scores(run(tmp_path, "two.json", *args, "--max-items", "2")) == {"q1": 0, "q2": 0}


def test_assembly_serves_a_facts_subject_label_and_object(
    write_eval: Writer, write_lanes: Writer, tmp_path: Path
) -> None:
    args = _set(write_eval, write_lanes, tmp_path)
    artifact = run(tmp_path, "a.json", *args, "--assembly")
    assert scores(artifact) == {"q1": 1, "q2": 1}
    block = artifact["answers"]
    assert block["metrics"]["answers.in_context"]["n"] == 2 and block["metrics"]["answers.in_context"]["mean"] == 1.0
    assert block["cases"] == 2 and block["cases_without_answers"] == 0 and block["unknown_case_ids"] == 0
    assert block["definitions"]["answers.in_context"]["statistic"] == "distribution"


def test_the_block_comes_after_metrics_and_without_answers_nothing_changes(
    write_eval: Writer, write_lanes: Writer, tmp_path: Path
) -> None:
    args = _set(write_eval, write_lanes, tmp_path)
    with_answers = run(tmp_path, "a.json", *args)
    without = run(tmp_path, "b.json", *args[:4])
    assert list(with_answers) == [*without, "answers"]
    assert "answers" not in without and all("answer_in_context" not in block for block in without["cases"])
    for first, second in zip(with_answers["cases"], without["cases"], strict=True):
        assert {k: v for k, v in first.items() if k != "answer_in_context"} == second
    assert with_answers["metrics"] == without["metrics"]


def test_unknown_case_ids_are_counted_and_missing_cases_are_not_scored(
    write_eval: Writer, write_lanes: Writer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lines = [{"case_id": "q1", "answers": [ANSWER]}, {"case_id": "elsewhere", "answers": ["x"]}]
    artifact = run(tmp_path, "a.json", *_set(write_eval, write_lanes, tmp_path, lines))
    assert scores(artifact) == {"q1": 1, "q2": None}
    block = artifact["answers"]
    assert (block["cases"], block["cases_without_answers"], block["unknown_case_ids"]) == (1, 1, 1)
    err = capsys.readouterr().err
    assert "ignored 1 line of" in err and "naming a case_id the eval file does not have" in err
    assert "no line in" in err and "for 1 case: answer-in-context is scored over 1 case" in err
    assert any(warning.startswith("no line in") for warning in artifact["warnings"])


def test_answers_and_evidence_never_reach_the_messages(
    write_eval: Writer, write_lanes: Writer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run(tmp_path, "a.json", *_set(write_eval, write_lanes, tmp_path), "--assembly")
    captured = capsys.readouterr()
    for secret in (ANSWER, ANSWER.upper(), "capital is", "parliament"):
        assert secret not in captured.out and secret not in captured.err


BAD = [
    ('{"case_id": "q1", "answers": ["Ottawa"]', "line 1: invalid JSON at column 40: Expecting ',' delimiter"),
    ('["q1", "Ottawa"]', "line 1: must be an object"),
    ('{"case_id": "q1", "answers": ["Ottawa"], "extra": 1}', "line 1: unknown field 'extra'"),
    ('{"answers": ["Ottawa"]}', "line 1: field case_id: must be a non-blank string"),
    ('{"case_id": "q1", "answers": "Ottawa"}', "line 1: case 'q1': field answers: must be a non-empty array"),
    ('{"case_id": "q1", "answers": []}', "line 1: case 'q1': field answers: must be a non-empty array"),
    ('{"case_id": "q1", "answers": ["Ottawa", " "]}', "line 1: case 'q1': field answers[1]: must be a non-blank"),
    ('{"case_id": "q1", "answers": ["Ottawa", 1]}', "line 1: case 'q1': field answers[1]: must be a non-blank"),
    ('{"case_id": "q1", "answers": ["Ottawa"], "case_id": "q2"}', "line 1: field case_id: "),
    ('{"case_id": "q1", "answers": ["Ottawa", "The !"]}', "case 'q1': field answers[1]: must not be empty after"),
    ('{"case_id": "q1", "answers": [1e999]}', "line 1: field answers[0]: number out of range"),
    ('{"case_id": "q1", "answers": ["\\ud800"]}', "line 1: field answers[0]: is not valid Unicode"),
    ('{"case_id": "q1", "answers": ["Ottawa"], "x": 1, "x": 2}', "line 1: field x: duplicate field"),
    ('{"case_id": "nope", "answers": ["Ottawa"]}', "no line names a case of the eval file"),
]


@pytest.mark.parametrize(("line", "message"), BAD)
def test_a_bad_answers_file_exits_2_naming_file_line_and_field(
    write_eval: Writer,
    write_lanes: Writer,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    line: str,
    message: str,
) -> None:
    args = _set(write_eval, write_lanes, tmp_path, [line])
    out = tmp_path / "run.json"
    assert main(["evaluate", *args, "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("assembler: error: ") and str(tmp_path / "answers.jsonl") in err and message in err
    assert "Ottawa" not in err and "Traceback" not in err
    assert not out.exists()


def test_a_duplicate_case_id_is_refused_with_both_lines(
    write_eval: Writer, write_lanes: Writer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lines = [{"case_id": "q1", "answers": ["a"]}, "", {"case_id": "q1", "answers": ["b"]}]
    assert main(["evaluate", *_set(write_eval, write_lanes, tmp_path, lines), "--out", str(tmp_path / "r.json")]) == 2
    assert "line 3: case 'q1': duplicate case_id (first on line 1)" in capsys.readouterr().err


def test_a_control_character_in_a_case_id_is_escaped(
    write_eval: Writer, write_lanes: Writer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lines = ['{"case_id": "q\\u001b[2J", "answers": []}']
    assert main(["evaluate", *_set(write_eval, write_lanes, tmp_path, lines), "--out", str(tmp_path / "r.json")]) == 2
    err = capsys.readouterr().err
    assert "\x1b" not in err and "q\\x1b[2J" in err


def test_the_answers_file_may_not_be_the_output(write_eval: Writer, write_lanes: Writer, tmp_path: Path) -> None:
    args = _set(write_eval, write_lanes, tmp_path)
    before = (tmp_path / "answers.jsonl").read_bytes()
    assert main(["evaluate", *args, "--out", str(tmp_path / "answers.jsonl")]) == 2
    assert (tmp_path / "answers.jsonl").read_bytes() == before


# --- older readers --------------------------------------------------------------------------------


def test_compare_and_the_threshold_gate_read_an_artifact_with_the_block(
    write_eval: Writer, write_lanes: Writer, tmp_path: Path
) -> None:
    """The additive block changes nothing a reader of the 31 metrics sees: compare's aggregate
    and classification of those metrics, and the threshold gate, are those of the artifact
    without it."""
    args = _set(write_eval, write_lanes, tmp_path)
    thresholds = tmp_path / "t.json"
    thresholds.write_text(
        dumps({"taguru_evaluate_thresholds": 1, "aggregate": {"recall.recall_at_k": {"min": 0.5}},
               "cases": {"default": {"recall.mrr": {"min": 0.2}}}}),
        encoding="utf-8",
    )  # fmt: skip
    gated = ["--thresholds", str(thresholds)]
    new = tmp_path / "new.json"
    old = tmp_path / "old.json"
    assert main(["evaluate", *args, "--assembly", *gated, "--out", str(new)]) == 0
    assert main(["evaluate", *args[:4], "--assembly", *gated, "--out", str(old)]) == 0
    new_artifact, old_artifact = (json.loads(p.read_text(encoding="utf-8")) for p in (new, old))
    assert new_artifact["thresholds"] == old_artifact["thresholds"]
    base = load_report(str(tmp_path / "old.json"), "BASE")
    head = load_report(str(new), "HEAD")
    comparison = compare_reports(base, head)
    assert comparison.counts["unchanged"] == 2 and comparison.counts["regressed"] == 0
    changed = {e["metric"] for e in comparison.aggregate if e["delta"] not in (None, 0.0)}
    assert {metric for metric in changed if not metric.startswith("latency.")} == set()
    assert main(["evaluate", "compare", str(old), str(new), "--out", str(tmp_path / "c.jsonl")]) == 0


# --- the committed sets ---------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["hotpotqa", "jsquad", "locomo"])
def test_every_committed_answers_file_loads_against_its_eval_file(name: str) -> None:
    evalset = load_eval(str(EVAL_DATA / name / "eval.jsonl"))
    answers = load_answers(str(EVAL_DATA / name / "answers.jsonl"), evalset)
    assert answers.unknown == 0 and answers.scored >= 0.9 * len(evalset.cases)
    assert all(not japanese for japanese in answers.japanese) == (name != "jsquad")


@pytest.mark.skipif(not (SHARED / "eval-data").is_dir(), reason="../shared/eval-data is not present")
@pytest.mark.parametrize("name", ["hotpotqa", "jsquad", "locomo"])
def test_the_converter_writes_the_committed_answers_file(name: str, tmp_path: Path) -> None:
    from assembler.retrieval import datasets

    paths = datasets.write_outputs(datasets.convert(name, SHARED), tmp_path)
    assert paths["answers.jsonl"].read_bytes() == (EVAL_DATA / name / "answers.jsonl").read_bytes()
    assert (tmp_path / "SOURCE.md").read_text(encoding="utf-8") == (EVAL_DATA / name / "SOURCE.md").read_text(
        encoding="utf-8"
    )


def test_hotpotqa_answers_leave_out_yes_and_no() -> None:
    lines = [json.loads(line) for line in (EVAL_DATA / "hotpotqa" / "answers.jsonl").read_text().splitlines()]
    assert all(a.lower() not in ("yes", "no") for line in lines for a in line["answers"])


def test_the_evidence_text_joins_items_with_a_newline() -> None:
    assert evidence_text(["a", "b c"]) == "a\nb c"


def test_sweep_reports_answer_in_context_for_both_modes_at_every_budget(
    write_eval: Writer, write_lanes: Writer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = _set(write_eval, write_lanes, tmp_path)
    out = tmp_path / "sweep"
    assert main(["evaluate", "sweep", *args, "--budgets", "items=2,40", "--no-plot", "--out-dir", str(out)]) == 0
    table = json.loads((out / "sweep.json").read_text(encoding="utf-8"))
    rows = {(r["budget"], r["mode"]): r["value"] for r in table["rows"] if r["metric"] == "answers.in_context"}
    assert rows == {
        ("items=2", "baseline"): 0.0,
        ("items=2", "assembly"): 0.5,
        ("items=40", "baseline"): 0.5,
        ("items=40", "assembly"): 1.0,
    }
    assert "answers.in_context" in (out / "sweep.csv").read_text(encoding="utf-8")
    assert "answer" in capsys.readouterr().out.splitlines()[0]


def test_a_missing_or_non_utf8_answers_file_exits_2(
    write_eval: Writer, write_lanes: Writer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = _set(write_eval, write_lanes, tmp_path)
    missing = [*args[:-1], str(tmp_path / "nope.jsonl")]
    assert main(["evaluate", *missing, "--out", str(tmp_path / "r.json")]) == 2
    assert "cannot read" in capsys.readouterr().err
    (tmp_path / "answers.jsonl").write_bytes(b'{"case_id": "q1", "answers": ["a"]}\n{"case_id": "\xff"}\n')
    assert main(["evaluate", *args, "--out", str(tmp_path / "r.json")]) == 2
    assert "answers.jsonl: line 2: not valid UTF-8" in capsys.readouterr().err
    assert not (tmp_path / "r.json").exists()
