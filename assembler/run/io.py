"""Readers: lane dumps in (JSON Lines or Parquet, streamed), one :class:`RawRecord` at a time.

Each record comes with its position (file, line or row), so memory stays bounded by the chunk
being assembled, never by the file. Whatever goes wrong with one record (invalid UTF-8 or JSON,
nesting past 128 levels, numbers JSON or the contract refuse, a Parquet value that cannot be read)
becomes that record's :class:`~assembler.errors.RecordError`, never an exception of the run.
Writers are in :mod:`assembler.run.atomic`, the Parquet schemas in :mod:`assembler.run.schemas`.
"""

from __future__ import annotations

import datetime
import decimal
import json
import os
import sys
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import IO, Any

import pyarrow as pa
import pyarrow.parquet as pq

from assembler.contract.jsoninput import (  # the guarded JSON reader; re-exported here
    NumberRefused,
    first_bad,
    locate_refused_number,
    nesting_depth,
    parse_json,
    too_deep,
)
from assembler.contract.wire import ShapeError, non_finite_rule
from assembler.errors import RecordError, UsageError, encodable, unexpected_rule
from assembler.run.paths import shown
from assembler.stages.lanes import drop_nulls, record_id

__all__ = [
    "Inputs",
    "NumberRefused",
    "RawRecord",
    "input_paths",
    "is_parquet",
    "nesting_depth",
    "parquet_batches",
    "parquet_record",
    "parse_json",
    "read_raw",
    "stream_lines",
    "table_rows",
    "too_deep",
    "unexpected_error",
]

STDIO = "-"


Inputs = str | os.PathLike[str] | Sequence[str | os.PathLike[str]]
"""One input path or a sequence of them (``-`` is standard input)."""


def input_paths(inputs: Inputs) -> list[str]:
    """The input paths as strings: one path or a sequence of them.

    >>> input_paths("a.jsonl"), input_paths(["a.jsonl", "b.parquet"])
    (['a.jsonl'], ['a.jsonl', 'b.parquet'])
    """
    if isinstance(inputs, str | os.PathLike):
        return [os.fspath(inputs)]
    return [os.fspath(path) for path in inputs]


@dataclass(frozen=True)
class RawRecord:
    """One input record: its parsed value (or the reason it could not be parsed) and its text."""

    file: str
    line: int
    value: Any
    text: str
    error: RecordError | None = None


def is_parquet(path: str) -> bool:
    """Parquet by file extension (``.parquet`` / ``.pq``); everything else is JSON Lines."""
    return path.endswith((".parquet", ".pq"))


def read_raw(paths: Sequence[str], *, parquet_batch_rows: int = 4096) -> Iterator[RawRecord]:
    """Every record of every input in order; ``-`` is standard input (JSON Lines)."""
    for path in paths:
        if path == STDIO:
            yield from _read_jsonl(sys.stdin.buffer, "<stdin>")
        elif is_parquet(path):
            yield from _read_parquet(path, parquet_batch_rows)
        else:
            try:
                handle = open(path, "rb")  # noqa: SIM115 - closed by the with below
            except OSError as exc:
                raise UsageError(f"cannot read {shown(path)}: {exc.strerror}") from None
            with handle:
                yield from _read_jsonl(handle, shown(path))


def _read_jsonl(stream: IO[bytes], name: str) -> Iterator[RawRecord]:
    for number, raw in stream_lines(stream):
        yield line_record(name, number, raw)


def jsonl_lines(stream: Iterable[bytes]) -> Iterator[tuple[int, bytes]]:
    """``(line number, bytes without the newline)`` of every non-blank line."""
    for number, raw_line in enumerate(stream, start=1):
        raw = raw_line.rstrip(b"\r\n")
        if not raw.strip():
            continue  # blank lines separate nothing and are skipped
        yield number, raw


def stream_lines(stream: IO[bytes], block_size: int = 1 << 20) -> Iterator[tuple[int, bytes]]:
    """:func:`jsonl_lines` of a binary stream, read in blocks: the same numbers and bytes, with the
    splitting done by ``bytes.split`` (a line iterator is slow on long lines). A line longer than a
    block is joined once from its pieces."""
    number = 0
    pending: list[bytes] = []
    while block := stream.read(block_size):
        if b"\n" not in block:
            pending.append(block)
            continue
        parts = block.split(b"\n")
        if pending:
            parts[0] = b"".join([*pending, parts[0]])
            pending = []
        if parts[-1]:
            pending.append(parts[-1])
        for raw in parts[:-1]:
            number += 1
            raw = raw.rstrip(b"\r")
            if raw and not raw.isspace():  # blank lines separate nothing and are skipped
                yield number, raw
    if pending:
        raw = b"".join(pending).rstrip(b"\r")
        if raw and not raw.isspace():
            yield number + 1, raw


def line_record(name: str, number: int, raw: bytes) -> RawRecord:
    """One JSON Lines line as a record, or the reason it is not valid UTF-8 JSON within the limits."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        shown = raw.decode("utf-8", "replace")
        error = RecordError(name, number, None, "", f"invalid UTF-8 at byte {exc.start} of the line")
        return RawRecord(name, number, None, shown, error)
    try:
        value = parse_json(text)
    except ShapeError as exc:  # nested too deep
        return RawRecord(name, number, None, text, RecordError(name, number, None, exc.path, exc.rule))
    except NumberRefused:  # NaN, an infinity, a number out of range: find its field
        return RawRecord(name, number, None, text, _locate_number(text, name, number))
    except json.JSONDecodeError as exc:
        return RawRecord(name, number, None, text, _invalid_json(name, number, f" at column {exc.colno}: {exc.msg}"))
    except MemoryError:
        raise
    except Exception as exc:  # last resort: a failure confined to one line is that line's error
        return RawRecord(name, number, None, text, unexpected_error(name, number, None, exc, "reading"))
    return RawRecord(name, number, value, text)


def _invalid_json(name: str, number: int, where: str) -> RecordError:
    return RecordError(name, number, None, "", f"invalid JSON{where}")


def unexpected_error(file: str, line: int, query_id: str | None, exc: BaseException, doing: str) -> RecordError:
    """The last-resort error of one record: a fixed rule naming the exception's type only (its
    message might quote the payload)."""
    return RecordError(file, line, query_id, "", unexpected_rule(exc, doing))


def _locate_number(text: str, name: str, number: int) -> RecordError:
    """The field of the first refused number (and the record's query id), as the validation of a
    Parquet row would name it."""
    field, rule, query_id = locate_refused_number(text, "query_id")
    return RecordError(name, number, query_id, field, rule)


def _non_finite_rule(value: Any) -> str | None:
    return non_finite_rule(value) if type(value) is float and value - value else None


# --- Parquet rows ------------------------------------------------------------------------------

INVALID_UTF8_RULE = "invalid UTF-8 in a string value"


def _read_parquet(path: str, batch_rows: int) -> Iterator[RawRecord]:
    name = shown(path)
    try:
        # A name that is not UTF-8 is opened by Python (Arrow cannot encode its surrogates).
        parquet = pq.ParquetFile(path if name == path else open(path, "rb"))  # noqa: SIM115
    except (OSError, pa.ArrowInvalid) as exc:
        raise UsageError(f"cannot read {name} as Parquet: {exc}") from None
    check_unique_columns(parquet.schema_arrow.names, name)
    row = 0
    for batch in parquet_batches(path, parquet, batch_size=batch_rows):
        for value, problem in table_rows(pa.Table.from_batches([batch])):
            row += 1
            record = parquet_record(name, row, value, problem)
            yield RawRecord(record.file, record.line, record.value, row_text(record.value), record.error)


def parquet_batches(name: str, parquet: pq.ParquetFile, **options: Any) -> Iterator[pa.RecordBatch]:
    """``parquet.iter_batches(**options)``; a page that cannot be decoded (a corrupt file: "Couldn't
    deserialize thrift", a bad dictionary index) is bad input: a :class:`UsageError` naming the file."""
    batches = parquet.iter_batches(**options)
    while True:
        try:
            batch = next(batches)
        except StopIteration:
            return
        except (OSError, pa.ArrowException) as exc:
            reason = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else type(exc).__name__
            raise UsageError(f"cannot read {shown(name)} as Parquet (a corrupt page?): {reason}") from None
        yield batch


def check_unique_columns(names: Sequence[str], file: str) -> None:
    """Refuse a table with a repeated column name: reading its rows would keep only the last one."""
    repeated = [name for name, count in Counter(names).items() if count > 1]
    if repeated:
        raise UsageError(
            f"{file}: column {repeated[0]!r} appears {names.count(repeated[0])} times "
            "(each column of a lane dump must have its own name)"
        )


def table_rows(table: pa.Table) -> list[tuple[Any, tuple[str, str] | None]]:
    """Every row of ``table`` as a Python value, with ``(field, rule)`` when it cannot be read.

    A row that fails to convert (a string column holding invalid UTF-8, a timestamp past what
    Python holds) is that row's problem only: its value is the row with strings as raw bytes (for
    the errors file), its field the first column that failed.
    """
    try:
        return [(value, None) for value in table.to_pylist()]
    except MemoryError:
        raise
    except Exception:
        pass
    rows: list[tuple[Any, tuple[str, str] | None]] = []
    for index in range(table.num_rows):
        row = table.slice(index, 1)
        try:
            rows.append((row.to_pylist()[0], None))
        except MemoryError:
            raise
        except Exception as exc:
            rows.append((_readable_row(row), (_failing_column(row), _unreadable_rule(exc))))
    return rows


def _unreadable_rule(exc: BaseException) -> str:
    if isinstance(exc, UnicodeDecodeError):
        return INVALID_UTF8_RULE
    return f"a value cannot be read ({type(exc).__name__})"


def _failing_column(row: pa.Table) -> str:
    for index, column in enumerate(row.columns):
        try:
            column.to_pylist()
        except Exception:  # this is the column that fails
            return str(row.column_names[index])
    return ""


def _as_bytes_type(kind: pa.DataType) -> pa.DataType:
    """``kind`` with every string type made binary (reads whatever bytes a string column holds)."""
    if pa.types.is_string(kind):
        return pa.binary()
    if pa.types.is_large_string(kind):
        return pa.large_binary()
    if pa.types.is_struct(kind):
        return pa.struct([field.with_type(_as_bytes_type(field.type)) for field in kind])
    if pa.types.is_list(kind):
        return pa.list_(kind.value_field.with_type(_as_bytes_type(kind.value_type)))
    if pa.types.is_large_list(kind):
        return pa.large_list(kind.value_field.with_type(_as_bytes_type(kind.value_type)))
    return kind


def _readable_row(row: pa.Table) -> Any:
    """An unreadable row's value for the errors file: strings as bytes, failing columns left out."""
    value: dict[str, Any] = {}
    for name, column in zip(row.column_names, row.columns, strict=True):
        try:
            value[name] = column.cast(_as_bytes_type(column.type)).to_pylist()[0]
        except Exception:
            continue
    return value


def parquet_record(file: str, line: int, value: Any, problem: tuple[str, str] | None = None) -> RawRecord:
    """A Parquet (or in-memory Arrow) row as a record: nulls dropped (absent and null mean the same),
    refused like JSON when it holds NaN or an infinity anywhere, or when it could not be read.

    The text is left empty: the errors file makes it from the value when needed (:func:`row_text`).
    """
    try:
        clean = drop_nulls(value)
        if problem is None and _has_non_finite(clean):
            problem = first_bad(clean, "", _non_finite_rule)  # JSON's wording
    except MemoryError:
        raise
    except Exception as exc:
        error = unexpected_error(file, line, record_id(value), exc, "reading")
        return RawRecord(file, line, value, "", error)
    if problem is None:
        return RawRecord(file, line, clean, "")
    field, rule = problem
    return RawRecord(file, line, clean, "", RecordError(file, line, record_id(clean), field, rule))


def _has_non_finite(value: Any) -> bool:
    if type(value) is float:
        return bool(value - value)  # NaN for NaN and the infinities, 0.0 otherwise
    if type(value) is dict:
        return any(map(_has_non_finite, value.values()))
    if type(value) is list:
        return any(map(_has_non_finite, value))
    return False


def _json_default(value: Any) -> Any:
    """What JSON has no type for, as a string: times in ISO 8601, decimals exact, bytes as UTF-8
    with undecodable bytes escaped (``\\xff``)."""
    if isinstance(value, datetime.date | datetime.time):
        return value.isoformat()
    if isinstance(value, bytes):
        return value.decode("utf-8", "backslashreplace")
    if isinstance(value, decimal.Decimal | datetime.timedelta):
        return str(value)
    return repr(value)


def row_text(value: Any) -> str:
    """A Parquet row's text in the errors file: compact JSON of the row without its nulls.

    Values JSON has no type for (timestamps, decimals, binary) are written as strings; the text is
    always valid UTF-8.
    """
    return encodable(json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=_json_default))
