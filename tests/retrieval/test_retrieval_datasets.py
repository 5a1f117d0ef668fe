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
        assert (outputs[0] / "out" / file).read_bytes() == (committed / file).read_bytes(), f"{name}/{file} is stale"


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
