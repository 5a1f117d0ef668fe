"""Readers and writers: raw record errors (bytes, JSON), positions, Parquet schemas, atomic output."""

from __future__ import annotations

import io
import json
import os
from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given
from hypothesis import strategies as st

from assembler.errors import UsageError
from assembler.run.atomic import AtomicFile
from assembler.run.io import is_parquet, jsonl_lines, read_raw, stream_lines
from assembler.run.schemas import LANE_DUMP_SCHEMA, PACKAGE_SCHEMA

if TYPE_CHECKING:
    from tests.conftest import JsonlWriter, RecordFactory, Rejector

PACKAGE_COLUMNS = [
    "query_id",
    "package",
    "items_used",
    "bytes_used",
    "tokens_used",
    "omitted_total",
    "omitted_budget_exceeded",
    "omitted_contradiction_group_exceeds_budget",
    "omitted_duplicate_passage",
    "omitted_evidence_in_passage",
    "search_limit_cuts",
]


# --- raw record errors -----------------------------------------------------------------------------


def test_invalid_utf8_line_names_the_line_and_no_query_id(reject: Rejector) -> None:
    error = reject(b'{"query_id":"bad","context":"c\xff","request":{"origins":[]},"lanes":{}}')
    assert error.query_id is None
    assert error.field == ""
    assert "invalid UTF-8 at byte 30" in error.rule


def test_invalid_json_names_the_line_and_no_query_id(reject: Rejector) -> None:
    error = reject('{"query_id":"bad","context":')
    assert error.query_id is None
    assert error.field == ""
    assert error.rule.startswith("invalid JSON at column")


def test_truncated_record_is_invalid_json(reject: Rejector, make_record: RecordFactory) -> None:
    text = json.dumps(make_record("bad"))
    error = reject(text[: len(text) // 2])
    assert "invalid JSON" in error.rule


@pytest.mark.parametrize("literal", ["NaN", "Infinity", "-Infinity"])
def test_non_json_number_literals_are_refused_naming_their_field(
    reject: Rejector, make_record: RecordFactory, literal: str
) -> None:
    line = json.dumps(make_record("bad")).replace('"score": 0.86304635', f'"score": {literal}', 1)
    assert literal in line
    error = reject(line)
    assert error.rule == f"must be a finite number ({literal} is not a JSON number)"
    assert error.field == "lanes.passages[0].score"
    assert error.query_id == "bad"


def test_number_past_f64_range_is_rejected(reject: Rejector, make_record: RecordFactory) -> None:
    line = json.dumps(make_record("bad")).replace('"weight": 1.0', '"weight": 1e999', 1)
    assert "1e999" in line
    error = reject(line)
    assert error.query_id in (None, "bad")


def test_line_numbers_count_skipped_blank_lines(write_jsonl: JsonlWriter, make_record: RecordFactory) -> None:
    path = write_jsonl("in.jsonl", [make_record("a"), "", "   ", "{oops", make_record("b")])
    raws = list(read_raw([str(path)]))
    assert [raw.line for raw in raws] == [1, 4, 5]
    assert raws[1].error is not None
    assert raws[1].error.line == 4
    assert raws[1].error.file == str(path)


def test_error_without_query_id_or_field_reads_file_line_rule(write_jsonl: JsonlWriter) -> None:
    path = write_jsonl("in.jsonl", ["{oops"])
    (raw,) = read_raw([str(path)])
    assert raw.error is not None
    assert str(raw.error).startswith(f"{path}:1: invalid JSON at column 2")


def test_crlf_line_endings_are_accepted(tmp_path: Path, make_record: RecordFactory) -> None:
    path = tmp_path / "crlf.jsonl"
    lines = [json.dumps(make_record(q), ensure_ascii=False) for q in ("a", "b")]
    path.write_bytes(b"".join(line.encode() + b"\r\n" for line in lines))
    raws = list(read_raw([str(path)]))
    assert [raw.error for raw in raws] == [None, None]
    assert [raw.value["query_id"] for raw in raws] == ["a", "b"]
    assert [raw.text for raw in raws] == lines


def test_raw_text_is_the_line_untouched(write_jsonl: JsonlWriter) -> None:
    line = '{ "query_id" : "q",  "zz": "日本語 \\u3042" }'
    path = write_jsonl("in.jsonl", [line])
    (raw,) = read_raw([str(path)])
    assert raw.text == line
    assert raw.value == {"query_id": "q", "zz": "日本語 あ"}


def test_inputs_are_read_in_order_with_their_own_line_numbers(
    write_jsonl: JsonlWriter, make_record: RecordFactory
) -> None:
    first = write_jsonl("a.jsonl", [make_record("a1"), make_record("a2")])
    second = write_jsonl("b.jsonl", [make_record("b1")])
    raws = list(read_raw([str(first), str(second)]))
    assert [(raw.file, raw.line, raw.value["query_id"]) for raw in raws] == [
        (str(first), 1, "a1"),
        (str(first), 2, "a2"),
        (str(second), 1, "b1"),
    ]


def test_missing_input_file_is_a_usage_error(tmp_path: Path) -> None:
    missing = tmp_path / "nope.jsonl"
    with pytest.raises(UsageError, match=r"cannot read .*nope\.jsonl"):
        list(read_raw([str(missing)]))


def test_unreadable_parquet_is_a_usage_error(tmp_path: Path) -> None:
    fake = tmp_path / "fake.parquet"
    fake.write_text("not parquet\n")
    with pytest.raises(UsageError, match="as Parquet"):
        list(read_raw([str(fake)]))


# --- Parquet ---------------------------------------------------------------------------------------


def test_is_parquet_goes_by_extension() -> None:
    assert is_parquet("x.parquet")
    assert is_parquet("dir/x.pq")
    assert not is_parquet("x.jsonl")
    assert not is_parquet("parquet")


def test_package_schema_columns() -> None:
    assert PACKAGE_SCHEMA.names == PACKAGE_COLUMNS
    assert PACKAGE_SCHEMA.field("package").type == pa.string()
    assert all(PACKAGE_SCHEMA.field(name).type == pa.int64() for name in PACKAGE_COLUMNS[2:])


def test_lane_dump_schema_top_level_columns() -> None:
    assert LANE_DUMP_SCHEMA.names == ["query_id", "context", "request", "lanes", "plan_lanes"]


def test_parquet_rows_are_read_with_nulls_dropped_and_row_numbers(tmp_path: Path, make_record: RecordFactory) -> None:
    rows = [make_record("a"), make_record("b")]
    rows[1]["lanes"]["passages"] = None
    path = tmp_path / "in.parquet"
    pq.write_table(pa.Table.from_pylist(rows, schema=LANE_DUMP_SCHEMA), path)
    raws = list(read_raw([str(path)], parquet_batch_rows=1))
    assert [(raw.line, raw.value["query_id"], raw.error) for raw in raws] == [(1, "a", None), (2, "b", None)]
    assert "passages" not in raws[1].value["lanes"]
    assert "communities" not in raws[0].value["lanes"]  # null = absent
    assert raws[0].value["lanes"]["passages"][0]["text"] == rows[0]["lanes"]["passages"][0]["text"]
    assert json.loads(raws[0].text) == raws[0].value


# --- AtomicFile ------------------------------------------------------------------------------------


def test_atomic_file_commit_moves_the_file_into_place(tmp_path: Path) -> None:
    target = tmp_path / "out.jsonl"
    with AtomicFile(str(target)) as out:
        out.handle.write("line\n")
        assert not target.exists()
        assert Path(out.write_path).parent == tmp_path
        out.commit()
    assert target.read_text() == "line\n"
    assert os.listdir(tmp_path) == ["out.jsonl"]


def test_atomic_file_without_commit_leaves_nothing(tmp_path: Path) -> None:
    target = tmp_path / "out.jsonl"
    with AtomicFile(str(target)) as out:
        out.handle.write("partial\n")
    assert os.listdir(tmp_path) == []


def test_atomic_file_failure_keeps_the_previous_destination(tmp_path: Path) -> None:
    target = tmp_path / "out.jsonl"
    target.write_text("previous\n")
    with pytest.raises(RuntimeError), AtomicFile(str(target)) as out:
        out.handle.write("partial\n")
        raise RuntimeError("boom")
    assert target.read_text() == "previous\n"
    assert os.listdir(tmp_path) == ["out.jsonl"]


def test_atomic_file_in_missing_folder_is_a_usage_error(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="does not exist"):
        AtomicFile(str(tmp_path / "no" / "out.jsonl"))


@given(
    st.lists(
        st.sampled_from([b"a", b"{}", b" ", b"\t", b"\r", b"\n", b"\r\n", b"\x0b", b"\x0c", b"\xff"]), max_size=60
    ),
    st.integers(1, 9),
)
def test_block_reading_gives_the_line_readers_numbers_and_bytes(pieces: list[bytes], block_size: int) -> None:
    data = b"".join(pieces)
    assert list(stream_lines(io.BytesIO(data), block_size)) == list(jsonl_lines(io.BytesIO(data)))


def test_a_line_longer_than_a_block_is_read_whole() -> None:
    data = b"x" * 10_000 + b"\r\n\n  \n" + b"y" * 5
    assert list(stream_lines(io.BytesIO(data), 64)) == [(1, b"x" * 10_000), (4, b"y" * 5)]
