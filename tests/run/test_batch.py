"""The engine-agnostic entry point: Arrow tables of lane-dump rows in, packages and rejects out."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from assembler.cli import main
from assembler.errors import InputError
from assembler.pipeline import assemble_batch
from assembler.run.batch import (
    JSON_LINE,
    REJECTED_SCHEMA,
    SOURCE_ERROR,
    assemble_table,
    file_tables,
    range_table,
    read_tables,
    record_texts,
    rejected_entries,
)
from assembler.run.local import convert, run_assembly
from assembler.run.options import RunOptions
from assembler.run.outputs import package_line
from assembler.run.schemas import LANE_DUMP_SCHEMA, PACKAGE_SCHEMA

if TYPE_CHECKING:
    from tests.conftest import JsonlWriter, RecordFactory

DATA = Path(__file__).resolve().parent.parent.parent / "data"
CONFORMANCE = DATA / "conformance" / "lanes.jsonl"
EXPECTED = DATA / "conformance" / "expected.jsonl"
SAMPLE = DATA / "sample" / "lanes.jsonl"


def package_bytes(packages: pa.Table) -> bytes:
    """A packages table as the JSON Lines output would hold it."""
    ids, texts = packages.column("query_id").to_pylist(), packages.column("package").to_pylist()
    return "".join(map(package_line, ids, texts)).encode("utf-8")


def lines_table(lines: list[bytes]) -> pa.Table:
    return pa.table({JSON_LINE: pa.array(lines, pa.binary())})


def test_json_lines_form_gives_the_conformance_bytes_and_summary_columns() -> None:
    (table,) = read_tables([str(CONFORMANCE)], 100)
    result = assemble_table(table)
    assert result.packages.schema == PACKAGE_SCHEMA
    assert package_bytes(result.packages) == EXPECTED.read_bytes()
    assert result.package_rows == [0, 1, 2, 3, 4]
    assert result.rejected.num_rows == 0 and result.rejected.schema == REJECTED_SCHEMA
    for row in result.packages.to_pylist():
        budget = json.loads(row["package"])["budget"]
        assert (row["items_used"], row["bytes_used"], row["tokens_used"]) == (
            budget["items_used"],
            budget["bytes_used"],
            budget["tokens_used"],
        )


def test_parquet_form_gives_the_same_packages(tmp_path: Path) -> None:
    parquet = tmp_path / "lanes.parquet"
    convert([str(SAMPLE)], str(parquet))
    nested = assemble_table(pq.read_table(parquet))
    (text,) = read_tables([str(SAMPLE)], 1000)
    assert nested.packages.equals(assemble_table(text).packages)
    assert (
        nested.batch.packages == assemble_batch(json.loads(line) for line in SAMPLE.read_text().splitlines()).packages
    )


def test_string_column_and_blank_rows_are_accepted() -> None:
    lines = CONFORMANCE.read_text(encoding="utf-8").splitlines()
    table = pa.table({JSON_LINE: pa.array([lines[0], "  ", None, lines[1]], pa.string())})
    result = assemble_table(table)
    assert result.package_rows == [0, 3]
    assert package_bytes(result.packages) == b"".join(EXPECTED.read_bytes().splitlines(keepends=True)[:2])


def test_rejected_rows_carry_the_errors_file_fields(make_record: RecordFactory, write_jsonl: JsonlWriter) -> None:
    bad = make_record("q2")
    bad["lanes"]["passages"][0]["score"] = "high"
    source = write_jsonl("in.jsonl", [make_record("q1"), b"{nope", bad, make_record("q1"), b"\xff"])
    (table,) = read_tables([str(source)], 10)
    result = assemble_table(table)
    assert result.package_rows == [0]
    assert result.rejected_rows == [1, 2, 3, 4]
    rows = result.rejected.to_pylist()
    texts = source.read_bytes().splitlines()
    assert [(row["file"], row["line"], row["query_id"], row["field"]) for row in rows] == [
        (str(source), 2, None, ""),
        (str(source), 3, "q2", "lanes.passages[0].score"),
        (str(source), 4, "q1", "query_id"),
        (str(source), 5, None, ""),
    ]
    assert [row["record"] for row in rows[:3]] == [text.decode() for text in texts[1:4]]
    assert rows[3]["record"] == "\ufffd" and "invalid UTF-8" in rows[3]["rule"]
    assert [error.line for _, error in rejected_entries(result.rejected)] == [2, 3, 4, 5]


def test_stop_raises_the_local_engines_error(make_record: RecordFactory, write_jsonl: JsonlWriter) -> None:
    bad = make_record("q2")
    bad["request"]["budget"] = {"max_items": 1.5}
    source = write_jsonl("in.jsonl", [make_record("q1"), bad])
    (table,) = read_tables([str(source)], 10)
    with pytest.raises(InputError) as direct:
        assemble_table(table, on_error="stop")
    with pytest.raises(InputError) as local:
        run_assembly([str(source)], str(source.parent / "out.jsonl"))
    assert str(direct.value) == str(local.value)
    assert "in.jsonl:2: query_id 'q2' field request.budget.max_items" in str(direct.value)


def test_parquet_rows_are_rejected_with_their_json_text(tmp_path: Path, make_record: RecordFactory) -> None:
    table = pa.Table.from_pylist([make_record("a"), {**make_record("b"), "context": None}])
    result = assemble_table(table)
    (row,) = result.rejected.to_pylist()
    assert (row["file"], row["line"], row["query_id"], row["field"]) == ("<memory>", 2, "b", "context")
    assert json.loads(row["record"])["query_id"] == "b" and "context" not in json.loads(row["record"])


def test_seen_carries_query_ids_across_batches() -> None:
    lines = CONFORMANCE.read_bytes().splitlines()
    seen: set[str] = set()
    first = assemble_table(lines_table(lines[:2]), seen=seen)
    second = assemble_table(lines_table(lines[1:3]), seen=seen)
    assert (len(first.package_rows), second.package_rows, second.rejected_rows) == (2, [1], [0])
    assert "duplicate query_id" in second.rejected.column("rule")[0].as_py()


def test_overrides_reach_every_package() -> None:
    (table,) = read_tables([str(SAMPLE)], 1000)
    result = assemble_table(table, overrides={"max_items": 2})
    assert max(result.packages.column("items_used").to_pylist()) <= 2


def test_read_tables_ends_a_chunk_at_max_bytes() -> None:
    """Records of many passages make smaller chunks: a chunk ends at the line that reaches the bound."""
    lines = [line for line in SAMPLE.read_bytes().splitlines() if line.strip()]
    bound = 3 * max(map(len, lines))
    tables = list(read_tables([str(SAMPLE), str(CONFORMANCE)], 1000, bound))
    assert len(tables) > 3
    for table in tables[:-1]:
        chunk = table.column(JSON_LINE).to_pylist()
        assert sum(map(len, chunk)) >= bound > sum(map(len, chunk[:-1]))  # closed by the line that reached it
    read = [line for table in tables for line in table.column(JSON_LINE).to_pylist()]
    assert read == [
        line
        for table in read_tables([str(SAMPLE), str(CONFORMANCE)], 1000)
        for line in table.column(JSON_LINE).to_pylist()
    ]


def test_read_tables_cuts_even_chunks_across_files(tmp_path: Path) -> None:
    tables = list(read_tables([str(CONFORMANCE), str(SAMPLE), str(CONFORMANCE)], 4))
    sizes = [table.num_rows for table in tables]
    assert sizes == [4] * 10 and sum(sizes) == 40
    files = [name for table in tables for name in table.column("source_file").to_pylist()]
    assert files == [str(CONFORMANCE)] * 5 + [str(SAMPLE)] * 30 + [str(CONFORMANCE)] * 5
    parquet = tmp_path / "lanes.parquet"
    convert([str(SAMPLE)], str(parquet))
    mixed = list(read_tables([str(CONFORMANCE), str(parquet)], 4))
    assert [table.num_rows for table in mixed] == [4, 1, 4, 4, 4, 4, 4, 4, 4, 2]
    assert mixed[2].column("source_line").to_pylist() == [1, 2, 3, 4]


def test_a_file_column_names_each_rows_input_and_leaves_the_chunks_as_they_are(tmp_path: Path) -> None:
    parquet = tmp_path / "lanes.parquet"
    convert([str(SAMPLE)], str(parquet))
    paths = [str(CONFORMANCE), str(SAMPLE), str(parquet), str(CONFORMANCE)]
    plain = list(read_tables(paths, 4, 20_000))
    tagged = list(read_tables(paths, 4, 20_000, file_column="index"))
    assert [table.drop_columns(["index"]) if "index" in table.column_names else table for table in tagged] == plain
    indices = [table.column("index").to_pylist() for table in tagged if JSON_LINE in table.column_names]
    assert sorted({index for chunk in indices for index in chunk}) == [0, 1, 3]
    assert all("index" not in table.column_names for table in tagged if JSON_LINE not in table.column_names)


def test_a_byte_range_gives_the_rows_the_whole_file_gives(tmp_path: Path) -> None:
    """From where a line starts to where a later one ends: the same rows, names and line numbers
    (blank lines and CRLF endings too) as the whole file gives."""
    path = tmp_path / "in.jsonl"
    path.write_bytes(b'{"a":1}\n\n  \n{"b":2}\r\n{"c":3}\n{"d":4}')
    (whole,) = read_tables([str(path)], 100)
    start, end = path.read_bytes().index(b"\n\n") + 1, len(path.read_bytes()) - len(b'{"d":4}')
    with path.open("rb", buffering=0) as raw:
        part = range_table(raw, "in.jsonl", start, end, first_line=2, max_record_bytes=100)
        last = range_table(raw, "in.jsonl", end, path.stat().st_size, first_line=6, max_record_bytes=100)
        empty = range_table(raw, "in.jsonl", 8, 12, first_line=2, max_record_bytes=100)
    expected = whole.slice(1, 2).drop_columns(["source_file"])
    assert part.drop_columns(["source_file"]) == expected
    assert part.column("source_file").to_pylist() == ["in.jsonl"] * 2
    assert last.column("source_line").to_pylist() == [6] and last.column(JSON_LINE).to_pylist() == [b'{"d":4}']
    assert empty.num_rows == 0 and empty.column_names == whole.column_names


def test_record_texts_follow_the_file(tmp_path: Path) -> None:
    with CONFORMANCE.open("rb") as stream:
        texts = [pair for table in file_tables("c", stream, parquet=False, rows=2) for pair in record_texts(table)]
    assert texts == list(enumerate(CONFORMANCE.read_text(encoding="utf-8").splitlines(), start=1))


def _big_rows(make_record: RecordFactory, count: int, text_bytes: int) -> list[dict[str, object]]:
    rows = []
    for index in range(count):
        row = make_record(f"q{index}")
        row["lanes"]["passages"][0]["text"] = "abcd" * (text_bytes // 4)
        rows.append(row)
    return rows


def test_parquet_chunks_end_at_chunk_bytes_of_decoded_rows(tmp_path: Path, make_record: RecordFactory) -> None:
    path = tmp_path / "big.parquet"
    rows = _big_rows(make_record, 64, 2**20)  # 64 rows of 1 MiB texts: a few hundred kB compressed
    pq.write_table(pa.Table.from_pylist(rows, schema=LANE_DUMP_SCHEMA), path)
    assert path.stat().st_size < 2**20
    tables = list(read_tables([str(path)], 256, 4 * 2**20))
    assert [table.num_rows for table in tables] == [4] * 16  # the row that reaches 4 MiB ends a chunk
    assert all(table.drop_columns(["source_file", "source_line"]).nbytes < 5 * 2**20 for table in tables)
    assert [line for table in tables for line in table.column("source_line").to_pylist()] == list(range(1, 65))
    assert [table.num_rows for table in read_tables([str(path)], 256)] == [64]  # rows only without max_bytes
    small = tmp_path / "small.parquet"
    pq.write_table(pa.Table.from_pylist([make_record(f"s{i}") for i in range(100)], schema=LANE_DUMP_SCHEMA), small)
    assert [table.num_rows for table in read_tables([str(small)], 30, 4 * 2**20)] == [30, 30, 30, 10]


def test_parquet_input_assembles_the_same_packages_however_it_is_chunked(
    tmp_path: Path, make_record: RecordFactory
) -> None:
    path = tmp_path / "in.parquet"
    rows = _big_rows(make_record, 12, 300_000)
    pq.write_table(pa.Table.from_pylist(rows, schema=LANE_DUMP_SCHEMA), path, row_group_size=5)
    outputs = []
    for chunk_bytes in (None, 2**20, 1):
        out = tmp_path / f"out-{chunk_bytes}.jsonl"
        run_assembly(str(path), str(out), RunOptions(chunk_bytes=chunk_bytes))
        outputs.append(out.read_bytes())
    assert outputs[0] == outputs[1] == outputs[2]
    assert len(outputs[0].splitlines()) == 12


def test_a_record_over_the_limit_is_a_table_of_its_own_in_the_refused_form(
    tmp_path: Path, make_record: RecordFactory
) -> None:
    lines = [json.dumps(make_record(f"q{index}")).encode() for index in range(5)]
    lines[2] = b'{"pad":"' + b"x" * 10_000 + b'"}'
    path = tmp_path / "in.jsonl"
    path.write_bytes(b"\n".join(lines) + b"\n")
    with path.open("rb") as stream:
        tables = list(file_tables("in.jsonl", stream, parquet=False, rows=100, max_record_bytes=5000))
    assert [table.column_names for table in tables] == [
        [JSON_LINE, "source_file", "source_line"],
        [SOURCE_ERROR, "source_file", "source_line"],
        [JSON_LINE, "source_file", "source_line"],
    ]
    result = assemble_table(tables[1])
    assert result.package_rows == [] and result.rejected_rows == [0]
    assert result.rejected.to_pylist() == [
        {
            "file": "in.jsonl",
            "line": 3,
            "query_id": None,
            "field": "",
            "rule": f"record is {len(lines[2])} bytes, over the limit of 5000 (--max-record-bytes)",
            "record": "",
        }
    ]
    assert list(record_texts(tables[1])) == [(3, "")]
    with pytest.raises(InputError, match=r"in\.jsonl:3: record is 10010 bytes"):
        assemble_table(tables[1], on_error="stop")


def test_a_parquet_json_line_column_is_refused_by_assemble_and_convert_alike(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "lines.parquet"
    pq.write_table(pa.table({JSON_LINE: CONFORMANCE.read_bytes().splitlines()}), path)
    message = (
        f"assembler: error: {path}: column 'json_line' is reserved for the engine's input tables: a Parquet "
        "lane dump holds the lane-dump columns (query_id, context, request, lanes, plan_lanes)\n"
    )
    for argv in (["assemble", str(path), "-o", str(tmp_path / "out.jsonl")], ["convert", str(path), "-o", "x.jsonl"]):
        for mode in ("stop", "skip"):
            capsys.readouterr()
            assert main([*argv, "--on-error", mode, "--errors", str(tmp_path / "e.jsonl")]) == 2
            assert capsys.readouterr().err == message
    assert sorted(path.name for path in tmp_path.iterdir()) == ["lines.parquet"]
