"""The columnar reader against the record path: the same records accepted, the same frames, the
same packages and the same errors, on the committed data and on random valid and invalid lines."""

from __future__ import annotations

import copy
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from polars.testing import assert_frame_equal

from assembler.contract.jsontext import escape_string, format_f32, format_f64, json_text, writer_agrees
from assembler.errors import RecordError
from assembler.pipeline import assemble_records
from assembler.run.batch import JSON_LINE, assemble_table
from assembler.run.io import RawRecord, line_record, parquet_record, table_rows
from assembler.run.records import iter_records
from assembler.run.schemas import LANE_DUMP_SCHEMA
from assembler.stages import lanes_columnar
from assembler.stages.lanes import build_batch, parse_record
from assembler.stages.lanes_columnar import read_lane_lines, read_lane_rows
from assembler.stages.plan import lanes_plan_text
from tests.oracle.pools import generate_records

ROOT = Path(__file__).resolve().parents[2]
DATA_FILES = sorted(
    [
        ROOT / "data/conformance/lanes.jsonl",
        ROOT / "data/sample/lanes.jsonl",
        *(ROOT / "data/eval").glob("*/lanes.jsonl"),
    ]
)
SAMPLE_LINES = [line for line in (ROOT / "data/sample/lanes.jsonl").read_bytes().splitlines() if line.strip()]


def _lines(path: Path) -> list[bytes]:
    return [line for line in path.read_bytes().splitlines() if line.strip()]


def assert_taken_lines_match_the_record_path(lines: Sequence[bytes]) -> None:
    """Every line the columnar reader takes is accepted by the record path, with equal frames."""
    names = list(range(1, len(lines) + 1))
    fast = read_lane_lines(lines, sources=["f"] * len(lines), line_numbers=names)
    records = [parse_record(json.loads(line), file="f", line=i + 1) for i, line in enumerate(lines) if fast.taken[i]]
    slow = build_batch(records)
    assert_frame_equal(fast.batch.candidates, slow.candidates)
    assert_frame_equal(fast.batch.origins, slow.origins)
    assert_frame_equal(fast.batch.citations, slow.citations)
    assert len(fast.batch.records) == len(records)
    for mine, theirs in zip(fast.batch.records, records, strict=True):
        for name in (
            "query_id",
            "context",
            "request",
            "limits",
            "present_lanes",
            "search_limit_cuts",
            "source",
            "line",
        ):
            assert getattr(mine, name) == getattr(theirs, name), name
        assert lanes_plan_text(mine) == lanes_plan_text(theirs)


def record_path(lines: Sequence[bytes]) -> tuple[list[str], list[tuple[int, str, str]]]:
    """Packages and errors as the record path alone makes them (the reference for the columnar one)."""
    rejected: list[tuple[int, str, str]] = []

    def reject(raw: RawRecord, error: RecordError) -> None:
        rejected.append((raw.line, str(error), raw.text))

    raws = (line_record("<memory>", i + 1, line) for i, line in enumerate(lines))
    records = [record for _, record in iter_records(raws, reject)]
    return assemble_records(records).packages, rejected


def columnar(lines: Sequence[bytes]) -> tuple[list[str], list[tuple[int, str, str]]]:
    result = assemble_table(pa.table({JSON_LINE: pa.array(list(lines), pa.binary())}))
    errors = [
        (
            row["line"],
            str(RecordError(row["file"], row["line"], row["query_id"], row["field"], row["rule"])),
            row["record"],
        )
        for row in result.rejected.to_pylist()
    ]
    return result.batch.packages, errors


@pytest.mark.parametrize("path", DATA_FILES, ids=lambda path: path.parent.name)
def test_committed_lane_dumps_are_all_taken_with_the_record_paths_frames(path: Path) -> None:
    lines = _lines(path)
    assert read_lane_lines(lines, sources=["f"] * len(lines), line_numbers=list(range(len(lines)))).taken.all()
    assert_taken_lines_match_the_record_path(lines)


@pytest.mark.parametrize("profile", ["typical", "worst"])
def test_generated_pools_are_taken_with_the_record_paths_frames(profile: str) -> None:
    lines = [
        json.dumps(record).encode()
        for record in generate_records(12 if profile == "worst" else 60, seed=3, profile=profile)
    ]
    assert_taken_lines_match_the_record_path(lines)
    assert columnar(lines) == record_path(lines)


# --- lines the reader must hand back to the record path ---------------------------------------------

_BASE = next(
    record
    for record in map(json.loads, SAMPLE_LINES)
    if record["lanes"].get("passages") and record["lanes"].get("graph_activate")
)


def _with(path: Sequence[str | int], value: Any) -> bytes:
    record = copy.deepcopy(_BASE)
    target = record
    for step in path[:-1]:
        target = target[step]
    target[path[-1]] = value
    return json.dumps(record, ensure_ascii=False).encode()


HANDED_BACK = {
    "minus zero integer in a float field": _with(["lanes", "graph_activate", 0, "strength"], 0).replace(
        b'"strength": 0,', b'"strength": -0,'
    ),
    "byte-order mark": b"\xef\xbb\xbf" + SAMPLE_LINES[1],
    "two objects on one line": SAMPLE_LINES[2] + b" " + SAMPLE_LINES[3],
    "unknown key": _with(["extra"], 1),
    "unknown lane": _with(["lanes", "graph_qurey"], []),
    "origins as one string": _with(["request", "origins"], "Ada"),
    "null include_communities": _with(["request", "include_communities"], None),
    "NaN score": _with(["lanes", "passages", 0, "score"], float("nan")),
    "infinite weight": _with(["lanes", "graph_activate", 0, "association", "weight"], float("inf")),
    "score past f32": _with(["lanes", "passages", 0, "score"], 1e39),
    "fraction where an integer is required": _with(["lanes", "passages", 0, "paragraph"], 1.0),
    "negative paragraph": _with(["lanes", "passages", 0, "paragraph"], -1),
    "null passage": _with(["lanes", "passages", 0], None),
    "missing text": _with(["lanes", "passages", 0, "text"], None),
    "repeated key": b'{"query_id": "x", ' + _with(["query_id"], "y")[1:],
    "lone surrogate": json.dumps({**_BASE, "context": "\ud800"}).encode(),
    "too many origins": _with(["request", "origins"], ["o"] * 1001),
    "deep nesting": _with(["extra"], json.loads("[" * 200 + "]" * 200)),
    "a million levels in a known field": b'{"query_id":' + b"[" * 1_000_000 + b"]" * 1_000_000 + b"}",
    "not an object": b"[1, 2]",
    "null (the reader crashes on input that begins with it)": b"null",
    "null after spaces": b"  null",
    "an object then null": SAMPLE_LINES[7] + b" null",
    "invalid UTF-8": _with(["context"], "\x00marker").replace(b"\\u0000marker", b"\xff"),
}


@pytest.mark.parametrize("line", HANDED_BACK.values(), ids=HANDED_BACK.keys())
def test_lines_the_reader_must_not_take_go_to_the_record_path(line: bytes) -> None:
    lines = [SAMPLE_LINES[10], line, SAMPLE_LINES[11]]
    fast = read_lane_lines(lines, sources=["f"] * 3, line_numbers=[1, 2, 3])
    assert fast.taken.tolist() == [True, False, True]
    assert columnar(lines) == record_path(lines)


def test_include_communities_absent_is_taken_as_false() -> None:
    record = copy.deepcopy(_BASE)
    record["request"].pop("include_communities", None)
    lines = [json.dumps(record).encode()]
    assert read_lane_lines(lines, sources=["f"], line_numbers=[1]).taken.all()
    assert_taken_lines_match_the_record_path(lines)


def test_a_repeated_query_id_is_refused_wherever_the_two_lines_were_read() -> None:
    bad = _with(["extra"], 1)  # the record path reads this one; the reader takes the other
    lines = [SAMPLE_LINES[0], bad, SAMPLE_LINES[0]]
    assert columnar(lines) == record_path(lines)


# --- random lines: mutations of real records --------------------------------------------------------

_VALUES = st.sampled_from(
    [None, 0, -1, -0.0, 1.0, 2.5, 1e39, 2**32, 2**64, "", 'x\u2028"\\\n\x01', [], {}, [None], {"x": 1}, True]
)


def _paths(value: Any, prefix: tuple[str | int, ...] = ()) -> list[tuple[str | int, ...]]:
    found = [prefix] if prefix else []
    if isinstance(value, dict):
        for key, item in value.items():
            found += _paths(item, (*prefix, key))
    elif isinstance(value, list):
        for index, item in enumerate(value[:3]):
            found += _paths(item, (*prefix, index))
    return found


@st.composite
def mutated_lines(draw: st.DrawFn) -> bytes:
    record = json.loads(draw(st.sampled_from(SAMPLE_LINES)))
    for _ in range(draw(st.integers(0, 2))):
        paths = _paths(record)
        path = draw(st.sampled_from(paths))
        target = record
        for step in path[:-1]:
            target = target[step]
        if draw(st.booleans()) and isinstance(target, dict):
            target.pop(path[-1], None)
        else:
            target[path[-1]] = draw(_VALUES)
    return json.dumps(record, ensure_ascii=draw(st.booleans())).encode()


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(mutated_lines(), min_size=1, max_size=6))
def test_random_valid_and_invalid_lines_get_the_record_paths_packages_and_errors(lines: list[bytes]) -> None:
    assert columnar(lines) == record_path(lines)
    assert_taken_lines_match_the_record_path(lines)


# --- numbers and strings written by Polars' JSON writer are the contract's --------------------------


FLOAT_KINDS = {
    "f64": (np.uint64, np.float64, pl.Float64, format_f64),
    "f32": (np.uint32, np.float32, pl.Float32, format_f32),
}


@pytest.mark.parametrize("kind", FLOAT_KINDS)
@settings(max_examples=200, deadline=None)
@given(bits=st.lists(st.integers(0, 2**64 - 1), min_size=1, max_size=50))
def test_json_text_writes_float_bit_patterns_as_the_contract_does(kind: str, bits: list[int]) -> None:
    unsigned, floating, dtype, formatter = FLOAT_KINDS[kind]
    values = np.array([bit % (2 ** (8 * np.dtype(unsigned).itemsize)) for bit in bits], dtype=unsigned).view(floating)
    values = values[np.isfinite(values)]
    written = pl.select(json_text(pl.lit(pl.Series(values, dtype=dtype)))).to_series().to_list()
    assert written == [formatter(float(value)) for value in values]


@given(st.lists(st.text(), min_size=1, max_size=20))
def test_json_text_escapes_strings_as_the_contract_does(texts: list[str]) -> None:
    texts = [text for text in texts if not any("\ud800" <= ch <= "\udfff" for ch in text)]
    if texts:
        written = pl.select(json_text(pl.lit(pl.Series(texts, dtype=pl.String)))).to_series().to_list()
        assert written == [escape_string(text) for text in texts]


def test_the_installed_polars_writes_json_as_the_contract_does() -> None:
    assert writer_agrees()


def test_a_polars_that_writes_json_otherwise_sends_every_line_to_the_record_path(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(lanes_columnar, "writer_agrees", lambda: False)
    lines = SAMPLE_LINES[:5]
    assert not read_lane_lines(lines, sources=["f"] * 5, line_numbers=[1, 2, 3, 4, 5]).taken.any()
    assert columnar(lines) == record_path(lines)


# --- the Parquet form: rows of the lane-dump schema, null meaning absent -----------------------------


def parquet_table(lines: Sequence[bytes]) -> pa.Table:
    """Lane-dump lines as the Parquet form's table (what ``assembler convert`` writes)."""
    return pa.Table.from_pylist([json.loads(line) for line in lines], schema=LANE_DUMP_SCHEMA)


def parquet_record_path(table: pa.Table) -> tuple[list[str], list[tuple[int, str]]]:
    rejected: list[tuple[int, str]] = []

    def reject(raw: RawRecord, error: RecordError) -> None:
        rejected.append((raw.line, str(error)))

    raws = (parquet_record("<memory>", i + 1, value, problem) for i, (value, problem) in enumerate(table_rows(table)))
    records = [record for _, record in iter_records(raws, reject)]
    return assemble_records(records).packages, rejected


def parquet_columnar(table: pa.Table) -> tuple[list[str], list[tuple[int, str]]]:
    result = assemble_table(table)
    errors = [
        (row["line"], str(RecordError(row["file"], row["line"], row["query_id"], row["field"], row["rule"])))
        for row in result.rejected.to_pylist()
    ]
    return result.batch.packages, errors


@pytest.mark.parametrize("path", DATA_FILES, ids=lambda path: path.parent.name)
def test_parquet_rows_of_the_committed_dumps_are_all_taken(path: Path) -> None:
    table = parquet_table(_lines(path))
    n = table.num_rows
    assert read_lane_rows(table, sources=["f"] * n, line_numbers=list(range(1, n + 1))).taken.all()
    assert parquet_columnar(table) == parquet_record_path(table)


def test_a_null_include_communities_in_parquet_is_absent_and_taken() -> None:
    record = copy.deepcopy(_BASE)
    record["request"]["include_communities"] = None
    table = parquet_table([json.dumps(record).encode()])
    assert read_lane_rows(table, sources=["f"], line_numbers=[1]).taken.all()
    assert parquet_columnar(table) == parquet_record_path(table)


def test_a_table_of_another_schema_goes_to_the_record_path() -> None:
    table = parquet_table(SAMPLE_LINES[:3]).drop_columns(["plan_lanes"])
    assert not read_lane_rows(table, sources=["f"] * 3, line_numbers=[1, 2, 3]).taken.any()
    assert parquet_columnar(table) == parquet_record_path(table)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(mutated_lines(), min_size=1, max_size=6))
def test_random_parquet_rows_get_the_record_paths_packages_and_errors(lines: list[bytes]) -> None:
    try:
        table = parquet_table(lines)
    except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError, TypeError, ValueError):
        return  # not representable in the Parquet form
    assert parquet_columnar(table) == parquet_record_path(table)


COMMUNITY_HITS = [
    {"community": "L0-1", "score": 0.5, "text": "a summary", "paragraph": 0},
    {"community": "L0-2", "score": 0.25, "text": 'with "quotes"\n', "paragraph": 3, "level": 1, "parent": "L1-0"},
    {"community": "L1-0", "score": 1e-7, "text": "日本語", "paragraph": 1, "concept_count": 12, "members": []},
    {
        "community": "L0-3",
        "score": 0.125,
        "text": "members",
        "paragraph": 2,
        "members": [{"name": "Ada", "strength": 0.75}, {"name": "Bob", "strength": 1e16}],
        "members_truncated": True,
    },
    {"community": "L0-4", "score": 2.0, "text": "t", "paragraph": 4, "members_truncated": False, "level": None},
]


@pytest.mark.parametrize("limit", [5, 2])
def test_community_hits_with_every_optional_field_are_taken_with_the_record_paths_frames(limit: int) -> None:
    record = copy.deepcopy(_BASE)
    record["request"]["include_communities"] = True
    record["request"]["search_limit"] = limit
    record["lanes"]["communities"] = COMMUNITY_HITS
    lines = [json.dumps(record, ensure_ascii=False).encode()]
    assert read_lane_lines(lines, sources=["f"], line_numbers=[1]).taken.all()
    assert_taken_lines_match_the_record_path(lines)
    assert columnar(lines) == record_path(lines)


def test_column_checks_skip_only_kinds_that_cannot_break_a_rule() -> None:
    """Strings and integers alone are the reader's to check; a float, a list (null elements) or a
    required field can break a rule of the column checks, and so can anything holding one."""
    from assembler.contract import wire

    checked = lanes_columnar._checked
    assert not checked("str") and not checked("u32") and not checked("bool")
    assert checked("f64") and checked("f32")
    assert checked(wire.ListOf("str"))
    assert checked(wire.ASSOCIATION) and checked(wire.PASSAGE_HIT) and checked(wire.CITATION_ENTRY)
    assert checked(lanes_columnar.LANE_DUMP_FIELDS)
