"""Readers and writers: raw record errors (bytes, JSON), positions, Parquet schemas, atomic output."""

from __future__ import annotations

import bz2
import gzip
import io
import json
import lzma
import os
import re
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given
from hypothesis import strategies as st

from assembler.errors import UsageError
from assembler.run.atomic import AtomicFile
from assembler.run.io import (
    Oversized,
    check_parquet_columns,
    is_parquet,
    jsonl_lines,
    open_input,
    parquet_pieces,
    read_input,
    read_raw,
    stream_lines,
)
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


# --- records over the size limit -------------------------------------------------------------------


def _limited(data: bytes, limit: int) -> list[tuple[int, bytes | Oversized]]:
    """What :func:`stream_lines` must give with ``max_bytes=limit``: the line reader's lines, each
    longer than the limit (counted without ``\n`` or ``\r\n``) replaced by its size."""
    lines = data.split(b"\n")
    if lines[-1] == b"":
        lines.pop()
    found: list[tuple[int, bytes | Oversized]] = []
    for number, raw in enumerate(lines, start=1):
        stripped = raw.rstrip(b"\r")
        if not stripped.strip():
            continue
        size = len(raw) - raw.endswith(b"\r")
        found.append((number, Oversized(size, limit) if size > limit else stripped))
    return found


@given(
    st.lists(
        st.sampled_from([b"a", b"{}" * 7, b" ", b"\t", b"\r", b"\n", b"\r\n", b"\xff", b"x" * 30, b"  " * 9]),
        max_size=60,
    ),
    st.integers(1, 9),
    st.integers(0, 40),
)
def test_a_line_over_the_limit_comes_as_its_size_with_the_line_readers_numbers(
    pieces: list[bytes], block_size: int, limit: int
) -> None:
    data = b"".join(pieces)
    assert list(stream_lines(io.BytesIO(data), block_size, max_bytes=limit)) == _limited(data, limit)
    assert [(number, raw) for number, raw in _limited(data, len(data))] == list(jsonl_lines(io.BytesIO(data)))


def test_an_over_long_line_is_skipped_to_its_newline_without_being_kept() -> None:
    data = b'{"a":1}\n' + b"z" * 5000 + b"\r\n" + b" " * 5000 + b"\n" + b'{"b":2}\n' + b"q" * 300
    got = list(stream_lines(io.BytesIO(data), 64, max_bytes=100))
    assert got == [(1, b'{"a":1}'), (2, Oversized(5000, 100)), (4, b'{"b":2}'), (5, Oversized(300, 100))]
    assert got[1][1].rule == "record is 5000 bytes, over the limit of 100 (--max-record-bytes)"  # type: ignore[union-attr]


class _Endless(io.RawIOBase):
    """``size`` bytes of ``fill`` and no newline, made as they are read (a pipe that never ends a line)."""

    def __init__(self, size: int, fill: bytes = b"a") -> None:
        super().__init__()
        self.left = size
        self.block = fill * (1 << 20)

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: bytearray | memoryview) -> int:  # type: ignore[override]
        count = min(len(buffer), self.left, len(self.block))
        buffer[:count] = self.block[:count]
        self.left -= count
        return count


def test_a_stream_without_a_newline_is_read_in_memory_bounded_by_the_limit() -> None:
    import tracemalloc

    tracemalloc.start()
    try:
        got = list(stream_lines(io.BufferedReader(_Endless(300 * 2**20)), max_bytes=8 * 2**20))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert got == [(1, Oversized(300 * 2**20, 8 * 2**20))]
    assert peak < 24 * 2**20, peak  # the limit, a block and their join: not the 300 MiB line


def test_read_raw_gives_a_line_over_max_record_bytes_as_a_record_error_with_no_text(
    write_jsonl: JsonlWriter, make_record: RecordFactory
) -> None:
    big = make_record("big")
    big["lanes"]["passages"][0]["text"] = "x" * 5000
    path = write_jsonl("in.jsonl", [make_record("a"), big, make_record("b")])
    raws = list(read_raw([str(path)], max_record_bytes=4000))
    assert [raw.error is None for raw in raws] == [True, False, True]
    error = raws[1].error
    assert error is not None and (error.line, error.query_id, error.field) == (2, None, "")
    assert error.rule.startswith("record is ")
    assert error.rule.endswith(" bytes, over the limit of 4000 (--max-record-bytes)")
    assert raws[1].text == "" and raws[1].value is None
    with pytest.raises(UsageError, match="max_record_bytes must be at least 1, got 0"):
        list(read_raw([str(path)], max_record_bytes=0))


def test_parquet_rows_over_the_limit_come_as_oversized_between_the_others(
    tmp_path: Path, make_record: RecordFactory
) -> None:
    rows = [make_record(f"q{index}") for index in range(40)]
    for index in (3, 20, 21):
        rows[index]["lanes"]["passages"][0]["text"] = "x" * 100_000
    path = tmp_path / "in.parquet"
    pq.write_table(pa.Table.from_pylist(rows, schema=LANE_DUMP_SCHEMA), path)
    pieces = list(parquet_pieces(str(path), pq.ParquetFile(path), max_record_bytes=50_000))
    sizes = [piece.size if isinstance(piece, Oversized) else piece.num_rows for piece in pieces]
    assert [isinstance(piece, Oversized) for piece in pieces] == [False, True, False, False, True, True, False, False]
    assert sum(1 if isinstance(piece, Oversized) else piece.num_rows for piece in pieces) == 40
    assert all(size > 100_000 for piece, size in zip(pieces, sizes, strict=True) if isinstance(piece, Oversized))
    raws = list(read_raw([str(path)], max_record_bytes=50_000))
    refused = [(raw.line, raw.text) for raw in raws if raw.error is not None]
    assert refused == [(4, ""), (21, ""), (22, "")]
    assert raws[3].error is not None and "bytes decoded, over the limit of 50000" in raws[3].error.rule


# --- compressed and other inputs -------------------------------------------------------------------


def _lane_lines() -> bytes:
    return (Path(__file__).resolve().parents[2] / "data" / "conformance" / "lanes.jsonl").read_bytes()


@pytest.mark.parametrize(
    "compress",
    [
        pytest.param(gzip.compress, id="gzip"),
        pytest.param(lambda data: gzip.compress(data[:999]) + gzip.compress(data[999:]), id="gzip-two-members"),
        pytest.param(lambda data: pa.compress(data, codec="zstd", asbytes=True), id="zstd"),
        pytest.param(
            lambda data: (
                pa.compress(data[:500], codec="zstd", asbytes=True)
                + pa.compress(data[500:], codec="zstd", asbytes=True)
            ),
            id="zstd-two-frames",
        ),
    ],
)
def test_gzip_and_zstd_inputs_are_read_by_their_magic_bytes_whatever_their_name(
    tmp_path: Path, compress: Callable[[bytes], bytes]
) -> None:
    data = _lane_lines()
    path = tmp_path / "in.jsonl"  # no .gz: the bytes say it
    path.write_bytes(compress(data))
    with open_input(str(path)) as stream:
        assert stream.read() == data
        assert stream.compression in ("gzip", "zstd")
    plain = [(raw.line, raw.text) for raw in read_raw([str(_lane_path())])]
    assert [(raw.line, raw.text) for raw in read_raw([str(path)])] == plain
    assert read_input(path) == data


def _lane_path() -> Path:
    return Path(__file__).resolve().parents[2] / "data" / "conformance" / "lanes.jsonl"


def _zip(data: bytes) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("lanes.jsonl", data)
    return buffer.getvalue()


def _parquet_bytes(data: bytes) -> bytes:
    buffer = io.BytesIO()
    pq.write_table(pa.table({"x": [1, 2]}), buffer)
    return buffer.getvalue()


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (_parquet_bytes, "is a Parquet file, not JSON Lines (name it .parquet)"),
        (lzma.compress, "is xz-compressed: only gzip and zstd are read"),
        (bz2.compress, "is bzip2-compressed: only gzip and zstd are read"),
        (_zip, "is a zip archive: only gzip and zstd are read"),
        (lambda data: b"\0" * 100_000, "looks binary (a NUL byte in its first 64 KiB): it is not JSON Lines"),
        (lambda data: b"\x7fELF\x02\x01\x01\x00" + data, "looks binary"),
        (lambda data: gzip.compress(b"\0" * 1000), "looks binary once gzip-decompressed"),
        (lambda data: gzip.compress(data)[:40], "cannot read .*in.jsonl: the gzip data is corrupt"),
    ],
    ids=["parquet", "xz", "bzip2", "zip", "nul", "elf", "gzip-of-binary", "truncated-gzip"],
)
def test_an_input_that_is_not_json_lines_is_named_for_what_it_is(
    tmp_path: Path, make: Callable[[bytes], bytes], message: str
) -> None:
    path = tmp_path / "in.jsonl"
    path.write_bytes(make(_lane_lines()))
    for read in (lambda: list(read_raw([str(path)])), lambda: read_input(path)):
        with pytest.raises(UsageError, match=re.escape(message) if "*" not in message else message):
            read()


def _records_of_lane_lines() -> list[dict[str, object]]:
    return [json.loads(line) for line in _lane_lines().splitlines()]


def _every_json_lines_reader(path: Path) -> list[Callable[[], object]]:
    """Reading ``path`` as each JSON Lines reader does: records, the local engine's tables, a file read whole."""
    from assembler.run.batch import read_tables

    return [lambda: list(read_raw([str(path)])), lambda: list(read_tables([str(path)], 64)), lambda: read_input(path)]


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda rows: json.dumps(rows), "in.jsonl:1: not JSON Lines: a JSON array; the input holds one JSON object"),
        (lambda rows: "\n" + json.dumps(rows, indent=2), "in.jsonl:2: not JSON Lines: a JSON array;"),
        (
            lambda rows: "".join(json.dumps(row, indent=2) + "\n" for row in rows),
            "in.jsonl:1: not JSON Lines: an object split over lines? (the line is a lone '{', as pretty-printed JSON "
            "writes it); the input holds one JSON object per line",
        ),
        (lambda rows: gzip.compress(json.dumps(rows).encode()), "in.jsonl:1: not JSON Lines: a JSON array"),
    ],
    ids=["array", "pretty-array", "pretty-objects", "gzipped-array"],
)
def test_a_json_document_given_as_json_lines_is_refused_saying_the_format_is_one_object_a_line(
    tmp_path: Path, make: Callable[[list[dict[str, object]]], str | bytes], message: str
) -> None:
    path = tmp_path / "in.jsonl"
    made = make(_records_of_lane_lines())
    path.write_bytes(made.encode() if isinstance(made, str) else made)
    for read in _every_json_lines_reader(path):
        with pytest.raises(UsageError, match=re.escape(message)):
            read()


def test_a_folder_given_as_a_lane_dump_says_to_give_a_file_as_only_the_ray_engine_reads_folders(
    tmp_path: Path,
) -> None:
    from assembler.run.ray import list_inputs  # imports Ray only when a run starts

    for folder in (tmp_path / "dump", tmp_path / "dump.parquet"):
        (folder / "part").mkdir(parents=True)
        (folder / "part" / "a.jsonl").write_bytes(_lane_lines())
        message = (
            f"{folder} is a directory: give a JSON Lines or Parquet file "
            "(only assemble --engine ray reads a folder, as the files in it)"
        )
        for read in _every_json_lines_reader(folder)[:2]:
            with pytest.raises(UsageError, match=re.escape(message)):
                read()
        assert [file.name for file in list_inputs([str(folder)])] == [str(folder / "part" / "a.jsonl")]


def test_a_corrupt_stream_past_the_first_block_is_a_usage_error_naming_the_file(tmp_path: Path) -> None:
    data = b"".join(_lane_lines() for _ in range(200))  # about 1.3 MB: past the first 64 KiB read
    path = tmp_path / "in.jsonl"
    path.write_bytes(gzip.compress(data)[:-200])
    with pytest.raises(UsageError, match=r"cannot read .*in\.jsonl: the gzip data is corrupt"):
        list(read_raw([str(path)]))


def test_a_compressed_file_read_whole_is_limited_in_decompressed_bytes(tmp_path: Path) -> None:
    path = tmp_path / "eval.jsonl"
    path.write_bytes(gzip.compress(b" " * 10_000))
    assert read_input(path, limit=10_000) == b" " * 10_000
    with pytest.raises(UsageError, match=r"decompresses to more than 9999 bytes"):
        read_input(path, limit=9999)
    plain = tmp_path / "plain.jsonl"
    plain.write_bytes(b" " * 10_000)
    assert read_input(plain, limit=10) == b" " * 10_000  # a plain file is its own size


def test_a_parquet_lane_dump_with_a_reserved_column_is_refused_whole(tmp_path: Path) -> None:
    for name in ("json_line", "source_file", "source_line", "source_error"):
        with pytest.raises(UsageError, match=f"column '{name}' is reserved"):
            check_parquet_columns(["query_id", name], "in.parquet")
    with pytest.raises(UsageError, match="appears 2 times"):
        check_parquet_columns(["query_id", "query_id"], "in.parquet")


def test_the_ray_engine_refuses_compressed_json_lines_and_reserved_parquet_columns_when_it_plans(
    tmp_path: Path,
) -> None:
    from assembler.run.ray import list_inputs  # imports Ray only when a run starts

    packed = tmp_path / "in.jsonl.gz"
    packed.write_bytes(gzip.compress(_lane_lines()))
    with pytest.raises(UsageError, match=r"in\.jsonl\.gz is gzip-compressed: the Ray engine splits JSON Lines"):
        list_inputs([str(packed)])
    lines = tmp_path / "lines.parquet"
    pq.write_table(pa.table({"json_line": _lane_lines().splitlines()}), lines)
    with pytest.raises(UsageError, match="column 'json_line' is reserved"):
        list_inputs([str(lines)])
    assert [file.name for file in list_inputs([str(_lane_path())])] == [str(_lane_path())]
