"""The corpus snapshot: source preflight and the citation lane offline (spec sections 1.4, 2.2)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from evalkit import DATA, EVAL, LANES, Writer, dumps, passage, record

from assembler.cli import main
from assembler.errors import InputError
from assembler.evaluate.corpus import Corpus, check_citation, load_corpus
from assembler.evaluate.errors import EvaluateError
from assembler.evaluate.loader import ExpectedCitation

SOURCES = DATA / "sources.jsonl"
CITATIONS = DATA / "citations.jsonl"
CORPUS = Corpus(
    sources={"ctx": {"a.md": 2}},
    citations={("ctx", "a.md", 0): {"text": "ｱｯﾌﾟﾙの話。", "source": "a.md", "section": "由来", "locator": None}},
)


def check(**fields: Any) -> Any:
    expected = ExpectedCitation(**{"source": "a.md", "paragraph": 0, **fields})
    return check_citation(expected, "ctx", True, CORPUS)


def test_a_resolved_citation_without_checks_is_valid() -> None:
    result = check()
    assert result.resolved and result.valid
    assert result.block() == {
        "source": "a.md",
        "paragraph": 0,
        "served": True,
        "outcome": "resolved",
        "section": {"check": "not_checked"},
        "latency_ms": None,
    }


def test_section_checks_compare_exactly_and_null_is_a_value() -> None:
    assert check(section_declared=True, section="由来").section_matched is True
    mismatched = check(section_declared=True, section=None)
    assert mismatched.section_matched is False and not mismatched.valid
    assert mismatched.block()["section"] == {"check": "mismatched", "expected": None}
    null_corpus = Corpus(citations={("ctx", "a.md", 0): {"text": "t", "source": "a.md", "section": None}})
    expected = ExpectedCitation("a.md", 0, section_declared=True, section=None)
    assert check_citation(expected, "ctx", False, null_corpus).section_matched is True


def test_the_quote_check_normalizes_both_sides() -> None:
    matched = check(quote=" あっぷる ")
    assert matched.quote_matched is True and matched.block()["quote"] == {"declared": True, "matched": True}
    assert check(quote="バナナ").quote_matched is False and not check(quote="バナナ").valid


def test_unresolved_codes() -> None:
    no_source = check_citation(ExpectedCitation("b.md", 0), "ctx", False, CORPUS)
    assert (no_source.code, no_source.resolved, no_source.valid) == ("no_source", False, False)
    no_paragraph = check_citation(ExpectedCitation("a.md", 2), "ctx", False, CORPUS)
    assert no_paragraph.code == "no_paragraph" and "2 paragraph(s)" in (no_paragraph.message or "")
    other = check_citation(ExpectedCitation("a.md", 1), "ctx", False, CORPUS)
    assert other.code is None and other.message == "the citations file has no entry for this locator"
    without_sources = Corpus(citations={})
    assert check_citation(ExpectedCitation("z.md", 0), "ctx", False, without_sources).code is None
    assert set(no_source.block()) == {"source", "paragraph", "served", "outcome", "code", "message", "latency_ms"}


@pytest.mark.parametrize(
    ("name", "line", "message"),
    [
        ("sources", {"context": "c", "source": "a.md"}, "field paragraphs: must be a non-negative integer, got null"),
        ("sources", {"context": "c", "source": 3, "paragraphs": 1}, "field source: must be a string"),
        ("citations", {"context": "c", "source": "a.md", "paragraph": 0}, "field citation: must be an object"),
        (
            "citations",
            {"context": "c", "source": "a.md", "paragraph": 0, "citation": {"source": "a.md"}},
            "field citation.text: is required but missing",
        ),
    ],
)
def test_snapshot_lines_are_validated_with_file_and_line(
    tmp_path: Path, name: str, line: dict[str, Any], message: str
) -> None:
    path = tmp_path / f"{name}.jsonl"
    path.write_text("\n" + dumps(line) + "\n", encoding="utf-8")
    with pytest.raises(InputError) as caught:
        load_corpus(str(path) if name == "sources" else None, str(path) if name == "citations" else None)
    assert str(caught.value).startswith(f"{path}:2: ") and message in str(caught.value)


def test_duplicates_in_the_snapshot_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    line = dumps({"context": "c", "source": "a.md", "paragraphs": 1})
    path.write_text(line + "\n" + line + "\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"duplicate source 'a\.md' in context 'c'"):
        load_corpus(str(path), None)
    with pytest.raises(EvaluateError, match="no such file"):
        load_corpus(str(tmp_path / "none.jsonl"), None)


def test_the_preflight_names_every_unknown_expected_source(
    tmp_path: Path, write_eval: Writer, write_lanes: Writer, capsys: pytest.CaptureFixture[str]
) -> None:
    eval_path = write_eval(
        [
            {"case_id": "q1", "query": "x", "expected_sources": [{"source": "a.md"}, {"source": "ghost.md"}]},
            {"case_id": "q2", "query": "y", "expected_sources": [{"source": "zero.md", "relevance": 0}]},
        ]
    )
    lanes = write_lanes([record("q1", [passage("a.md", 0)]), record("q2", [])])
    sources = tmp_path / "sources.jsonl"
    sources.write_text(dumps({"context": "ctx", "source": "a.md", "paragraphs": 1}) + "\n", encoding="utf-8")
    out = tmp_path / "r.json"
    argv = ["evaluate", "--eval", str(eval_path), "--lanes", str(lanes), "--sources", str(sources), "--out", str(out)]
    assert main(argv) == 2
    assert capsys.readouterr().err.splitlines() == [
        f"assembler: error: {eval_path}: line 2: case 'q1': expected_sources names 'ghost.md', which 'ctx' does not "
        f"carry (per {sources})",
        f"assembler: error: {eval_path}: line 3: case 'q2': expected_sources names 'zero.md', which 'ctx' does not "
        f"carry (per {sources})",
    ]
    assert not out.exists()


def test_the_mini_set_with_its_snapshot(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "r.json"
    argv = ["evaluate", "--eval", str(EVAL), "--lanes", str(LANES), "--sources", str(SOURCES)]
    assert main([*argv, "--citations", str(CITATIONS), "--out", str(out)]) == 0
    assert "mean locator validity" in capsys.readouterr().out
    artifact = json.loads(out.read_text(encoding="utf-8"))
    assert artifact["inputs"]["sources"] == str(SOURCES) and artifact["inputs"]["citations"] == str(CITATIONS)
    assert set(artifact["corpus"]["revision_after"]) == {"lanes_sha256", "sources_sha256", "citations_sha256"}
    assert artifact["corpus"]["sources_count"] == 6
    metrics = artifact["metrics"]
    # 5 checks: ja-002 (quote matches), ja-005, ja-016 (section null matches), ja-017 x2 (quote fails;
    # short.md paragraph 5 does not exist).
    assert metrics["citations.resolved"] == {"value": 4 / 5, "n": 5, "numerator": 4}
    assert metrics["citations.no_paragraph"] == {"value": 1 / 5, "n": 5, "numerator": 1}
    assert metrics["citations.no_source"]["numerator"] == 0 and metrics["citations.other"]["numerator"] == 0
    assert metrics["citations.quote_match"] == {"value": 0.5, "n": 2, "numerator": 1}
    assert metrics["citations.section_match"] == {"value": 1.0, "n": 1, "numerator": 1}
    assert metrics["citations.locator_validity"]["n"] == 4
    assert metrics["citations.locator_validity"]["mean"] == pytest.approx((1 + 1 + 1 + 0) / 4)
    ja017 = next(block for block in artifact["cases"] if block["case_id"] == "ja-017")
    assert ja017["citations"]["validity"] == {"expected_total": 2, "valid": 0, "value": 0.0}
    assert "expected_citations: (corpus/output_limit.md, 8) failed locator validity" in ja017["missed"]
    assert "新酵" not in json.dumps(ja017["citations"], ensure_ascii=False)  # no quote or text echoed
    assert "absent" in metrics["latency.citation_ms"]
