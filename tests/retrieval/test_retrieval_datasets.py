"""Converters: deterministic, equal to the committed files, lenient where the raw data is odd."""

from __future__ import annotations

from pathlib import Path

import pytest

from assembler.retrieval import datasets
from assembler.retrieval.datasets import split_paragraphs

ROOT = Path(__file__).resolve().parents[2]
SHARED = ROOT.parent / "shared"
needs_shared = pytest.mark.skipif(not (SHARED / "eval-data").is_dir(), reason="../shared/eval-data is not present")


def test_split_paragraphs_follows_the_blank_line_rule() -> None:
    assert split_paragraphs("a\nb\n\n \n\nc\n") == ["a\nb", "c"]
    assert split_paragraphs("\n\nonly") == ["only"]
    assert split_paragraphs("") == []


@needs_shared
@pytest.mark.parametrize("name", sorted(datasets.SETS))
def test_converter_is_deterministic_and_matches_the_committed_files(name: str, tmp_path: Path) -> None:
    outputs = []
    for run in ("a", "b"):
        converted = datasets.convert(name, SHARED)
        datasets.write_inputs(converted, tmp_path / run / "work")
        datasets.write_outputs(converted, tmp_path / run / "out")
        outputs.append(tmp_path / run)
    for sub in ("work", "out"):
        files = sorted(p.relative_to(outputs[0]) for p in (outputs[0] / sub).iterdir())
        assert files
        for file in files:
            assert (outputs[0] / file).read_bytes() == (outputs[1] / file).read_bytes(), file
    committed = ROOT / "data" / "eval" / name
    for file in ("eval.jsonl", "sources.jsonl", "citations.jsonl", "SOURCE.md"):
        made = (outputs[0] / "out" / file).read_text(encoding="utf-8")
        kept = (committed / file).read_text(encoding="utf-8")
        if file == "eval.jsonl" and (name, file) in KNOWN_DRIFT:
            made, kept = (_without_drift(text, KNOWN_DRIFT[(name, file)]) for text in (made, kept))
        if (name, file) == ("hotpotqa", "citations.jsonl"):  # sentences now joined with a space
            made, kept = ("".join(text.split()) for text in (made, kept))
        assert made == kept, f"{name}/{file} is stale"


KNOWN_DRIFT = {("hotpotqa", "eval.jsonl"): {"5a73b2cb55429908901be31a": "cues"}}
"""Fields of committed cases that the converter now writes differently and that stay as committed
because their lane dump (built from them) is not regenerated here: the cue fix keeps "von Trapp"
where the committed case has "Trapp". The HotpotQA paragraphs (citations.jsonl, and the lane
dump's passages) now join sentences with a space where the raw data has none; they are compared
without whitespace until the set is rebuilt."""


def _without_drift(text: str, drift: dict[str, str]) -> str:
    import json

    lines = []
    for line in text.splitlines():
        value = json.loads(line)
        if value.get("case_id") in drift:
            value.pop(drift[value["case_id"]], None)
        lines.append(json.dumps(value, ensure_ascii=False))
    return "\n".join(lines)


@needs_shared
def test_locomo_keeps_only_answerable_categories_and_real_turns() -> None:
    converted = datasets.convert("locomo", SHARED)
    assert len(converted.cases) == 50
    assert len({converted.contexts[c["case_id"]] for c in converted.cases}) == 10
    turns = {(p.source, p.paragraph) for p in converted.corpus}
    for case in converted.cases:
        for entry in case["expected_sources"]:
            assert (entry["source"], entry["paragraphs"][0]) in turns
    summaries = {s.community for s in converted.summaries}
    assert "conv-26/S1" in summaries
    first = converted.corpus[0]
    assert first.locator == ("dia_id", "D1:1") and first.section is not None


@needs_shared
def test_brewery_marks_written_questions_and_uses_real_triples() -> None:
    converted = datasets.convert("brewery", SHARED)
    ids = [c["case_id"] for c in converted.cases]
    assert ids[:11] == [f"qa-{i:02d}" for i in range(1, 12)]
    assert all(i.startswith("written-") for i in ids[11:])
    facts = {(f.subject, f.label, f.object) for f in converted.facts}
    for case in converted.cases:
        for association in case.get("expected_associations", []):
            assert (association["subject"], association["label"], association["object"]) in facts
    assert "long_dense" not in {p.source for p in converted.corpus}


def test_join_sentences_keeps_a_space_between_sentences() -> None:
    assert datasets.join_sentences(["A is B.", "C is D."]) == "A is B. C is D."
    assert datasets.join_sentences(["A is B.", " C is D."]) == "A is B. C is D."
    assert datasets.join_sentences(["A is B. ", "C is D."]) == "A is B. C is D."
    assert datasets.join_sentences(["青嶺は蔵元である。", "杜氏は高瀬。"]) == "青嶺は蔵元である。杜氏は高瀬。"
    assert datasets.join_sentences([]) == ""
    # an opening quote the splitter left at a sentence's end is not a sentence end
    assert datasets.join_sentences(['It means "market". "', 'Souq" is another word.']) == (
        'It means "market". "Souq" is another word.'
    )
    assert datasets.join_sentences(['He said "go."', "They went."]) == 'He said "go." They went.'


def _multihop_file(tmp_path: Path) -> Path:
    """Two questions in the HotpotQA format whose context titles repeat with different texts."""
    import json

    rows = [
        {
            "_id": "q1",
            "question": "Who directed the film Alpha?",
            "context": [
                ["Alpha", ["Alpha is a 1990 film.", "It was directed by Ann Lee."]],
                ["Beta", ["Beta is a town."]],
            ],
            "supporting_facts": [["Alpha", 1]],
        },
        {
            "_id": "q2",
            "question": "Where is Alpha?",
            "context": [["Alpha", ["Alpha is a village in Kent."]], ["Beta", ["Beta is a town."]]],
            "supporting_facts": [["Alpha", 0], ["Missing", 0]],
        },
    ]
    path = tmp_path / "dev.json"
    path.write_text(json.dumps(rows), encoding="utf-8")
    return path


def test_a_repeated_title_with_another_text_becomes_its_next_paragraph(tmp_path: Path) -> None:
    converted = datasets.convert("hotpotqa", tmp_path, 2, input=_multihop_file(tmp_path), context="wiki2")
    assert [(p.context, p.source, p.paragraph, p.text) for p in converted.corpus] == [
        ("wiki2", "Alpha", 0, "Alpha is a 1990 film. It was directed by Ann Lee."),
        ("wiki2", "Beta", 0, "Beta is a town."),
        ("wiki2", "Alpha", 1, "Alpha is a village in Kent."),
    ]
    first, second = converted.cases
    assert first["expected_sources"] == [{"source": "Alpha", "paragraphs": [0]}]
    assert first["expected_citations"][0]["quote"] == "It was directed by Ann Lee."
    # the second question's Alpha is the village; a supporting title absent from the context is skipped
    assert second["expected_sources"] == [{"source": "Alpha", "paragraphs": [1]}]


def test_the_converter_command_takes_an_input_file_and_a_context(tmp_path: Path) -> None:
    import json

    out = tmp_path / "out"
    args = ["--set", "hotpotqa", "--input", str(_multihop_file(tmp_path)), "--context", "wiki2", "--cases", "2"]
    status = datasets.main([*args, "--out", str(out), "--work", str(tmp_path / "work"), "--no-lanes"])
    assert status == 0
    corpus = [json.loads(line) for line in (tmp_path / "work" / "hotpotqa" / "corpus.jsonl").read_text().splitlines()]
    assert {line["context"] for line in corpus} == {"wiki2"}
    with pytest.raises(SystemExit):
        datasets.main(["--all", "--input", str(_multihop_file(tmp_path)), "--no-lanes"])
