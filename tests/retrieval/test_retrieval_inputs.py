"""``lanes build``'s inputs through the strict JSON reader, and the round trip: whatever ``lanes
build`` writes, ``assemble`` and ``evaluate`` read."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from assembler.cli import main
from assembler.contract.text import is_blank

pytest.importorskip("bm25s")

HEADER = '{"taguru_eval":1}'
CORPUS_LINE = '{"source":"a.md","paragraph":0,"text":"Alpha beta gamma","title":"Alpha"}'
CASE_LINE = '{"case_id":"q1","query":"beta gamma","cues":["Alpha"]}'
GOOD = {
    "corpus": [CORPUS_LINE],
    "eval": [HEADER, CASE_LINE],
    "triples": ['{"subject":"Alpha","label":"is","object":"beta","source":"a.md","paragraph":0}'],
    "summaries": ['{"community":"c1","text":"Alpha and beta","members":[{"name":"Alpha","strength":1}]}'],
    "contexts": ['{"case_id":"q1","context":"corpus"}'],
}
# The field each input's hostile line puts the hostile value under, and a valid line to carry it.
CARRIER = {
    "corpus": ('{"source":"a.md","paragraph":1,"text":%s}', "text"),
    "eval": ('{"case_id":"q2","query":%s}', "query"),
    "triples": ('{"subject":"Alpha","label":"is","object":%s}', "object"),
    "summaries": ('{"community":"c2","text":%s}', "text"),
    "contexts": ('{"case_id":"q1","context":%s}', "context"),
}
HOSTILE = {
    "nested 100,000 deep": ("[" * 100_000 + "]" * 100_000, "nesting deeper than 128 levels"),
    "a 5,000-digit integer": ("9" * 5000, "integer with more than 4300 digits"),
    "NaN": ("NaN", "must be a finite number (NaN is not a JSON number)"),
    "1e400": ("1e400", "number out of range (beyond what an f64 holds)"),
    "a lone surrogate": ('"\\ud800"', "is not valid Unicode (lone surrogate escape)"),
}


def build(tmp_path: Path, files: dict[str, list[str | bytes]]) -> tuple[int, Path]:
    """Run ``lanes build`` (BM25 only) on the given inputs (the good ones for the rest)."""
    args = ["lanes", "build", "-o", str(tmp_path / "lanes.jsonl"), "--no-dense", "--no-cache", "-q"]
    for name in GOOD:
        lines = files.get(name, GOOD[name])
        path = tmp_path / f"{name}.jsonl"
        path.write_bytes(
            b"".join((line if isinstance(line, bytes) else line.encode("utf-8")) + b"\n" for line in lines)
        )
        args += [f"--{name}", str(path)]
    return main(args), tmp_path / "lanes.jsonl"


def one_error_line(err: str) -> str:
    assert err.count("\n") == 1 and err.startswith("assembler: error: "), err
    assert "Traceback" not in err
    return err.removeprefix("assembler: error: ").rstrip("\n")


@pytest.mark.parametrize("kind", sorted(HOSTILE))
@pytest.mark.parametrize("name", sorted(CARRIER))
def test_every_input_refuses_hostile_json_with_file_line_field_and_rule(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str, kind: str
) -> None:
    """Deep nesting and a 5,000-digit integer were a RecursionError / ValueError traceback; NaN,
    1e400 and a lone surrogate were accepted (and a lone surrogate written into the lane dump)."""
    template, field = CARRIER[name]
    value, rule = HOSTILE[kind]
    lines = [*GOOD[name], template % value]
    status, out = build(tmp_path, {name: lines})
    message = one_error_line(capsys.readouterr().err)
    assert status == 2
    where = f"{tmp_path / name}.jsonl:{len(lines)}: "
    expected_field = "" if kind == "nested 100,000 deep" else f"{field}: "  # depth is the line's own
    assert message == f"{where}{expected_field}{rule}"
    assert not out.exists()


@pytest.mark.parametrize("name", sorted(CARRIER))
def test_a_repeated_key_is_refused_in_every_input(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str
) -> None:
    """A repeated key was accepted (the last value kept): ``evaluate`` refuses it in the eval file,
    so ``lanes build`` read cases ``evaluate`` would not."""
    template, field = CARRIER[name]
    line = template % '"x"'
    repeated = line[:-1] + f',"{field}":"y"}}'
    status, out = build(tmp_path, {name: [*GOOD[name], repeated]})
    message = one_error_line(capsys.readouterr().err)
    assert status == 2 and not out.exists()
    assert message == f"{tmp_path / name}.jsonl:{len(GOOD[name]) + 1}: {field}: duplicate field"


@pytest.mark.parametrize(
    ("name", "line", "rule"),
    [
        ("corpus", b'{"source":"a.md","paragraph":1,"text":"\xff"}', "invalid UTF-8 at byte 39 of the line"),
        ("corpus", '{"source":"a.md","paragraph":1,"text":"x"', "invalid JSON at column 42: Expecting ',' delimiter"),
        ("corpus", "[]", "must be a JSON object, got an array"),
        ("corpus", '{"source":"a.md","paragraph":1,"text":"x","\\u001b[2J":1}', "\\x1b[2J: unknown key"),
        ("corpus", '{"source":"a.md","paragraph":1,"text":"x","\\udc00":1}', "the key is not valid Unicode"),
        ("triples", '{"subject":"a","label":"b","object":"c","weight":' + "1" + "0" * 400 + "}", "weight: number out"),
        ("triples", '{"subject":"a","label":"b","object":"c","weight":1e301}', "weight: must be at most 1e300"),
        ("summaries", '{"community":"c","text":"t","members":[{"name":"m","strength":1e400}]}', "members[0].strength"),
        ("eval", '{"case_id":"q2","query":"x","cues":' + json.dumps(["c"] * 1001) + "}", "cues: carries 1001 items"),
        ("eval", '{"case_id":"q1","query":"again"}', "case_id: duplicate case_id 'q1'"),
    ],
)
def test_bad_lines_name_file_line_and_rule(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str, line: str | bytes, rule: str
) -> None:
    status, out = build(tmp_path, {name: [*GOOD[name], line]})
    message = one_error_line(capsys.readouterr().err)
    assert status == 2 and not out.exists()
    assert message.startswith(f"{tmp_path / name}.jsonl:{len(GOOD[name]) + 1}: ")
    assert rule in message


def test_a_header_that_is_true_instead_of_1_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    status, _ = build(tmp_path, {"eval": ['{"taguru_eval":true}', CASE_LINE]})
    assert status == 2
    assert one_error_line(capsys.readouterr().err).endswith(
        "eval.jsonl:1: taguru_eval: must be 1 (the first line is the taguru_eval: 1 header)"
    )


def test_a_context_flag_that_is_not_unicode_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A command-line argument that is not UTF-8 arrives as surrogates: it was written into the
    lane dump's ``context``, which ``assemble`` refuses (or failed to encode)."""
    corpus, evalfile = tmp_path / "c.jsonl", tmp_path / "e.jsonl"
    corpus.write_text(CORPUS_LINE + "\n", encoding="utf-8")
    evalfile.write_text(f"{HEADER}\n{CASE_LINE}\n", encoding="utf-8")
    out = tmp_path / "lanes.jsonl"
    args = ["lanes", "build", "--corpus", str(corpus), "--eval", str(evalfile), "-o", str(out), "--no-dense", "-q"]
    assert main([*args, "--no-cache", "--context", "ctx\udcff"]) == 2
    assert (
        one_error_line(capsys.readouterr().err) == "context (--context): is not valid Unicode (lone surrogate escape)"
    )
    assert not out.exists()


def test_a_line_separator_inside_a_string_does_not_split_the_line(tmp_path: Path) -> None:
    """Lines were split by ``str.splitlines``, which also breaks at U+2028 and U+0085 (legal raw
    inside a JSON string): such a paragraph was read as two broken lines."""
    text = "Alpha\u2028beta\x85gamma"
    status, out = build(
        tmp_path, {"corpus": [json.dumps({"source": "a.md", "paragraph": 0, "text": text}, ensure_ascii=False)]}
    )
    assert status == 0
    [record] = [json.loads(line) for line in out.read_text(encoding="utf-8").split("\n") if line]
    assert record["lanes"]["passages"][0]["text"] == text


# --- the round trip ------------------------------------------------------------------------------

# Any Unicode text but surrogates (which JSON from UTF-8 cannot carry unescaped): controls, line
# separators, combining marks, astral characters.
TEXT = st.text(st.characters(exclude_categories=["Cs"]), max_size=12)
NONBLANK = TEXT.filter(lambda text: not is_blank(text))
WEIGHT = st.one_of(st.floats(-1e300, 1e300, allow_nan=False), st.integers(-(10**300), 10**300))


@st.composite
def retrieval_inputs(draw: st.DrawFn) -> dict[str, list[str]]:
    sources = draw(st.lists(NONBLANK, min_size=1, max_size=3, unique=True))
    corpus = [
        {"source": source, "paragraph": number, "text": draw(TEXT), "title": draw(st.none() | NONBLANK)}
        for source in sources
        for number in range(draw(st.integers(1, 2)))
    ]
    case_ids = draw(st.lists(NONBLANK, min_size=1, max_size=3, unique=True))
    cases = [
        {"case_id": case_id, "query": draw(NONBLANK), "cues": draw(st.lists(TEXT, max_size=2))} for case_id in case_ids
    ]
    triples = [
        {
            "subject": draw(NONBLANK),
            "label": draw(NONBLANK),
            "object": draw(NONBLANK),
            "weight": draw(WEIGHT),
            "source": paragraph["source"],
            "paragraph": paragraph["paragraph"],
        }
        for paragraph in draw(st.lists(st.sampled_from(corpus), max_size=4))
    ]
    summaries = [
        {"community": name, "text": draw(NONBLANK), "members": [{"name": draw(TEXT), "strength": draw(WEIGHT)}]}
        for name in draw(st.lists(NONBLANK, max_size=2, unique=True))
    ]

    def dumps(values: list[dict[str, Any]]) -> list[str]:
        return [json.dumps(value, ensure_ascii=draw(st.booleans())) for value in values]

    return {
        "corpus": dumps(corpus),
        "eval": [HEADER, *dumps(cases)],
        "triples": dumps(triples),
        "summaries": dumps(summaries),
        "contexts": [],
    }


@settings(
    max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow]
)
@given(inputs=retrieval_inputs())
def test_whatever_lanes_build_writes_assemble_and_evaluate_read(
    tmp_path_factory: pytest.TempPathFactory, capsys: pytest.CaptureFixture[str], inputs: dict[str, list[str]]
) -> None:
    """Every lane dump ``lanes build`` writes from inputs it accepts is read whole by ``assemble``
    (one package per case, nothing rejected) and by ``evaluate``, whose artifact ``evaluate
    compare`` reads: what one command writes, the others read."""
    tmp_path = tmp_path_factory.mktemp("roundtrip")
    status, lanes = build(
        tmp_path, {name: lines for name, lines in inputs.items() if name != "contexts"} | {"contexts": []}
    )
    assert status == 0, capsys.readouterr().err
    cases = len(inputs["eval"]) - 1
    packages = tmp_path / "packages.jsonl"
    assert main(["assemble", str(lanes), "-o", str(packages), "-q"]) == 0, capsys.readouterr().err
    assert packages.read_bytes().count(b"\n") == cases  # (a raw U+0085 in an id is no line break)
    artifact = tmp_path / "evaluation.json"
    evaluate = ["evaluate", "--eval", str(tmp_path / "eval.jsonl"), "--lanes", str(lanes), "--out", str(artifact)]
    assert main([*evaluate, "--assembly"]) == 0, capsys.readouterr().err
    compare = ["evaluate", "compare", str(artifact), str(artifact), "--out", str(tmp_path / "changes.jsonl")]
    assert main(compare) == 0, capsys.readouterr().err
    capsys.readouterr()
