"""``assembler lanes from-runs``: runs, corpus and queries in every format, the mapping rules, bad
input in each format (message, exit 2, nothing written; skip mode loses nothing), and the shipped
BEIR folder end to end through ``assemble``."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from assembler.cli import main
from assembler.contract.jsontext import to_f32
from assembler.retrieval import runs
from assembler.retrieval.hybrid import fuse_hits

ROOT = Path(__file__).resolve().parents[2]
BEIR = ROOT / "data" / "beir-hotpotqa"

CORPUS = [
    {"_id": "d1", "title": "Rush", "text": "Rush was a Canadian rock band.", "metadata": {"url": "w/Rush", "n": 0}},
    {"_id": "d2", "title": "Neil Peart", "text": "Neil Peart was the drummer of Rush.", "metadata": {"url": "w/NP"}},
    {"_id": "d3", "title": "", "text": "Counterparts is an album by Rush.", "metadata": {"url": "w/Rush", "n": 1}},
    {"_id": "d4", "title": "Toto", "text": "Toto is an American rock band."},
]
QUERIES = [{"_id": "q1", "text": "Who drummed for Rush?"}, {"_id": "q2", "text": "Which band is American?"}]
TREC = "q1 Q0 d2 1 12.5 bm25\nq1 Q0 d1 2 10 bm25\nq1 Q0 d3 3 1.25 bm25\nq2 Q0 d4 1 7 bm25\n"
JSON_RUN = {"q1": {"d1": 0.9, "d3": 0.8, "d2": 0.7}, "q2": {"d4": 0.5, "d1": 0.25}}


def _write(path: Path, content: str | bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(content.encode("utf-8") if isinstance(content, str) else content)
    return path


def _jsonl(rows: list[dict[str, Any]]) -> str:
    return "".join(json.dumps(row) + "\n" for row in rows)


@pytest.fixture
def files(tmp_path: Path) -> dict[str, Path]:
    return {
        "corpus": _write(tmp_path / "corpus.jsonl", _jsonl(CORPUS)),
        "queries": _write(tmp_path / "queries.jsonl", _jsonl(QUERIES)),
        "bm25": _write(tmp_path / "bm25.trec", TREC),
        "vector": _write(tmp_path / "dense.json", json.dumps(JSON_RUN)),
        "out": tmp_path / "lanes.jsonl",
    }


def _args(files: dict[str, Path], *extra: str, bm25: Path | None = None, vector: Path | None = None) -> list[str]:
    args = ["lanes", "from-runs", "--corpus", str(files["corpus"]), "--queries", str(files["queries"])]
    args += ["--run", f"bm25={bm25 or files['bm25']}", "--run", f"vector={vector or files['vector']}"]
    return [*args, "-o", str(files["out"]), *extra]


def _records(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def _passages(path: Path) -> dict[str, list[tuple[str, int]]]:
    return {r["query_id"]: [(p["source"], p["paragraph"]) for p in r["lanes"]["passages"]] for r in _records(path)}


# ---------------------------------------------------------------- what the lanes hold


def test_each_run_is_one_sub_lane_and_the_passage_score_is_their_rrf(files: dict[str, Path]) -> None:
    assert main(_args(files, "-q")) == 0
    first = _records(files["out"])[0]
    assert first["request"] == {
        "origins": ["Who drummed for Rush?"],
        "text_fallback_query": "Who drummed for Rush?",
        "search_limit": 5,
    }
    top = first["lanes"]["passages"][0]
    # d1: bm25 rank 2 (the file's rank), vector rank 1 (by score); scores are written in shortest f32 form
    assert to_f32(top.pop("score")) == to_f32(1 / 62 + 1 / 61)
    assert top == {
        "source": "d1",
        "paragraph": 0,
        "text": "Rush was a Canadian rock band.",
        "lanes": {"bm25": {"rank": 2, "score": 10.0}, "vector": {"rank": 1, "score": 0.9}},
    }
    assert [p["source"] for p in first["lanes"]["passages"]] == ["d1", "d2", "d3"]
    assert first["lanes"]["graph_activate"] is None and first["lanes"]["citations"] == []


def test_one_run_alone_gives_single_sub_lane_hits(files: dict[str, Path]) -> None:
    args = ["lanes", "from-runs", "--run", f"vector={files['vector']}", "--corpus", str(files["corpus"])]
    assert main([*args, "--queries", str(files["queries"]), "-o", str(files["out"]), "-q"]) == 0
    hit = _records(files["out"])[1]["lanes"]["passages"][1]
    assert hit["lanes"] == {"vector": {"rank": 2, "score": 0.25}} and to_f32(hit["score"]) == to_f32(1 / 62)


def test_ranks_by_score_break_ties_by_document_id(files: dict[str, Path]) -> None:
    vector = _write(files["out"].parent / "ties.json", '{"q1": {"d3": 1.0, "d1": 1.0, "d2": 2.0}}')
    bm25 = _write(files["out"].parent / "ranked.trec", "q1 Q0 d1 3 5 t\nq1 Q0 d2 1 5 t\nq1 Q0 d3 2 5 t\n")
    assert main(_args(files, "-q", bm25=bm25, vector=vector)) == 0
    lanes = {p["source"]: p["lanes"] for p in _records(files["out"])[0]["lanes"]["passages"]}
    assert {d: lane["vector"]["rank"] for d, lane in lanes.items()} == {"d2": 1, "d1": 2, "d3": 3}
    assert {d: lane["bm25"]["rank"] for d, lane in lanes.items()} == {"d1": 3, "d2": 1, "d3": 2}
    assert main(_args(files, "-q", "--ranks", "score", bm25=bm25, vector=vector)) == 0
    lanes = {p["source"]: p["lanes"] for p in _records(files["out"])[0]["lanes"]["passages"]}
    assert {d: lane["bm25"]["rank"] for d, lane in lanes.items()} == {"d1": 1, "d2": 2, "d3": 3}


def test_search_limit_and_pool_depth_cut(files: dict[str, Path]) -> None:
    assert main(_args(files, "-q", "--search-limit", "2")) == 0
    assert _passages(files["out"])["q1"] == [("d1", 0), ("d2", 0)]
    assert _records(files["out"])[0]["request"]["search_limit"] == 2
    assert main(_args(files, "-q", "--pool-depth", "1")) == 0
    q1 = _records(files["out"])[0]["lanes"]["passages"]
    assert [(p["source"], sorted(p["lanes"])) for p in q1] == [("d1", ["vector"]), ("d2", ["bm25"])]


def test_source_and_paragraph_fields_map_documents_to_locators(files: dict[str, Path]) -> None:
    """A field is looked up in the document's metadata first, then at its top level."""
    corpus = [
        {"_id": "d1", "text": "a", "metadata": {"url": "w/Rush", "n": 0}},
        {"_id": "d2", "text": "b", "metadata": {"url": "w/NP", "n": 0}},
        {"_id": "d3", "text": "c", "metadata": {"url": "w/Rush", "n": 1}},
        {"_id": "d4", "text": "d", "url": "w/Toto", "n": 3},
    ]
    _write(files["corpus"], _jsonl(corpus))
    assert main(_args(files, "-q", "--source-field", "url", "--paragraph-field", "n")) == 0
    assert _passages(files["out"]) == {
        "q1": [("w/Rush", 0), ("w/NP", 0), ("w/Rush", 1)],
        "q2": [("w/Toto", 3), ("w/Rush", 0)],
    }
    assert main(_args(files, "-q")) == 0
    assert _passages(files["out"]) == {"q1": [("d1", 0), ("d2", 0), ("d3", 0)], "q2": [("d4", 0), ("d1", 0)]}


def test_with_title_serves_the_title_as_the_first_line(files: dict[str, Path]) -> None:
    assert main(_args(files, "-q", "--with-title")) == 0
    texts = {p["source"]: p["text"] for p in _records(files["out"])[0]["lanes"]["passages"]}
    assert texts["d1"] == "Rush\nRush was a Canadian rock band."
    assert texts["d3"] == "Counterparts is an album by Rush."  # an empty title adds no line


def test_a_query_no_run_names_gets_empty_passages_or_is_dropped(
    files: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    _write(files["queries"], _jsonl([*QUERIES, {"_id": "q3", "text": "Nobody asked this"}]))
    assert main(_args(files)) == 0
    assert _records(files["out"])[2]["lanes"]["passages"] == []
    assert "1 query without hits" in capsys.readouterr().err
    assert main(_args(files, "--without-hits", "drop")) == 0
    assert [r["query_id"] for r in _records(files["out"])] == ["q1", "q2"]


def test_run_query_ids_outside_the_queries_file_are_counted_and_none_in_it_is_an_error(
    files: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    _write(files["bm25"], TREC + "q9 Q0 d1 1 3 bm25\n")
    assert main(_args(files)) == 0
    assert "1 run query id not in the queries file" in capsys.readouterr().err
    _write(files["bm25"], "1 Q0 d1 1 3 bm25\n")
    files["out"].unlink()
    assert main(_args(files)) == 2
    err = capsys.readouterr().err
    assert "no query id of" in err and "bm25.trec is in" in err and "'1'" in err and "'q1'" in err
    assert not files["out"].exists()


@pytest.mark.parametrize(
    ("run", "message"),
    [
        ("splade=x.trec", "a passage hit has two sub-lanes, bm25 and vector, and no other"),
        ("bm25", "--run takes NAME=FILE"),
    ],
)
def test_a_third_retriever_is_refused_with_the_way_out(
    files: dict[str, Path], capsys: pytest.CaptureFixture[str], run: str, message: str
) -> None:
    args = ["lanes", "from-runs", "--run", run, "--corpus", str(files["corpus"]), "--queries", str(files["queries"])]
    assert main([*args, "-o", str(files["out"])]) == 2
    assert message in capsys.readouterr().err
    assert main([*_args(files), "--run", f"bm25={files['bm25']}"]) == 2
    assert "--run bm25= is given twice" in capsys.readouterr().err
    assert not files["out"].exists()


def test_gzipped_runs_corpus_and_queries_give_the_same_lanes(files: dict[str, Path]) -> None:
    assert main(_args(files, "-q")) == 0
    plain = files["out"].read_bytes()
    for name in ("corpus", "queries", "bm25", "vector"):
        files[name] = _write(files[name].with_name(files[name].name + ".gz"), gzip.compress(files[name].read_bytes()))
    assert main(_args(files, "-q")) == 0
    assert files["out"].read_bytes() == plain


def test_csv_tsv_and_parquet_runs_and_corpora_give_the_same_lanes(files: dict[str, Path], tmp_path: Path) -> None:
    assert main(_args(files, "-q")) == 0
    expected = files["out"].read_bytes()
    rows = [line.split() for line in TREC.splitlines()]
    table = pl.DataFrame(
        {
            "qid": [r[0] for r in rows],
            "docid": [r[2] for r in rows],
            "rank": [int(r[3]) for r in rows],
            "score": [float(r[4]) for r in rows],
        }
    )
    csv_run = tmp_path / "bm25.csv"
    table.write_csv(csv_run)
    tsv_run = tmp_path / "bm25.tsv"
    table.select("qid", "docid", "score", "rank").write_csv(tsv_run, separator="\t")
    parquet_run = tmp_path / "bm25.parquet"
    table.write_parquet(parquet_run)
    vector_rows = [(q, d, s) for q, docs in JSON_RUN.items() for d, s in docs.items()]
    vector_csv = _write(
        tmp_path / "v.csv", "query_id,doc_id,score\n" + "".join(f"{q},{d},{s}\n" for q, d, s in vector_rows)
    )
    for bm25 in (csv_run, tsv_run, parquet_run):
        assert main(_args(files, "-q", bm25=bm25, vector=vector_csv)) == 0
        assert files["out"].read_bytes() == expected, bm25.name
    corpus = tmp_path / "docs.parquet"
    pl.DataFrame([{k: v for k, v in d.items() if k != "metadata"} for d in CORPUS]).write_parquet(corpus)
    files["corpus"] = corpus
    assert main(_args(files, "-q")) == 0
    assert files["out"].read_bytes() == expected
    files["corpus"] = _write(tmp_path / "own.jsonl", _jsonl([{"id": d["_id"], "contents": d["text"]} for d in CORPUS]))
    assert main(_args(files, "-q")) == 0
    assert files["out"].read_bytes() == expected
    files["queries"] = _write(tmp_path / "q.tsv", "".join(f"{q['_id']}\t{q['text']}\n" for q in QUERIES))
    assert main(_args(files, "-q")) == 0
    assert files["out"].read_bytes() == expected


def test_parquet_output_holds_the_same_records(files: dict[str, Path], tmp_path: Path) -> None:
    assert main(_args(files, "-q")) == 0
    files["out"] = tmp_path / "lanes.parquet"
    assert main(_args(files, "-q")) == 0
    jsonl_packages, parquet_packages = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    assert main(["assemble", str(tmp_path / "lanes.jsonl"), "-o", str(jsonl_packages)]) == 0
    assert main(["assemble", str(files["out"]), "-o", str(parquet_packages)]) == 0
    assert jsonl_packages.read_bytes() == parquet_packages.read_bytes()


def test_triples_give_the_graph_lane_and_its_citations(files: dict[str, Path], tmp_path: Path) -> None:
    triples = _write(
        tmp_path / "t.jsonl",
        '{"subject": "Rush", "label": "drummer", "object": "Neil Peart", "source": "d2", "paragraph": 0}\n',
    )
    _write(files["queries"], _jsonl([{"_id": "q1", "text": "Rush"}, QUERIES[1]]))
    assert main(_args(files, "-q", "--triples", str(triples))) == 0
    first, second = _records(files["out"])
    assert [a["association"]["object"] for a in first["lanes"]["graph_activate"]] == ["Neil Peart"]
    assert first["lanes"]["citations"][0]["citation"]["text"] == CORPUS[1]["text"]
    assert second["lanes"]["graph_activate"] is None  # no origin resolved


# ---------------------------------------------------------------- bad input, format by format


def _bad(files: dict[str, Path], capsys: pytest.CaptureFixture[str], message: str, **runs: Path) -> None:
    """Exit 2 with the message and nothing written; then with skip, the errors file holds the
    rejected lines untouched and the run writes every query."""
    assert main(_args(files, **runs)) == 2
    err = capsys.readouterr().err
    assert err.startswith("assembler: error: ") and message in err and err.count("\n") == 1, err
    assert not files["out"].exists()
    errors = files["out"].with_name("lanes.jsonl.errors.jsonl")
    assert main(_args(files, "--on-error", "skip", "-q", **runs)) == 0
    rejected = [json.loads(line) for line in errors.read_text(encoding="utf-8").splitlines()]
    assert rejected and any(message.split(": ")[-1] in r["rule"] for r in rejected), rejected
    assert [r["query_id"] for r in _records(files["out"])] == ["q1", "q2"]
    files["out"].unlink()
    errors.unlink()


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("q1 Q0 d2 1 12.5\n", "bm25.trec:5: must have 6 fields separated by spaces or tabs"),
        ("q1 Q0 d2 first 12.5 bm25\n", "bm25.trec:5: query_id 'q1' field rank: must be a positive integer"),
        ("q1 Q0 d2 0 12.5 bm25\n", "bm25.trec:5: query_id 'q1' field rank: must be a positive integer"),
        ("q1 Q0 d2 2 nan bm25\n", "bm25.trec:5: query_id 'q1' field score: must be a finite number"),
        ("q1 Q0 d2 2 1e39 bm25\n", "field score: must be a finite number that fits a 32-bit float"),
        (
            "q1 Q0 d1 5 1 bm25\n",
            "bm25.trec:5: query_id 'q1' field docid: 'd1' is repeated for this query (first at line 2)",
        ),
        (
            "q1 Q0 d4 2 1 bm25\n",
            "bm25.trec:5: query_id 'q1' field rank: rank 2 is repeated for this query (first at line 2)",
        ),
        ("q1 Q0 d9 9 1 bm25\n", "bm25.trec:5: query_id 'q1' field docid: 'd9' is not in the corpus"),
        (b"q1 Q0 d\xff 9 1 bm25\n", "bm25.trec:5: invalid UTF-8 at byte 7 of the line"),
    ],
)
def test_bad_trec_run_lines(
    files: dict[str, Path], capsys: pytest.CaptureFixture[str], text: str | bytes, message: str
) -> None:
    bad = text.encode() if isinstance(text, str) else text
    _write(files["bm25"], TREC.encode() + bad)
    _bad(files, capsys, message)
    assert main(_args(files, "--on-error", "skip", "-q")) == 0
    entry = json.loads(files["out"].with_name("lanes.jsonl.errors.jsonl").read_text(encoding="utf-8"))
    assert entry["line"] == 5 and entry["record"] == bad.decode("utf-8", "replace").rstrip("\n")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("q1 0 d2 1\nq1 0 d1 0\n", "bm25.trec is a qrels file, not a run (its first line is a TREC qrels line"),
        ("query-id\tcorpus-id\tscore\nq1\td2\t1\n", "bm25.trec is a BEIR qrels file, not a run"),
        ("", "bm25.trec: no run lines"),
    ],
)
def test_a_qrels_file_given_as_a_run_says_so(
    files: dict[str, Path], capsys: pytest.CaptureFixture[str], text: str, message: str
) -> None:
    _write(files["bm25"], text)
    assert main(_args(files, "--on-error", "skip")) == 2
    assert message in capsys.readouterr().err
    assert not files["out"].exists()


def test_a_qrels_parquet_given_as_a_run_says_so(files: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    qrels = files["out"].with_name("qrels.parquet")
    pl.DataFrame({"query-id": ["q1"], "corpus-id": ["d1"], "score": [1]}).write_parquet(qrels)
    assert main(_args(files, bm25=qrels)) == 2
    assert "holds BEIR qrels columns (query-id, corpus-id, score), not a run" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            '{"q1": {"d1": "high", "d2": 0.7}, "q2": {"d4": 0.5}}',
            "dense.json:1: query_id 'q1' field score: must be a finite number",
        ),
        (
            '{"q1": {"d1": 0.9, "d2": NaN}, "q2": {"d4": 0.5}}',
            "dense.json:1: query_id 'q1' field score: must be a finite number",
        ),
        ('{"q1": {"d1": 0.9},\n "q0": [1, 2],\n "q2": {"d4": 0.5}}', "dense.json:2: query_id 'q0': must be an object"),
        (
            '{"q1": {"d1": 0.9, "d1": 0.8}, "q2": {"d4": 0.5}}',
            "dense.json:1: query_id 'q1' field docid: 'd1' is repeated for this query",
        ),
        ('{"q1": {"d1": 0.9, "d7": 0.8}, "q2": {"d4": 0.5}}', "query_id 'q1' field docid: 'd7' is not in the corpus"),
    ],
)
def test_bad_json_run_entries(
    files: dict[str, Path], capsys: pytest.CaptureFixture[str], text: str, message: str
) -> None:
    _write(files["vector"], text)
    _bad(files, capsys, message)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            '{"q1": {"d1": 0.9} "q2": {}}',
            "dense.json:1: not a JSON run {qid: {docid: score}}: expected ',' or '}' after a query",
        ),
        (
            '{"q1": {"d1": 0.9,\n "d2": 0.5 "d4": 1}}',
            "dense.json:2: not a JSON run {qid: {docid: score}}: expected ',' or '}' in a query's object",
        ),
        ('{"q1": {"d1": 0.9}, }', "dense.json:1: not a JSON run {qid: {docid: score}}: expected a string key"),
        ('{"q1": {"d1" 0.9}}', "dense.json:1: not a JSON run {qid: {docid: score}}: expected ':' after a key"),
        ('{"q1": {"d1": 0.9}}\n{"q2": {}}\n', "dense.json:2: not a JSON run {qid: {docid: score}}: text after"),
        ('[{"q1": 1}]', "dense.json:1: not a JSON run {qid: {docid: score}}: the file must hold one JSON object"),
    ],
)
def test_a_json_run_of_the_wrong_shape_stops_even_when_skipping(
    files: dict[str, Path], capsys: pytest.CaptureFixture[str], text: str, message: str
) -> None:
    _write(files["vector"], text)
    assert main(_args(files, "--on-error", "skip", "--run-format", "vector=json")) == 2
    assert message in capsys.readouterr().err
    assert not files["out"].exists()


@pytest.mark.parametrize(
    ("corpus", "message"),
    [
        (json.dumps(CORPUS), "corpus.jsonl:1: not JSON Lines: a JSON array; the input holds one JSON object per line"),
        ("".join(json.dumps(doc, indent=1) + "\n" for doc in CORPUS), "corpus.jsonl:1: not JSON Lines: an object"),
    ],
    ids=["array", "pretty"],
)
def test_a_corpus_that_is_a_json_document_is_refused_whole_as_every_json_lines_input(
    files: dict[str, Path], capsys: pytest.CaptureFixture[str], corpus: str, message: str
) -> None:
    _write(files["corpus"], corpus)
    assert main(_args(files, "--on-error", "skip")) == 2
    err = capsys.readouterr().err
    assert err.startswith("assembler: error: ") and message in err and err.count("\n") == 1, err
    assert not files["out"].exists()


def test_skipped_json_run_entries_are_written_as_one_entry_each_with_the_line_of_its_document(
    files: dict[str, Path],
) -> None:
    """Both levels of ``{qid: {docid: score}}`` are read by one loop: an entry whose query value is
    not an object is ``{qid: value}`` at the value's line, a bad score ``{qid: {docid: score}}`` at
    its document's line; empty objects hold no entry."""
    text = '{"q1": {"d1": 0.9,\n "d2": NaN},\n "q0":\n [1, 2], "q9": {},\n "q2": {"d4": "high"}}'
    _write(files["vector"], text)
    assert main(_args(files, "--on-error", "skip", "-q")) == 0
    errors = files["out"].with_name("lanes.jsonl.errors.jsonl").read_text(encoding="utf-8").splitlines()
    assert [(e["line"], e["query_id"], e["record"]) for e in map(json.loads, errors)] == [
        (2, "q1", '{"q1":{"d2":NaN}}'),
        (4, "q0", '{"q0":[1, 2]}'),
        (5, "q2", '{"q2":{"d4":"high"}}'),
    ]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("qid,docid,score\nq1,d2,12.5\nq1,d1\nq2,d4,7\n", "bm25.csv:3: has 2 fields, the header 3"),
        (
            "qid,docid,score\nq1,d2,12.5\nq1,d1,lots\nq2,d4,7\n",
            "bm25.csv:3: query_id 'q1' field score: must be a finite number",
        ),
        (
            "qid,docid,score,rank\nq1,d2,12.5,1\nq1,d1,10,-2\nq2,d4,7,1\n",
            "bm25.csv:3: query_id 'q1' field rank: must be a positive integer",
        ),
        ("qid,docid,score\nq1,d2,12.5\n,d1,10\nq2,d4,7\n", "bm25.csv:3: field qid: must not be blank"),
    ],
)
def test_bad_csv_run_rows(files: dict[str, Path], capsys: pytest.CaptureFixture[str], text: str, message: str) -> None:
    _bad(files, capsys, message, bm25=_write(files["out"].with_name("bm25.csv"), text))


def test_a_csv_run_without_a_needed_column_is_refused(
    files: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    run = _write(files["out"].with_name("bm25.csv"), "qid,doc,score\nq1,d1,1\n")
    assert main(_args(files, "--on-error", "skip", bm25=run)) == 2
    assert "bm25.csv: no document id column (docid or doc_id); the columns are qid, doc, score" in (
        capsys.readouterr().err
    )


def test_bad_parquet_run_rows(files: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    run = files["out"].with_name("bm25.parquet")
    pl.DataFrame({"qid": ["q1", "q1", "q2"], "docid": ["d2", "d1", "d4"], "score": [12.5, None, 7.0]}).write_parquet(
        run
    )
    _bad(files, capsys, "bm25.parquet:2: query_id 'q1' field score: must be a finite number", bm25=run)
    pl.DataFrame({"qid": ["q1"], "docid": ["d2"], "score": ["high"]}).write_parquet(run)
    assert main(_args(files, bm25=run)) == 2
    assert "bm25.parquet: column score must be a number, it is large_string" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ('{"_id": "d5", "title": "x"}', "corpus.jsonl:5: doc_id 'd5' field text: must be a string"),
        ('{"title": "x", "text": "y"}', "corpus.jsonl:5: field _id: must be a non-blank string or an integer"),
        (
            '{"_id": "d5", "text": "y", "metadata": [1]}',
            "corpus.jsonl:5: doc_id 'd5' field metadata: must be an object or null",
        ),
        ('{"_id": "d5", "text": ', "corpus.jsonl:5: invalid JSON at column 23"),
        ('{"_id": "d1", "text": "again"}', "corpus.jsonl:5: doc_id 'd1': repeated document id (first at line 1)"),
    ],
)
def test_bad_beir_corpus_lines(
    files: dict[str, Path], capsys: pytest.CaptureFixture[str], line: str, message: str
) -> None:
    _write(files["corpus"], _jsonl(CORPUS) + line + "\n")
    _bad(files, capsys, message)


def test_two_documents_at_one_locator_are_refused(files: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    _write(files["corpus"], _jsonl([*CORPUS[:3], {**CORPUS[3], "url": "w/Toto"}]))
    assert main(_args(files, "--source-field", "url")) == 2
    assert (
        "corpus.jsonl:3: doc_id 'd3': maps to source 'w/Rush' paragraph 0, as document 'd1' (line 1) does"
        in capsys.readouterr().err
    )


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ('{"id": "d5"}', "docs.jsonl:5: doc_id 'd5' field contents: must be a string"),
        ('{"id": 5.5, "contents": "y"}', "docs.jsonl:5: field id: must be a non-blank string or an integer"),
        ('"just text"', "docs.jsonl:5: must be a JSON object"),
    ],
)
def test_bad_own_jsonl_corpus_lines(
    files: dict[str, Path], capsys: pytest.CaptureFixture[str], line: str, message: str
) -> None:
    own = [json.dumps({"id": d["_id"], "contents": d["text"]}) for d in CORPUS]
    files["corpus"] = _write(files["out"].with_name("docs.jsonl"), "\n".join([*own, line]) + "\n")
    _bad(files, capsys, message)


def test_bad_parquet_corpus_rows(files: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    rows = [{"_id": d["_id"], "title": d["title"], "text": d["text"]} for d in CORPUS]
    files["corpus"] = files["out"].with_name("docs.parquet")
    pl.DataFrame([*rows, {"_id": "d5", "title": "x", "text": None}]).write_parquet(files["corpus"])
    _bad(files, capsys, "docs.parquet:5: doc_id 'd5' field text: must be a string")
    assert main(_args(files, "--on-error", "skip", "-q")) == 0
    entry = json.loads(files["out"].with_name("lanes.jsonl.errors.jsonl").read_text(encoding="utf-8"))
    assert entry["record"] == '{"_id":"d5","title":"x"}'


def test_a_corrupt_parquet_run_or_csv_run_is_a_usage_error(
    files: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    run = files["out"].with_name("bm25.parquet")
    pl.DataFrame({"qid": ["q1"] * 1000, "docid": [f"d{i}" for i in range(1000)], "score": [1.0] * 1000}).write_parquet(
        run, compression="uncompressed"
    )
    data = bytearray(run.read_bytes())
    data[200:400] = bytes(200)
    run.write_bytes(bytes(data))
    assert main(_args(files, "--on-error", "skip", bm25=run)) == 2
    assert "bm25.parquet" in capsys.readouterr().err
    csv_run = _write(files["out"].with_name("bm25.csv"), 'qid,docid,score\nq1,"d1' + "x" * 200000 + '",1\n')
    assert main(_args(files, bm25=csv_run)) == 2
    assert "bm25.csv:2: cannot be read as CSV: field larger than field limit" in capsys.readouterr().err
    assert not files["out"].exists()


def test_a_corpus_field_rule_names_the_field(files: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(_args(files, "--paragraph-field", "n")) == 2
    assert "corpus.jsonl:2: doc_id 'd2' field n: must be an integer from 0 to 4294967295" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("name", "text", "message"),
    [
        ("queries.jsonl", _jsonl(QUERIES) + '{"_id": "q3"}\n', "queries.jsonl:3: query_id 'q3' field text: must be"),
        (
            "queries.jsonl",
            _jsonl(QUERIES) + '{"_id": "q1", "text": "x"}\n',
            "queries.jsonl:3: query_id 'q1' field _id: repeated query id",
        ),
        (
            "queries.tsv",
            "q1\tWho drummed for Rush?\nq2\tWhich band is American?\nq3 none\n",
            "queries.tsv:3: must be qid<TAB>text",
        ),
    ],
)
def test_bad_query_lines(
    files: dict[str, Path], capsys: pytest.CaptureFixture[str], name: str, text: str, message: str
) -> None:
    files["queries"] = _write(files["out"].with_name(name), text)
    _bad(files, capsys, message)


def test_skip_mode_with_every_query_rejected_writes_no_record(files: dict[str, Path]) -> None:
    _write(files["queries"], '{"_id": "q1"}\n{"_id": "q2"}\n')
    assert main(_args(files, "--on-error", "skip", "-q")) == 0
    assert files["out"].read_text(encoding="utf-8") == ""
    errors = files["out"].with_name("lanes.jsonl.errors.jsonl").read_text(encoding="utf-8").splitlines()
    assert [json.loads(line)["query_id"] for line in errors] == ["q1", "q2"]


def test_a_run_file_given_as_queries_says_so(files: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    files["queries"] = files["bm25"]
    assert main(_args(files)) == 2
    assert "bm25.trec is not a query file: its first line is a TREC run line" in capsys.readouterr().err


@pytest.mark.parametrize("block", [None, 40])
def test_skip_mode_loses_no_line(files: dict[str, Path], monkeypatch: pytest.MonkeyPatch, block: int | None) -> None:
    """Every run line is either a sub-lane entry of the output or a line of the errors file (by
    line within the file, whichever rule refused it), wherever the reading blocks end."""
    if block is not None:
        monkeypatch.setattr(runs, "_BLOCK", block)
    _write(files["bm25"], TREC + "q1 Q0 d9 4 1 bm25\nq2 Q0 d4 2 1 bm25\nq2 x\n")
    assert main(_args(files, "--on-error", "skip", "-q")) == 0
    errors_file = files["out"].with_name("lanes.jsonl.errors.jsonl")
    errors = [json.loads(line) for line in errors_file.read_text(encoding="utf-8").splitlines()]
    assert [(e["line"], e["field"], e["record"]) for e in errors] == [
        (5, "docid", "q1 Q0 d9 4 1 bm25"),
        (6, "docid", "q2 Q0 d4 2 1 bm25"),
        (7, "", "q2 x"),
    ]
    kept = [p for r in _records(files["out"]) for p in r["lanes"]["passages"] if "bm25" in p["lanes"]]
    assert len(kept) + len(errors) == 7


# ---------------------------------------------------------------- the shipped BEIR folder


def test_from_runs_on_the_shipped_beir_folder_then_assemble(tmp_path: Path) -> None:
    lanes = tmp_path / "lanes.jsonl"
    args = ["lanes", "from-runs", "--run", f"bm25={BEIR / 'runs' / 'bm25.trec'}"]
    args += ["--run", f"vector={BEIR / 'runs' / 'dense.trec'}", "--corpus", str(BEIR / "corpus.jsonl")]
    assert main([*args, "--queries", str(BEIR / "queries.jsonl"), "-o", str(lanes), "-q"]) == 0
    records = _records(lanes)
    assert len(records) == 100 and all(len(r["lanes"]["passages"]) == 5 for r in records)
    packages = tmp_path / "packages.jsonl"
    assert main(["assemble", str(lanes), "-o", str(packages)]) == 0
    lines = [json.loads(line) for line in packages.read_text(encoding="utf-8").splitlines()]
    assert [line["query_id"] for line in lines] == [r["query_id"] for r in records]
    assert all(line["package"]["items"] for line in lines)


def _shipped_lanes(tmp_path: Path) -> list[dict[str, Any]]:
    lanes = tmp_path / "lanes.jsonl"
    args = ["lanes", "from-runs", "--run", f"bm25={BEIR / 'runs' / 'bm25.trec'}", "--search-limit", "10"]
    args += ["--run", f"vector={BEIR / 'runs' / 'dense.trec'}", "--corpus", str(BEIR / "corpus.jsonl")]
    args += ["--source-field", "title", "--context", "hotpotqa"]
    assert main([*args, "--queries", str(BEIR / "queries.jsonl"), "-o", str(lanes), "-q"]) == 0
    return _records(lanes)


def test_the_shipped_runs_fuse_as_lanes_build_fuses_its_pools(tmp_path: Path) -> None:
    """The runs are lanes build's two pools written out: from-runs gives the passages lanes build's
    own fusion (``fuse_hits`` over the pools in rank order) gives them."""
    corpus = _records(BEIR / "corpus.jsonl")
    index = {doc["_id"]: position for position, doc in enumerate(corpus)}
    keys = [(doc["title"], 0) for doc in corpus]
    pools: dict[str, dict[str, list[tuple[int, float]]]] = {}
    for lane, name in (("bm25", "bm25.trec"), ("vector", "dense.trec")):
        for line in (BEIR / "runs" / name).read_text(encoding="utf-8").splitlines():
            qid, _, docid, _, score, _ = line.split()
            pools.setdefault(qid, {"bm25": [], "vector": []})[lane].append((index[docid], to_f32(float(score))))
    for record in _shipped_lanes(tmp_path):
        expected = []
        for hit in fuse_hits(pools[record["query_id"]]["bm25"], pools[record["query_id"]]["vector"], keys)[:10]:
            lanes = {
                name: {"rank": entry[0], "score": entry[1]}
                for name, entry in (("bm25", hit.bm25), ("vector", hit.vector))
                if entry is not None
            }
            expected.append((*keys[hit.doc], hit.score, corpus[hit.doc]["text"], lanes))
        got = [
            (
                p["source"],
                p["paragraph"],
                to_f32(p["score"]),
                p["text"],
                {n: {"rank": e["rank"], "score": to_f32(e["score"])} for n, e in p["lanes"].items()},
            )
            for p in record["lanes"]["passages"]
        ]
        assert got == expected, record["query_id"]


def test_blocks_and_chunks_of_any_size_give_the_same_lanes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Runs and corpus read in blocks of a few lines, queries in chunks of a few: line numbers,
    byte offsets of the served texts and the fusion do not depend on where the cuts fall."""
    expected = _shipped_lanes(tmp_path)
    monkeypatch.setattr(runs, "_BLOCK", 4096)
    monkeypatch.setattr(runs, "_CHUNK_ROWS", 300)
    monkeypatch.setattr(runs, "_CHUNK_QUERIES", 7)
    assert _shipped_lanes(tmp_path) == expected


def test_the_shipped_bm25_run_is_the_eval_sets_bm25_pool(tmp_path: Path) -> None:
    """BM25 is deterministic: every BM25 sub-lane entry of data/eval/hotpotqa/lanes.jsonl (built by
    lanes build) is the shipped run's rank and score for that paragraph. (The dense run's cosines
    differ from that file's in the third decimal: the embedding engine's arithmetic is not the one
    that file was built with; see data/beir-hotpotqa/SOURCE.md.)"""
    run: dict[tuple[str, str], dict[str, Any]] = {}
    for line in (BEIR / "runs" / "bm25.trec").read_text(encoding="utf-8").splitlines():
        qid, _, docid, rank, score, _ = line.split()
        run[(qid, docid.replace("_", " "))] = {"rank": int(rank), "score": to_f32(float(score))}
    checked = 0
    for record in _records(ROOT / "data" / "eval" / "hotpotqa" / "lanes.jsonl"):
        for passage in record["lanes"]["passages"]:
            if "bm25" in passage["lanes"]:
                entry = passage["lanes"]["bm25"]
                assert run[(record["query_id"], passage["source"])] == {
                    "rank": entry["rank"],
                    "score": to_f32(entry["score"]),
                }
                checked += 1
    assert checked > 500


# ---------------------------------------------------------------- lanes build --queries


def test_lanes_build_takes_queries_without_labels(tmp_path: Path) -> None:
    corpus = _write(
        tmp_path / "corpus.jsonl",
        "".join(
            json.dumps({"source": d["_id"], "paragraph": 0, "text": d["text"], "title": d["title"] or None}) + "\n"
            for d in CORPUS
        ),
    )
    queries = _write(tmp_path / "queries.tsv", "".join(f"{q['_id']}\t{q['text']}\n" for q in QUERIES))
    evals = _write(
        tmp_path / "eval.jsonl",
        '{"taguru_eval": 1}\n' + "".join(json.dumps({"case_id": q["_id"], "query": q["text"]}) + "\n" for q in QUERIES),
    )
    base = ["lanes", "build", "--corpus", str(corpus), "--no-dense", "-q"]
    assert main([*base, "--queries", str(queries), "-o", str(tmp_path / "a.jsonl")]) == 0
    assert main([*base, "--eval", str(evals), "-o", str(tmp_path / "b.jsonl")]) == 0
    assert (tmp_path / "a.jsonl").read_bytes() == (tmp_path / "b.jsonl").read_bytes()
    records = _records(tmp_path / "a.jsonl")
    assert [r["request"]["origins"] for r in records] == [[q["text"]] for q in QUERIES]


def test_lanes_build_needs_an_eval_file_or_queries(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    corpus = _write(tmp_path / "c.jsonl", '{"source": "a", "paragraph": 0, "text": "x"}\n')
    with pytest.raises(SystemExit) as caught:
        main(["lanes", "build", "--corpus", str(corpus), "-o", str(tmp_path / "o")])
    assert caught.value.code == 2
    assert "one of the arguments --eval --queries is required" in capsys.readouterr().err
