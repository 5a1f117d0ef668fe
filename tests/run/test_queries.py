"""Query files (assembler/run/queries.py): BEIR queries.jsonl and TSV, gzip, and their errors."""

from __future__ import annotations

import gzip
import io
import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from assembler.errors import InputError, RecordError, UsageError
from assembler.run.queries import plain_path, read_queries


def _write(path: Path, text: str | bytes) -> Path:
    path.write_bytes(text.encode("utf-8") if isinstance(text, str) else text)
    return path


def test_beir_queries_are_read_in_file_order_with_integer_ids_as_text(tmp_path: Path) -> None:
    path = _write(
        tmp_path / "queries.jsonl",
        '{"_id": "q2", "text": "Who?", "metadata": {}}\n\n{"_id": 7, "text": "What?", "title": "x"}\r\n',
    )
    assert read_queries(path) == [("q2", "Who?"), ("7", "What?")]


def test_tsv_queries_keep_a_later_tab_in_the_query(tmp_path: Path) -> None:
    path = _write(tmp_path / "queries.tsv", "q1\tWho is it?\n\nq2\tA\tB\n")
    assert read_queries(path) == [("q1", "Who is it?"), ("q2", "A\tB")]


def test_a_gzipped_query_file_is_read_by_its_magic_bytes_not_its_name(tmp_path: Path) -> None:
    path = _write(tmp_path / "queries.txt", gzip.compress(b'{"_id": "q1", "text": "Who?"}\n'))
    assert read_queries(path) == [("q1", "Who?")]
    with plain_path(path) as plain:
        assert Path(plain).read_bytes() == b'{"_id": "q1", "text": "Who?"}\n'
    assert not Path(plain).exists()


@pytest.mark.parametrize(
    ("name", "text", "message"),
    [
        ("q.jsonl", '{"_id": "q1"}\n', "q.jsonl:1: query_id 'q1' field text: must be a non-blank string"),
        ("q.jsonl", '{"_id": "q1", "text": "a"}\n{"_id": ""}\n', "q.jsonl:2: field _id: must be a non-blank string"),
        ("q.jsonl", '{"_id": "q1", "text": "a"}\n{"_id": "q1", "text": "b"}\n', "repeated query id (first at line 1)"),
        ("q.jsonl", '{"_id": "q1", "text": "a"}\n{"_id": \n', "q.jsonl:2: invalid JSON at column 9"),
        ("q.jsonl", '{"_id": "q1", "text": "a"}\n[1]\n', "q.jsonl:2: must be a JSON object"),
        ("q.tsv", "q1\ta\nq2 a\n", "q.tsv:2: must be qid<TAB>text (no tab in the line)"),
        ("q.tsv", "q1\ta\n\tb\n", "q.tsv:2: field qid: must not be blank"),
        ("q.tsv", "q1\ta\nq2\t \n", "q.tsv:2: query_id 'q2' field text: must not be blank"),
        ("q.tsv", b"q1\ta\nq2\t\xff\n", "q.tsv:2: invalid UTF-8 at byte 3 of the line"),
    ],
)
def test_a_bad_query_line_names_file_line_field_and_rule(
    tmp_path: Path, name: str, text: str | bytes, message: str
) -> None:
    path = _write(tmp_path / name, text)
    with pytest.raises(InputError) as caught:
        read_queries(path)
    assert message in str(caught.value)
    rejected: list[tuple[RecordError, str]] = []
    kept = read_queries(path, reject=lambda error, line: rejected.append((error, line)))
    assert len(kept) + len(rejected) == len([line for line in _lines(text) if line.strip()])
    assert message.split(": ", 1)[-1].split(": ")[-1] in rejected[0][0].rule


def _lines(text: str | bytes) -> list[str]:
    return (text.decode("utf-8", "replace") if isinstance(text, bytes) else text).splitlines()


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        ("q1 Q0 d1 1 12.5 bm25\n", "its first line is a TREC run line"),
        ("q1 0 d1 1\n", "its first line is a TREC qrels line"),
        ("query-id\tcorpus-id\tscore\nq1\td1\t1\n", "its first line is the header of a BEIR qrels file"),
    ],
)
def test_a_run_or_qrels_file_given_as_queries_says_what_it_is(tmp_path: Path, text: str, kind: str) -> None:
    with pytest.raises(UsageError, match=kind):
        read_queries(_write(tmp_path / "q.tsv", text))


def test_a_query_file_without_queries_is_refused(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="no queries"):
        read_queries(_write(tmp_path / "q.tsv", "\n\n"))


def test_a_broken_gzip_file_is_a_usage_error(tmp_path: Path) -> None:
    path = _write(tmp_path / "q.jsonl.gz", gzip.compress(b'{"_id": "q1", "text": "a"}\n' * 50)[:-20])
    with pytest.raises(UsageError, match=r"q\.jsonl\.gz: the gzip data is corrupt"):
        read_queries(path)


def test_a_zstd_query_file_and_a_zstd_run_are_read_as_every_json_lines_input_is(tmp_path: Path) -> None:
    """One opener for every input (assembler.run.io.open_input): zstd as well as gzip."""
    data = b'{"_id": "q1", "text": "Who?"}\n'
    path = _write(tmp_path / "queries.jsonl", pa.compress(data, codec="zstd", asbytes=True))
    assert read_queries(path) == [("q1", "Who?")]
    with plain_path(path) as plain:
        assert Path(plain).read_bytes() == data
    assert not Path(plain).exists()
    unpacked = _write(tmp_path / "run.trec", b"q1 Q0 d1 1 2.5 bm25\n")
    with plain_path(unpacked) as plain:
        assert plain == str(unpacked)


def _parquet(rows: list[dict[str, str]]) -> bytes:
    buffer = io.BytesIO()
    pq.write_table(pa.Table.from_pylist(rows), buffer)
    return buffer.getvalue()


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (_parquet([{"_id": "q1", "text": "Who?"}]), "queries.jsonl is a Parquet file, not JSON Lines"),
        (
            json.dumps([{"_id": "q1", "text": "Who?"}]).encode(),
            "queries.jsonl:1: not JSON Lines: a JSON array; the input holds one JSON object per line",
        ),
        (
            json.dumps({"_id": "q1", "text": "Who?"}, indent=2).encode(),
            "queries.jsonl:1: not JSON Lines: an object split over lines?",
        ),
    ],
    ids=["parquet", "array", "pretty"],
)
def test_a_query_file_that_is_not_lines_says_what_it_is(tmp_path: Path, data: bytes, message: str) -> None:
    """Not "invalid UTF-8 at byte 7" of a Parquet file's first line, nor a field error of a JSON document."""
    with pytest.raises(UsageError) as caught:
        read_queries(_write(tmp_path / "queries.jsonl", data))
    assert message in str(caught.value)


def test_a_tsv_query_id_in_brackets_is_not_taken_for_a_json_array(tmp_path: Path) -> None:
    assert read_queries(_write(tmp_path / "q.tsv", "[q1]\tWho?\n")) == [("[q1]", "Who?")]
