"""Hostile records: whatever one record holds, it is that record's error, never the run's.

Each case of the hardening issue has its own test; then Hypothesis feeds random bytes, random
JSON and mutated valid records (from the conformance and sample lane dumps) through every reader
(JSON Lines file, standard input, Parquet) in both modes and checks the run's invariants: only
``InputError``/``UsageError`` escape (exit 2, one line, no traceback), every input line is
accounted for exactly once (a package or an errors-file line), and the packages of good records
are byte-identical to assembling them alone.
"""

from __future__ import annotations

import datetime
import decimal
import gzip
import io
import json
import os
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from assembler.cli import main
from assembler.contract.wire import ShapeError, check_number
from assembler.errors import InputError, RecordError, shown
from assembler.run import records as records_module
from assembler.run.batch import JSON_LINE, assemble_table
from assembler.run.io import line_record, nesting_depth, parse_json, read_raw
from assembler.run.records import iter_records
from assembler.run.schemas import LANE_DUMP_SCHEMA
from assembler.stages import lanes as lanes_module

ROOT = Path(__file__).resolve().parents[2]

DATA = ROOT / "data"
GOOD_LINES = [
    line.encode("utf-8")
    for name in ("conformance", "sample")
    for line in (DATA / name / "lanes.jsonl").read_text(encoding="utf-8").splitlines()
    if line.strip()
]
GOOD_IDS = {json.loads(line)["query_id"] for line in GOOD_LINES}
FUZZ = settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


# --- running the command ------------------------------------------------------------------------


class Run:
    """One ``assembler assemble`` run: exit status, stderr, packages (lines) and errors (dicts)."""

    def __init__(self, status: int, err: str, packages: list[str], errors: list[dict[str, Any]]) -> None:
        self.status = status
        self.err = err
        self.packages = packages
        self.errors = errors


def assemble(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    source: str,
    mode: str = "skip",
    *extra: str,
) -> Run:
    """Run the command line on ``source`` (a path or ``-``) and read what it left."""
    out, errs = tmp_path / "out.jsonl", tmp_path / "errors.jsonl"
    for path in (out, errs):
        path.unlink(missing_ok=True)
    capsys.readouterr()
    argv = ["assemble", source, "-o", str(out), "-q", "--on-error", mode, "--workers", "1", *extra]
    if mode == "skip":
        argv += ["--errors", str(errs)]
    status = main(argv)
    err = capsys.readouterr().err
    packages = _lines(out.read_text(encoding="utf-8")) if out.exists() else []
    errors = [json.loads(line) for line in _lines(errs.read_bytes().decode("utf-8"))] if errs.exists() else []
    return Run(status, err, packages, errors)


def _lines(text: str) -> list[str]:
    """JSON Lines split at newlines only: a package may hold U+0085 or U+2028 raw (JSON allows
    them, and serde writes them so), which ``str.splitlines`` would split at."""
    return text.split("\n")[:-1] if text else []


def write_lines(path: Path, lines: Sequence[bytes]) -> Path:
    path.write_bytes(b"".join(line + b"\n" for line in lines))
    return path


_ALONE: dict[bytes, str] = {}


def alone(tmp_path: Path, capsys: pytest.CaptureFixture[str], line: bytes) -> str:
    """The package line of one good record assembled by itself (cached)."""
    if line not in _ALONE:
        run = assemble(tmp_path, capsys, str(write_lines(tmp_path / "alone.jsonl", [line])))
        assert run.status == 0 and len(run.packages) == 1, run.err
        _ALONE[line] = run.packages[0]
    return _ALONE[line]


def assert_skip_invariants(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], lines: Sequence[bytes], run: Run, good: set[bytes]
) -> None:
    """Exit 0, every line once (package or error, in order), good records' packages as alone."""
    assert run.status == 0, run.err
    assert "Traceback" not in run.err
    numbered = [(number, line) for number, line in enumerate(lines, start=1) if line.strip()]
    rejected = [error["line"] for error in run.errors]
    assert len(rejected) == len(set(rejected)), "a line reported twice"
    assert set(rejected) <= {number for number, _ in numbered}
    kept = [line for number, line in numbered if number not in set(rejected)]
    assert len(kept) == len(run.packages), "every line is a package or an error line"
    for line, package in zip(kept, run.packages, strict=True):
        if line in good:
            assert package == alone(tmp_path, capsys, line)
    for error in run.errors:  # the errors file holds the reasons, never a raw payload in the rule
        assert set(error) == {"file", "line", "query_id", "field", "rule", "record"}
        assert error["rule"]


def assert_stop_invariants(run: Run, expect_bad: bool | None) -> None:
    """Exit 0 with nothing bad, or exit 2 with one ``assembler: error:`` line and no output file."""
    assert "Traceback" not in run.err
    if run.status == 0:
        assert expect_bad is not True
        return
    assert expect_bad is not False
    assert run.status == 2, run.err
    assert run.err.startswith("assembler: error: ") and run.err.count("\n") == 1, run.err
    assert run.packages == []


def both_modes(tmp_path: Path, capsys: pytest.CaptureFixture[str], lines: list[bytes], bad: set[int]) -> Run:
    """Run a JSON Lines file in skip and in stop mode; return the skip run."""
    path = write_lines(tmp_path / "in.jsonl", lines)
    run = assemble(tmp_path, capsys, str(path))
    assert_skip_invariants(tmp_path, capsys, lines, run, set(GOOD_LINES))
    assert {error["line"] for error in run.errors} == bad
    assert_stop_invariants(assemble(tmp_path, capsys, str(path), "stop"), bool(bad))
    return run


def between_good(bad_line: bytes) -> list[bytes]:
    """A bad line with a good record on either side (line 2 is the bad one)."""
    return [GOOD_LINES[0], bad_line, GOOD_LINES[1]]


def record_with(path: Sequence[str | int], value: Any, query_id: str = "bad") -> dict[str, Any]:
    """A good record (the first conformance line) with one value replaced."""
    record: dict[str, Any] = json.loads(GOOD_LINES[0])
    record["query_id"] = query_id
    target: Any = record
    for step in path[:-1]:
        target = target[step]
    target[path[-1]] = value
    return record


# --- the cases of the issue, each its own test ----------------------------------------------------


def test_json_nested_deeper_than_128_levels_is_a_record_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    deep = b'{"query_id":"d","x":' + b"[" * 1500 + b"]" * 1500 + b"}"
    run = both_modes(tmp_path, capsys, between_good(deep), {2})
    assert run.errors[0]["rule"] == "nesting deeper than 128 levels"
    very_deep = b"[" * 200_000  # not even closed
    assert both_modes(tmp_path, capsys, between_good(very_deep), {2}).errors[0]["rule"] == (
        "nesting deeper than 128 levels"
    )


def test_nesting_of_exactly_128_levels_is_accepted() -> None:
    record = record_with(["x"], json.loads("[" * 127 + "]" * 127))  # 1 (the record) + 127
    text = json.dumps(record)
    assert nesting_depth(text) == 128
    assert line_record("in.jsonl", 1, text.encode()).error is None
    record["x"] = [record["x"]]
    error = line_record("in.jsonl", 1, json.dumps(record).encode()).error
    assert error is not None and error.rule == "nesting deeper than 128 levels"


def _reference_depth(text: str) -> int:
    """Bracket by bracket, strings skipped: what nesting_depth must agree with."""
    depth = deepest = 0
    in_string = escaped = False
    for char in text:
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif char in "]}":
            depth -= 1
    return deepest


NESTED_JSON = st.recursive(
    st.text(alphabet='[]{}"\\ab\n'),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3),
)


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet='[]{}"ab,:\n', max_size=300) | st.builds(json.dumps, NESTED_JSON))
def test_the_depth_scan_agrees_with_a_bracket_by_bracket_count(text: str) -> None:
    """Valid JSON (strings holding brackets, quotes, backslashes) and unbalanced bracket soup."""
    assert nesting_depth(text) == _reference_depth(text)


def test_lone_surrogate_in_a_lane_key_is_written_escaped_to_the_errors_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    line = b'{"query_id":"s","context":"c","request":{"origins":[]},"lanes":{"x\\ud800":[]}}'
    run = both_modes(tmp_path, capsys, between_good(line), {2})
    assert run.errors[0]["field"] == "lanes.x\\ud800"
    assert run.errors[0]["query_id"] == "s"


def test_lone_surrogate_in_query_id_is_written_escaped_to_the_errors_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    line = json.dumps({**record_with(["lanes", "x\ud800"], []), "query_id": "q\udfff"}).encode()
    run = both_modes(tmp_path, capsys, between_good(line), {2})
    assert run.errors[0]["query_id"] == "q\\udfff"
    table = pa.table({JSON_LINE: pa.array([line], pa.binary())})
    rejected = assemble_table(table, on_error="skip").rejected.to_pylist()  # the Arrow table holds it too
    assert rejected[0]["query_id"] == "q\\udfff" and rejected[0]["field"] == "query_id"
    assert rejected[0]["rule"] == "is not valid Unicode (lone surrogate escape)"


def _parquet(path: Path, table: pa.Table) -> Path:
    pq.write_table(table, path)
    return path


def _good_rows(count: int = 2) -> list[dict[str, Any]]:
    return [json.loads(line) for line in GOOD_LINES[:count]]


def test_parquet_timestamp_decimal_binary_in_a_rejected_row_are_written_as_text(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    table = pa.table(
        {
            "query_id": ["a", "b"],
            "ts": [datetime.datetime(2020, 1, 2, 3, 4, 5), None],
            "dec": pa.array([decimal.Decimal("1.50"), None], pa.decimal128(5, 2)),
            "bin": [b"\xff\x00ok", None],
        }
    )
    path = _parquet(tmp_path / "types.parquet", table)
    run = assemble(tmp_path, capsys, str(path))
    assert run.status == 0 and [error["line"] for error in run.errors] == [1, 2]
    assert json.loads(run.errors[0]["record"]) == {
        "query_id": "a",
        "ts": "2020-01-02T03:04:05",
        "dec": "1.50",
        "bin": "\\xff\x00ok",
    }
    assert_stop_invariants(assemble(tmp_path, capsys, str(path), "stop"), True)


def _invalid_utf8_table() -> pa.Table:
    raw = pa.array([b"\xff\xfeid", b"ok"], pa.binary())
    broken = pa.Array.from_buffers(pa.string(), 2, raw.buffers())  # a string column holding invalid UTF-8
    rows = _good_rows(2)
    good = pa.Table.from_pylist(rows, schema=LANE_DUMP_SCHEMA)
    return good.set_column(0, "query_id", broken)


def test_parquet_string_column_with_invalid_utf8_is_a_record_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _parquet(tmp_path / "utf8.parquet", _invalid_utf8_table())
    run = assemble(tmp_path, capsys, str(path))
    assert run.status == 0, run.err
    assert [(e["line"], e["field"], e["rule"]) for e in run.errors] == [
        (1, "query_id", "invalid UTF-8 in a string value")
    ]
    assert json.loads(run.errors[0]["record"])["query_id"] == "\\xff\\xfeid"
    assert len(run.packages) == 1 and json.loads(run.packages[0])["query_id"] == "ok"
    stop = assemble(tmp_path, capsys, str(path), "stop")
    assert_stop_invariants(stop, True)
    assert "utf8.parquet:1: field query_id: invalid UTF-8 in a string value" in stop.err


def test_integer_with_more_than_4300_digits_names_the_field(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    line = json.dumps(record_with(["request", "budget"], {"max_items": 0})).replace(
        '"max_items": 0', '"max_items": ' + "9" * 5000
    )
    run = both_modes(tmp_path, capsys, between_good(line.encode()), {2})
    error = run.errors[0]
    assert (error["field"], error["rule"], error["query_id"]) == (
        "request.budget.max_items",
        "integer with more than 4300 digits",
        "bad",
    )
    assert "set_int_max_str_digits" not in run.errors[0]["rule"]


@pytest.mark.parametrize(("literal", "rule"), [("NaN", "NaN"), ("Infinity", "Infinity"), ("-Infinity", "-Infinity")])
def test_parquet_nan_and_infinity_are_refused_with_json_wording(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], literal: str, rule: str
) -> None:
    row = record_with(["lanes", "graph_activate", 0, "strength"], float(literal))
    path = _parquet(tmp_path / "nan.parquet", pa.Table.from_pylist([*_good_rows(1), row], schema=LANE_DUMP_SCHEMA))
    run = assemble(tmp_path, capsys, str(path))
    assert run.status == 0 and len(run.packages) == 1
    parquet_error = {key: run.errors[0][key] for key in ("field", "rule", "query_id")}
    text = json.dumps(record_with(["lanes", "graph_activate", 0, "strength"], 0.5))
    json_line = text.replace('"strength": 0.5', f'"strength": {literal}', 1).encode()
    json_run = both_modes(tmp_path, capsys, between_good(json_line), {2})
    assert parquet_error == {key: json_run.errors[0][key] for key in ("field", "rule", "query_id")}
    assert parquet_error["field"] == "lanes.graph_activate[0].strength"
    assert parquet_error["rule"] == f"must be a finite number ({rule} is not a JSON number)"


def test_nan_in_a_score_field_validated_from_memory_names_the_field() -> None:
    with pytest.raises(ShapeError) as caught:
        check_number(float("nan"), "request.dice_floor")
    assert (caught.value.path, caught.value.rule) == (
        "request.dice_floor",
        "must be a finite number (NaN is not a JSON number)",
    )
    with pytest.raises(ShapeError, match="number out of range"):
        check_number(10**400, "request.dice_floor")
    record = record_with(["lanes", "graph_activate", 0, "strength"], 10**400)
    with pytest.raises(InputError) as error:
        lanes_module.parse_record(record)
    assert error.value.error.field == "lanes.graph_activate[0].strength"


def test_convert_refuses_parquet_nan_instead_of_writing_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    row = record_with(["lanes", "graph_activate", 0, "strength"], float("nan"))
    path = _parquet(tmp_path / "nan.parquet", pa.Table.from_pylist([*_good_rows(1), row], schema=LANE_DUMP_SCHEMA))
    out, errs = tmp_path / "x.jsonl", tmp_path / "x.errors.jsonl"
    assert main(["convert", str(path), "-o", str(out), "--on-error", "skip", "--errors", str(errs)]) == 0
    assert "NaN" not in out.read_text(encoding="utf-8")
    assert main(["assemble", str(out), "-o", str(tmp_path / "p.jsonl"), "-q"]) == 0  # what convert wrote assembles
    assert [json.loads(line)["line"] for line in errs.read_text(encoding="utf-8").splitlines()] == [2]


def test_parquet_with_a_repeated_column_name_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    good = pa.Table.from_pylist(_good_rows(1), schema=LANE_DUMP_SCHEMA)
    table = pa.Table.from_arrays([*good.columns, pa.array(["other"])], names=[*good.column_names, "query_id"])
    path = _parquet(tmp_path / "dup.parquet", table)
    for mode in ("skip", "stop"):
        run = assemble(tmp_path, capsys, str(path), mode)
        assert run.status == 2 and "Traceback" not in run.err
        assert "dup.parquet: column 'query_id' appears 2 times" in run.err
    capsys.readouterr()
    assert main(["convert", str(path), "-o", str(tmp_path / "c.jsonl")]) == 2
    assert "column 'query_id'" in capsys.readouterr().err


def test_control_characters_from_the_input_are_escaped_in_messages(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    line = json.dumps(record_with(["lanes", "\x1b[2J\x07\u202e"], []), ensure_ascii=False)
    line = line.replace('"query_id": "bad"', '"query_id": "id\\u001b]0;x\\u0007"')
    path = write_lines(tmp_path / "in.jsonl", between_good(line.encode()))
    stop = assemble(tmp_path, capsys, str(path), "stop")
    assert stop.status == 2
    assert "\x1b" not in stop.err and "\x07" not in stop.err and "\u202e" not in stop.err
    assert "query_id 'id\\x1b]0;x\\x07' field lanes.\\x1b[2J\\x07\\u202e: unknown lane" in stop.err
    skip = assemble(tmp_path, capsys, str(path))
    assert skip.errors[0]["field"] == "lanes.\\x1b[2J\\x07\\u202e"


def test_a_huge_key_is_echoed_at_most_80_characters(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    key = "k" * 1_000_000
    line = json.dumps(record_with(["lanes", key], [])).replace(
        '"query_id": "bad"', '"query_id": "' + "i" * 500_000 + '"'
    )
    path = write_lines(tmp_path / "in.jsonl", between_good(line.encode()))
    stop = assemble(tmp_path, capsys, str(path), "stop")
    # Bounded whatever the key's size: the file name, two echoes of at most 80 characters, the rule.
    assert stop.status == 2 and len(stop.err) - len(str(path)) < 400, len(stop.err)
    assert "k" * 80 + "…(999920 more)" in stop.err and "i" * 80 + "…(499920 more)" in stop.err
    assert shown("x" * 81) == "x" * 80 + "…(1 more)"


def test_number_past_f64_range_names_the_field(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = json.dumps(record_with(["lanes", "graph_activate", 0, "strength"], 0.5))
    line = text.replace('"strength": 0.5', '"strength": 1e400', 1).encode()
    run = both_modes(tmp_path, capsys, between_good(line), {2})
    assert (run.errors[0]["field"], run.errors[0]["rule"]) == (
        "lanes.graph_activate[0].strength",
        "number out of range (beyond what an f64 holds)",
    )


class _Boom(Exception):
    """An exception nobody planned for, whose message carries payload."""


def test_an_unexpected_exception_while_validating_is_a_record_error_without_its_message(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    real = lanes_module.parse_record

    def flaky(raw: Any, **kwargs: Any) -> Any:
        if isinstance(raw, dict) and raw.get("query_id") == "bad":
            raise _Boom("SECRET payload text")
        return real(raw, **kwargs)

    monkeypatch.setattr(records_module, "parse_record", flaky)
    line = json.dumps(record_with(["x"], 1)).encode()
    run = both_modes(tmp_path, capsys, between_good(line), {2})
    assert (run.errors[0]["query_id"], run.errors[0]["rule"]) == ("bad", "unexpected _Boom while validating the record")
    assert "SECRET" not in json.dumps(run.errors[0]["rule"])
    table = pa.table({JSON_LINE: pa.array(between_good(line), pa.binary())})
    result = assemble_table(table, on_error="skip")  # the Arrow entry point (every engine's)
    assert result.rejected_rows == [1] and result.package_rows == [0, 2]
    rejected: list[RecordError] = []
    list(iter_records(read_raw([str(tmp_path / "in.jsonl")]), lambda _raw, error: rejected.append(error)))
    assert [error.rule for error in rejected] == ["unexpected _Boom while validating the record"]


def test_parse_json_refusals_stay_value_errors_for_other_readers() -> None:
    for text, message in (('{"a":NaN}', "NaN is not a JSON number"), ('{"a":1e999}', "number out of range")):
        with pytest.raises(ValueError, match=message):
            parse_json(text)
    with pytest.raises(ValueError, match="nesting deeper than 128 levels"):
        parse_json("[" * 129 + "]" * 129)
    with pytest.raises(ValueError, match="integer with more than 4300 digits"):
        parse_json("9" * 5000)


# --- fuzzing ------------------------------------------------------------------------------------

JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4),
    max_leaves=12,
)
HOSTILE_VALUES: st.SearchStrategy[Any] = st.sampled_from(
    [
        None,
        -1,
        2**64,
        10**400,
        "x\ud800",
        "\x1b[2J",
        "k" * 300,
        [],
        {},
        True,
        1.5,
        [[[[[]]]]],
    ]
)


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every path into a JSON value (to pick a mutation site)."""
    found = [prefix] if prefix else []
    if isinstance(value, dict):
        for key, item in value.items():
            found += _paths(item, (*prefix, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found += _paths(item, (*prefix, index))
    return found


def _set(value: Any, path: tuple[Any, ...], new: Any) -> None:
    for step in path[:-1]:
        value = value[step]
    value[path[-1]] = new


def _delete(value: Any, path: tuple[Any, ...]) -> None:
    for step in path[:-1]:
        value = value[step]
    del value[path[-1]]


@st.composite
def mutated_lines(draw: st.DrawFn) -> bytes:
    """A good record with one hostile change (its id made fresh so that it never repeats a good one)."""
    source = draw(st.sampled_from(GOOD_LINES))
    record = json.loads(source)
    record["query_id"] = "m" + str(draw(st.integers(0, 10**6)))
    kind = draw(
        st.sampled_from(
            ["delete", "replace", "hostile", "deep", "duplicate", "truncate", "number", "surrogate", "ctrl"]
        )
    )
    paths = _paths(record)
    path = draw(st.sampled_from(paths))
    if kind == "delete":
        _delete(record, path)
    elif kind == "replace":
        _set(record, path, draw(JSON_VALUES))
    elif kind == "hostile":
        _set(record, path, draw(HOSTILE_VALUES))
    elif kind == "deep":
        _set(record, path, json.loads("[" * 130 + "]" * 130))
    text = json.dumps(record, ensure_ascii=draw(st.booleans()))
    if kind == "duplicate":
        text = text.replace('"context":', '"context": "dup", "context":', 1)
    elif kind == "truncate":
        text = text[: draw(st.integers(0, max(0, len(text) - 1)))]
    elif kind == "number":
        literal = draw(st.sampled_from(["NaN", "Infinity", "-Infinity", "1e400", "9" * 4400, "-0", "1E2"]))
        text = text.replace("1.0", literal, 1) if "1.0" in text else text.replace(": 1", ": " + literal, 1)
    elif kind == "surrogate":
        text = text.replace('"query_id": "', '"query_id": "\\udc00', 1)
    elif kind == "ctrl":
        text = text.replace('"context": "', '"context": "\\u001b[31m', 1)
    return text.encode("utf-8", "surrogatepass")


def _one_line(data: bytes) -> bytes:
    return data.replace(b"\n", b" ").replace(b"\r", b" ")


LINES = st.lists(
    st.sampled_from(GOOD_LINES)
    | mutated_lines()
    | st.binary(max_size=60).map(_one_line)
    | JSON_VALUES.map(lambda value: json.dumps(value).encode()),
    min_size=1,
    max_size=6,
).map(lambda lines: [line for line in lines if line.strip()] or [GOOD_LINES[0]])


def _dedupe_good(lines: list[bytes]) -> list[bytes]:
    """A good line repeated would be a duplicate query id: keep its first appearance only."""
    seen: set[bytes] = set()
    kept = []
    for line in lines:
        if line in GOOD_LINES and line in seen:
            continue
        seen.add(line)
        kept.append(line)
    return kept


@FUZZ
@given(LINES)
def test_fuzz_jsonl_file_every_line_accounted_good_packages_unchanged(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], lines: list[bytes]
) -> None:
    lines = _dedupe_good(lines)
    path = write_lines(tmp_path / "in.jsonl", lines)
    run = assemble(tmp_path, capsys, str(path))
    stop = assemble(tmp_path, capsys, str(path), "stop")
    if assert_refused_whole(path.read_bytes(), run, stop):
        return
    assert_skip_invariants(tmp_path, capsys, lines, run, set(GOOD_LINES))
    assert_stop_invariants(stop, bool(run.errors))


def assert_refused_whole(data: bytes, skip: Run, stop: Run) -> bool:
    """Whether ``data`` is not JSON Lines at all (a NUL byte in its first 64 KiB, or the magic bytes
    of another format: :func:`assembler.run.io.open_input`); if so, both runs refused it whole,
    with exit 2 and one line, before any output."""
    from assembler.errors import UsageError
    from assembler.run.io import open_input

    monkeypatch = pytest.MonkeyPatch()
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data)))
    try:
        with open_input("-") as stream:
            stream.read()
        return False
    except UsageError as exc:
        message = str(exc).replace("<stdin>", "")
    finally:
        monkeypatch.undo()
    for run in (skip, stop):
        assert run.status == 2 and run.packages == [] and run.errors == [], run.err
        assert run.err.startswith("assembler: error: ") and run.err.count("\n") == 1, run.err
        assert run.err.endswith(message + "\n"), (run.err, message)
    return True


@FUZZ
@given(LINES)
def test_fuzz_stdin_every_line_accounted_good_packages_unchanged(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, lines: list[bytes]
) -> None:
    lines = _dedupe_good(lines)
    data = b"".join(line + b"\n" for line in lines)
    runs = {}
    for mode in ("skip", "stop"):
        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data)))
        runs[mode] = assemble(tmp_path, capsys, "-", mode)
    if assert_refused_whole(data, runs["skip"], runs["stop"]):
        return
    assert_skip_invariants(tmp_path, capsys, lines, runs["skip"], set(GOOD_LINES))
    assert all(error["file"] == "<stdin>" for error in runs["skip"].errors)
    assert_stop_invariants(runs["stop"], bool(runs["skip"].errors))


HOSTILE_ROWS: list[Callable[[int], dict[str, Any]]] = [
    lambda i: record_with(["lanes", "graph_activate", 0, "strength"], float("nan"), f"p{i}"),
    lambda i: record_with(["lanes", "graph_activate", 0, "association", "weight"], float("-inf"), f"p{i}"),
    lambda i: record_with(["request", "dice_floor"], float("inf"), f"p{i}"),
    lambda i: {**record_with(["context"], None, f"p{i}")},
    lambda i: {"query_id": f"p{i}"},
    lambda i: record_with(["request", "budget"], {"max_items": 2**64 - 1}, f"p{i}"),
]


@FUZZ
@given(st.lists(st.booleans(), min_size=1, max_size=8), st.data())
def test_fuzz_parquet_every_row_accounted_good_packages_unchanged(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], hostile: list[bool], data: st.DataObject
) -> None:
    rows: list[dict[str, Any]] = []
    good_rows: list[dict[str, Any]] = []
    for i, is_hostile in enumerate(hostile):
        if is_hostile:
            rows.append(data.draw(st.sampled_from(HOSTILE_ROWS))(i))
        else:
            row = json.loads(GOOD_LINES[i % len(GOOD_LINES)])
            rows.append(row)
            good_rows.append(row)
    path = _parquet(tmp_path / "in.parquet", pa.Table.from_pylist(rows, schema=LANE_DUMP_SCHEMA))
    run = assemble(tmp_path, capsys, str(path))
    assert run.status == 0 and "Traceback" not in run.err
    assert len(run.packages) + len(run.errors) == len(rows)
    assert len({error["line"] for error in run.errors}) == len(run.errors)
    reference = _parquet(tmp_path / "good.parquet", pa.Table.from_pylist(good_rows, schema=LANE_DUMP_SCHEMA))
    expected = assemble(tmp_path, capsys, str(reference)).packages if good_rows else []
    ok = [json.loads(package)["query_id"] for package in run.packages]
    assert all(query_id in GOOD_IDS or query_id.startswith("p") for query_id in ok)
    assert [package for package in run.packages if json.loads(package)["query_id"] in GOOD_IDS] == expected
    assert_stop_invariants(assemble(tmp_path, capsys, str(path), "stop"), bool(run.errors))


def _corpus() -> list[bytes]:
    """Every hand-made case above as JSON Lines, between good records."""
    cases = [
        b'{"query_id":"d","x":' + b"[" * 1500 + b"]" * 1500 + b"}",
        b'{"query_id":"s","context":"c","request":{"origins":[]},"lanes":{"x\\ud800":[]}}',
        b'{"query_id":"q\\ud800","context":"c"}',
        json.dumps(record_with(["lanes", "\x1b[2J"], [], "c1")).encode(),
        json.dumps(record_with(["lanes", "k" * 10_000], [], "c2")).encode(),
        b'{"query_id":"n","x":' + b"9" * 5000 + b"}",
        b'{"query_id":"i","x":1e400}',
        b'{"query_id":"j","x":NaN}',
        b"\xff\xfe",
        b'{"query_id":',
    ]
    lines: list[bytes] = []
    for index, case in enumerate(cases):
        lines += [case, GOOD_LINES[index % len(GOOD_LINES)]]
    return lines


def test_every_case_with_two_workers_is_accounted_as_with_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lines = _corpus()
    path = write_lines(tmp_path / "in.jsonl", lines)
    one = assemble(tmp_path, capsys, str(path))
    assert_skip_invariants(tmp_path, capsys, lines, one, set(GOOD_LINES))
    assert [error["line"] for error in one.errors] == list(range(1, len(lines), 2))
    out, errs = tmp_path / "two.jsonl", tmp_path / "two.errors.jsonl"
    argv = ["assemble", str(path), "-o", str(out), "-q", "--on-error", "skip", "--errors", str(errs)]
    assert main([*argv, "--workers", "2", "--chunk-size", "3"]) == 0
    assert out.read_text(encoding="utf-8").splitlines() == one.packages
    assert [json.loads(line) for line in errs.read_text(encoding="utf-8").splitlines()] == one.errors
    capsys.readouterr()
    assert main(["assemble", str(path), "-o", str(out), "-q", "--workers", "2", "--chunk-size", "3"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("assembler: error: ") and "Traceback" not in err and ":1: nesting deeper" in err


def test_every_case_with_the_commands_forked_workers_is_accounted_as_with_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The executable starts its workers before it loads any library, by ``fork`` on Linux (a
    pool started from Python, as above, spawns them): the same bytes either way."""
    lines = _corpus()
    path = write_lines(tmp_path / "in.jsonl", lines)
    one = assemble(tmp_path, capsys, str(path))
    out, errs = tmp_path / "two.jsonl", tmp_path / "two.errors.jsonl"
    argv = ["assemble", str(path), "-o", str(out), "-q", "--on-error", "skip", "--errors", str(errs)]
    done = subprocess.run(
        [sys.executable, "-m", "assembler", *argv, "--workers", "2", "--chunk-size", "3"],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        cwd=ROOT,
        timeout=300,
    )
    assert (done.returncode, done.stderr) == (one.status, one.err)
    assert _lines(out.read_text(encoding="utf-8")) == one.packages
    assert [json.loads(line) for line in _lines(errs.read_bytes().decode("utf-8"))] == one.errors


def test_rejected_records_keep_their_text_verbatim_when_it_is_valid_utf8(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    line = _corpus()[6]
    assert b"\\u001b[2J" in line
    run = both_modes(tmp_path, capsys, between_good(line), {2})
    assert run.errors[0]["record"].encode() == line


def test_a_query_id_holding_a_next_line_character_stays_one_package_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    line = json.dumps(record_with(["context"], "c", query_id="a\u0085b\u2028c"), ensure_ascii=False).encode()
    run = assemble(tmp_path, capsys, str(write_lines(tmp_path / "in.jsonl", [line])))
    assert run.status == 0 and len(run.packages) == 1
    assert json.loads(run.packages[0])["query_id"] == "a\u0085b\u2028c"


# --- records over the size limit, inputs that are not JSON Lines, memory ----------------------------


def test_a_record_over_max_record_bytes_is_a_record_error_that_skip_mode_survives(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    big = json.dumps(record_with(["padding"], "x" * 30_000, "big")).encode()  # unknown keys are ignored
    lines = between_good(big)
    path = write_lines(tmp_path / "in.jsonl", lines)
    assert assemble(tmp_path, capsys, str(path)).errors == []  # under the default limit: accepted
    run = assemble(tmp_path, capsys, str(path), "skip", "--max-record-bytes", "20000")
    assert_skip_invariants(tmp_path, capsys, lines, run, set(GOOD_LINES))
    rule = f"record is {len(big)} bytes, over the limit of 20000 (--max-record-bytes)"
    assert run.errors == [{"file": str(path), "line": 2, "query_id": None, "field": "", "rule": rule, "record": ""}]
    stop = assemble(tmp_path, capsys, str(path), "stop", "--max-record-bytes", "20000")
    assert_stop_invariants(stop, True)
    assert stop.err == f"assembler: error: {path}:2: {rule}\n"
    out, errs = tmp_path / "two.jsonl", tmp_path / "two.errors.jsonl"
    argv = ["assemble", str(path), "-o", str(out), "-q", "--on-error", "skip", "--errors", str(errs)]
    assert main([*argv, "--max-record-bytes", "20000", "--workers", "2", "--chunk-size", "1"]) == 0
    assert out.read_text(encoding="utf-8").splitlines() == run.packages
    assert [json.loads(line) for line in errs.read_text(encoding="utf-8").splitlines()] == run.errors


def test_the_default_record_limit_is_64_mib(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    huge = b'{"query_id":"huge","x":"' + b"a" * (64 * 2**20) + b'"}'
    run = assemble(tmp_path, capsys, str(write_lines(tmp_path / "in.jsonl", between_good(huge))))
    assert [(error["line"], error["rule"], error["record"]) for error in run.errors] == [
        (2, f"record is {len(huge)} bytes, over the limit of {64 * 2**20} (--max-record-bytes)", "")
    ]
    assert len(run.packages) == 2


def test_a_parquet_row_over_max_record_bytes_is_a_record_error_in_both_modes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rows = [json.loads(line) for line in GOOD_LINES[:3]]
    hit = {"source": "s", "paragraph": 0, "score": 0.5, "text": "x" * 200_000, "lanes": {}}
    rows[1]["lanes"]["passages"] = [hit]
    path = tmp_path / "in.parquet"
    pq.write_table(pa.Table.from_pylist(rows, schema=LANE_DUMP_SCHEMA), path)
    run = assemble(tmp_path, capsys, str(path), "skip", "--max-record-bytes", "100000")
    assert run.status == 0, run.err
    assert [(error["line"], error["record"]) for error in run.errors] == [(2, "")]
    assert "bytes decoded, over the limit of 100000 (--max-record-bytes)" in run.errors[0]["rule"]
    assert run.packages == [alone(tmp_path, capsys, GOOD_LINES[0]), alone(tmp_path, capsys, GOOD_LINES[2])]
    assert_stop_invariants(assemble(tmp_path, capsys, str(path), "stop", "--max-record-bytes", "100000"), True)
    converted = tmp_path / "converted.jsonl"
    argv = ["convert", str(path), "-o", str(converted), "--on-error", "skip", "--max-record-bytes", "100000"]
    assert main([*argv, "--errors", str(tmp_path / "c.errors.jsonl")]) == 0
    assert len(converted.read_text(encoding="utf-8").splitlines()) == 2


@pytest.mark.parametrize("mode", ["stop", "skip"])
def test_dev_zero_is_refused_at_once_as_binary(tmp_path: Path, capsys: pytest.CaptureFixture[str], mode: str) -> None:
    import time

    started = time.monotonic()
    run = assemble(tmp_path, capsys, "/dev/zero", mode)
    assert time.monotonic() - started < 10
    assert run.status == 2 and run.packages == [] and run.errors == []
    assert run.err == (
        "assembler: error: /dev/zero looks binary (a NUL byte in its first 64 KiB): it is not JSON Lines\n"
    )
    assert not (tmp_path / "errors.jsonl").exists()


_PEAK_SCRIPT = """
import sys
from assembler.cli import main
status = main(sys.argv[1:])
print([line.split()[1] for line in open("/proc/self/status") if line.startswith("VmHWM")][0], file=sys.stderr)
sys.exit(status)
"""


def _peak_run(argv: Sequence[str], stdin: Any = None) -> tuple[int, str, int]:
    """The command in a new process: exit status, stderr without the last line, and the peak
    resident memory in KiB (that last line: ``VmHWM``, which starts again at ``exec``; the
    ``ru_maxrss`` of a forked child starts at its parent's)."""
    import subprocess

    done = subprocess.run(
        [sys.executable, "-c", _PEAK_SCRIPT, *argv], stdin=stdin, capture_output=True, timeout=300, check=False
    )
    *lines, peak = done.stderr.decode("utf-8", "replace").splitlines()
    return done.returncode, "\n".join(lines), int(peak)


def test_a_line_that_never_ends_is_read_in_bounded_memory_from_a_pipe_or_a_gzip_bomb(tmp_path: Path) -> None:
    import subprocess

    size = 300 * 2**20
    bomb = tmp_path / "bomb.jsonl.gz"
    with gzip.open(bomb, "wb", compresslevel=1) as handle:
        for _ in range(size // 2**20):
            handle.write(b"a" * 2**20)
    assert bomb.stat().st_size < 2 * 2**20
    out = str(tmp_path / "out.jsonl")
    status, err, peak = _peak_run(["assemble", str(bomb), "-o", out, "--max-record-bytes", "8000000"])
    assert status == 2
    assert err == f"assembler: error: {bomb}:1: record is {size} bytes, over the limit of 8000000 (--max-record-bytes)"
    assert peak < 450 * 1024, peak  # the libraries and a block or two, not the 300 MiB line
    feeder = subprocess.Popen(  # a pipe that sends 300 MiB and never a newline
        [sys.executable, "-c", f"import sys\nfor _ in range({size // 2**20}): sys.stdout.buffer.write(b'a' * 2**20)"],
        stdout=subprocess.PIPE,
    )
    try:
        argv = ["assemble", "-", "-o", out, "--on-error", "skip", "--errors", str(tmp_path / "e.jsonl")]
        status, err, peak = _peak_run(argv, stdin=feeder.stdout)
    finally:
        assert feeder.stdout is not None
        feeder.stdout.close()
        feeder.wait()
    assert status == 0, err
    assert peak < 450 * 1024, peak
    (error,) = [json.loads(line) for line in (tmp_path / "e.jsonl").read_text(encoding="utf-8").splitlines()]
    assert error["rule"] == f"record is {size} bytes, over the limit of {64 * 2**20} (--max-record-bytes)"
    assert error["record"] == "" and error["file"] == "<stdin>"


@pytest.mark.parametrize(
    "compress",
    [gzip.compress, lambda data: pa.compress(data, codec="zstd", asbytes=True)],
    ids=["gzip", "zstd"],
)
def test_compressed_lane_dumps_are_assembled_and_converted_as_the_plain_ones(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], compress: Callable[[bytes], bytes]
) -> None:
    lines = _corpus()  # good and bad records
    plain = write_lines(tmp_path / "plain.jsonl", lines)
    packed = tmp_path / "packed.jsonl"
    packed.write_bytes(compress(plain.read_bytes()))
    expected = assemble(tmp_path, capsys, str(plain))
    run = assemble(tmp_path, capsys, str(packed))
    assert run.packages == expected.packages
    assert [{**error, "file": ""} for error in run.errors] == [{**error, "file": ""} for error in expected.errors]
    assert assemble(tmp_path, capsys, str(packed), "stop").err == expected_stop_err(tmp_path, capsys, plain, packed)
    for source in (plain, packed):
        argv = ["convert", str(source), "-o", str(tmp_path / f"{source.stem}.parquet"), "--on-error", "skip"]
        assert main([*argv, "--errors", str(tmp_path / f"{source.stem}.errors.jsonl")]) == 0
    assert pq.read_table(tmp_path / "packed.parquet").equals(pq.read_table(tmp_path / "plain.parquet"))


def expected_stop_err(tmp_path: Path, capsys: pytest.CaptureFixture[str], plain: Path, packed: Path) -> str:
    """The stop-mode message of the plain file, naming the compressed one."""
    return assemble(tmp_path, capsys, str(plain), "stop").err.replace(str(plain), str(packed))


def test_every_json_lines_reader_reads_gzip_and_zstd(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from assembler.evaluate.dump import load_lanes
    from assembler.evaluate.loader import load_eval
    from assembler.retrieval.inputs import read_cases, read_corpus

    evaluate_data = Path(__file__).resolve().parents[1] / "evaluate" / "data"

    def packed(source: Path, how: str) -> Path:
        target = tmp_path / f"{how}-{source.name}"
        data = source.read_bytes()
        target.write_bytes(gzip.compress(data) if how == "gzip" else pa.compress(data, codec="zstd", asbytes=True))
        return target

    assess_in = DATA / "assess" / "sample.jsonl"
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text('{"source":"a.md","paragraph":0,"text":"Rush is a band."}\n', encoding="utf-8")
    cases = tmp_path / "cases.jsonl"
    cases.write_text('{"taguru_eval":1,"name":"x"}\n{"case_id":"c1","query":"Rush?"}\n', encoding="utf-8")
    for how in ("gzip", "zstd"):
        outputs = []
        for source in (assess_in, packed(assess_in, how)):
            out = tmp_path / f"assessed-{source.name}"
            assert main(["assess", str(source), "-o", str(out), "--now", "2026-01-01T00:00:00Z"]) == 0
            outputs.append(out.read_bytes())
        assert outputs[0] == outputs[1]
        evalset = load_eval(str(evaluate_data / "eval.jsonl"))
        assert load_eval(str(packed(evaluate_data / "eval.jsonl", how))).cases == evalset.cases
        lanes = load_lanes(str(packed(evaluate_data / "lanes.jsonl", how)), evalset)
        assert [record.record.query_id for record in lanes.records] == [
            record.record.query_id for record in load_lanes(str(evaluate_data / "lanes.jsonl"), evalset).records
        ]
        assert read_corpus(packed(corpus, how), "films") == read_corpus(corpus, "films")
        assert read_cases(packed(cases, how)) == read_cases(cases)
    capsys.readouterr()


@pytest.mark.parametrize("mode", ["stop", "skip"])
def test_a_parquet_file_named_jsonl_is_named_before_any_output(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], mode: str
) -> None:
    path = tmp_path / "lanes.jsonl"
    pq.write_table(pa.Table.from_pylist([json.loads(GOOD_LINES[0])], schema=LANE_DUMP_SCHEMA), path)
    run = assemble(tmp_path, capsys, str(path), mode)
    assert run.status == 2 and run.packages == [] and run.errors == []
    assert run.err == f"assembler: error: {path} is a Parquet file, not JSON Lines (name it .parquet)\n"
    assert sorted(os.listdir(tmp_path)) == ["lanes.jsonl"]


def test_convert_writes_an_f64_field_given_as_an_integer_past_i64_as_assemble_reads_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    record = record_with(["request", "dice_floor"], 9223372036854775808, "big-float")
    record["request"]["semantic_floor"] = 2**53 + 1  # not exactly an f64: rounded, as when parsed
    record["request"]["activate_decay"] = 10**300
    path = write_lines(tmp_path / "in.jsonl", [json.dumps(record).encode(), GOOD_LINES[1]])
    parquet = tmp_path / "in.parquet"
    argv = ["convert", str(path), "-o", str(parquet), "--on-error", "skip", "--errors", str(tmp_path / "c.jsonl")]
    assert main(argv) == 0
    assert "converted 2 records, 0 rejected" in capsys.readouterr().err
    request = pq.read_table(parquet).column("request").to_pylist()[0]
    assert (request["dice_floor"], request["semantic_floor"], request["activate_decay"]) == (
        9223372036854775808.0,
        float(2**53),
        1e300,
    )
    from_json = assemble(tmp_path, capsys, str(path))
    assert from_json.errors == [] and len(from_json.packages) == 2
    assert assemble(tmp_path, capsys, str(parquet)).packages == from_json.packages
    back = tmp_path / "back.jsonl"
    assert main(["convert", str(parquet), "-o", str(back)]) == 0
    assert json.loads(back.read_text(encoding="utf-8").splitlines()[0])["request"]["dice_floor"] == 9.223372036854776e18


_OOM_SCRIPT = """
import resource, sys
from assembler.cli import main
small, big, out, extra = sys.argv[1:5]
assert main(["assemble", small, "-o", out, "-q"]) == 0  # the libraries loaded and warmed up
size = int([line for line in open("/proc/self/status") if line.startswith("VmSize")][0].split()[1]) * 1024
resource.setrlimit(resource.RLIMIT_AS, (size + int(extra), size + int(extra)))
sys.exit(main(["assemble", big, "-o", out, "-q"]))
"""


@pytest.mark.parametrize("extra_mib", [100, 300])
def test_out_of_memory_is_one_line_and_exit_1_or_an_abort_whose_temporary_the_next_run_removes(
    tmp_path: Path, extra_mib: int
) -> None:
    import subprocess

    from assembler.run.atomic import TEMP_SUFFIX

    big = tmp_path / "big.jsonl"
    passage = {"source": "s.md", "paragraph": 0, "score": 0.5, "text": "word " * 4_000_000, "lanes": {}}
    big.write_text(json.dumps(record_with(["lanes", "passages"], [passage], "big")) + "\n", encoding="utf-8")
    small = write_lines(tmp_path / "small.jsonl", GOOD_LINES[:1])
    out = tmp_path / "out.jsonl"
    environment = {**os.environ, "RUST_BACKTRACE": "1"}  # a backtrace printed on a failed allocation deadlocks
    argv = [sys.executable, "-c", _OOM_SCRIPT, str(small), str(big), str(out), str(extra_mib * 2**20)]
    done = subprocess.run(argv, capture_output=True, timeout=300, env=environment, check=False)
    err = done.stderr.decode("utf-8", "replace")
    assert "Traceback" not in err, err

    def temporaries() -> list[str]:
        return [name for name in os.listdir(tmp_path) if name.startswith(".out.jsonl.") and name.endswith(TEMP_SUFFIX)]

    if done.returncode == 1:  # Python's MemoryError, or a Polars panic over an allocation
        assert err.splitlines()[-1] == "assembler: error: out of memory", err
        assert temporaries() == []
    else:  # Rust aborted: "memory allocation of N bytes failed"
        assert done.returncode == -6, err
        assert "memory allocation of" in err or "panicked" in err, err
        assert main(["assemble", str(small), "-o", str(out), "-q"]) == 0
        assert temporaries() == []
    assert out.read_text(encoding="utf-8") == alone_text(small)


def alone_text(path: Path) -> str:
    """The packages of a good file, assembled in this process."""
    target = path.with_suffix(".expected.jsonl")
    assert main(["assemble", str(path), "-o", str(target), "-q"]) == 0
    return target.read_text(encoding="utf-8")
