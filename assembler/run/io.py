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
import math
import os
import sys
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from itertools import accumulate
from typing import IO, Any

import pyarrow as pa
import pyarrow.parquet as pq

from assembler.contract.wire import (
    MAX_DEPTH,
    OUT_OF_RANGE_RULE,
    TOO_DEEP_RULE,
    ShapeError,
    join_path,
    key_path,
    long_integer_rule,
    non_finite_rule,
    object_pairs,
)
from assembler.errors import RecordError, UsageError, encodable
from assembler.run.paths import shown
from assembler.stages.lanes import drop_nulls, record_id

__all__ = [
    "Inputs",
    "NumberRefused",
    "RawRecord",
    "input_paths",
    "is_parquet",
    "parquet_batches",
    "parquet_record",
    "read_raw",
    "stream_lines",
    "table_rows",
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
    return RecordError(file, line, query_id, "", f"unexpected {type(exc).__name__} while {doing} the record")


class NumberRefused(ValueError):
    """A number JSON text may spell but the contract refuses: NaN, an infinity, one past f64, or an
    integer longer than Python converts. The message is the rule."""


def _refuse_constant(name: str) -> Any:
    raise NumberRefused(f"{name} is not a JSON number")


def _parse_float(text: str) -> float:
    value = float(text)
    if math.isinf(value):
        raise NumberRefused("number out of range")
    return value


_KEEP = b'"[]{}'
_DELETE = bytes(sorted(set(range(256)) - set(_KEEP)))
_SQUARE = bytes.maketrans(b"{}", b"[]")
_STEP = {ord("["): 1, ord("]"): -1}


def nesting_depth(text: str) -> int:
    """The deepest nesting of arrays and objects in JSON text (brackets inside strings ignored;
    valid or not: an unclosed bracket counts as open to the end).

    Bytes operations in C only: escaped backslashes and quotes go, then everything but brackets
    and quotes; what remains inside quotes goes; the innermost ``[]`` pairs are removed round
    after round (one round per level). Text that does not balance is measured bracket by bracket.

    >>> nesting_depth('{"a":[[1],"]]]\\"["]}'), nesting_depth('[' * 200), nesting_depth('[[]')
    (3, 200, 2)
    """
    data = text.encode("utf-8", "surrogatepass")
    if b"\\" in data:  # escaped backslashes first, then escaped quotes: neither delimits a string
        data = data.replace(b"\\\\", b"").replace(b'\\"', b"")
    data = data.translate(_SQUARE, _DELETE).replace(b'""', b"")  # strings holding no bracket vanish
    if b'"' in data:
        data = b"".join(data.split(b'"')[::2])  # what lies outside strings
    rest = data
    for depth in range(MAX_DEPTH + 2):
        if not rest:
            return depth
        shorter = rest.replace(b"[]", b"")
        if len(shorter) == len(rest):
            break  # brackets that do not balance
        rest = shorter
    return max(accumulate(map(_STEP.__getitem__, data), initial=0))


def too_deep(text: str) -> bool:
    """Whether JSON text nests deeper than :data:`~assembler.contract.wire.MAX_DEPTH`.

    Text with at most that many opening brackets in all cannot be (two counts answer it); only
    other text is scanned (:func:`nesting_depth`).
    """
    return text.count("[") + text.count("{") > MAX_DEPTH and nesting_depth(text) > MAX_DEPTH


def parse_json(text: str) -> Any:
    """Parse one JSON document as serde_json would: no NaN/Infinity, no out-of-range numbers, no
    nesting deeper than :data:`~assembler.contract.wire.MAX_DEPTH`.

    Syntax errors raise ``json.JSONDecodeError``, refused numbers :class:`NumberRefused`, too deep
    a nesting :class:`~assembler.contract.wire.ShapeError` (all ``ValueError``). Repeated keys are
    remembered so that validation can refuse a repeated known field.
    """
    if too_deep(text):
        raise ShapeError("", TOO_DEEP_RULE)
    try:
        return json.loads(
            text, parse_constant=_refuse_constant, parse_float=_parse_float, object_pairs_hook=object_pairs
        )
    except (json.JSONDecodeError, NumberRefused):
        raise
    except RecursionError:  # the interpreter's own limit, reached under a deep call stack
        raise ShapeError("", TOO_DEEP_RULE) from None
    except ValueError:  # int() refused an integer literal: too many digits
        raise NumberRefused(long_integer_rule(sys.get_int_max_str_digits())) from None


class _Refused:
    """Stands for a refused number in the second parse, with the rule it broke."""

    __slots__ = ("rule",)

    def __init__(self, rule: str) -> None:
        self.rule = rule


class _Pairs(list[tuple[str, Any]]):
    """An object of the second parse, every key kept (a refused number may sit under a repeated key)."""


def _locate_number(text: str, name: str, number: int) -> RecordError:
    """Parse again with hooks that mark refused numbers instead of failing; name the first one's
    field (and the record's query id), as the validation of a Parquet row would."""
    limit = sys.get_int_max_str_digits()

    def integer(digits: str) -> Any:
        if limit and len(digits) - digits.startswith("-") > limit:
            return _Refused(long_integer_rule(limit))
        return int(digits)

    def decimal_number(digits: str) -> Any:
        value = float(digits)
        return _Refused(OUT_OF_RANGE_RULE) if math.isinf(value) else value

    try:
        value = json.loads(
            text,
            parse_constant=lambda constant: _Refused(non_finite_rule(constant)),
            parse_float=decimal_number,
            parse_int=integer,
            object_pairs_hook=_Pairs,
        )
    except ValueError:  # also broken elsewhere: the number problem without a field
        value = None
    found = _first_bad(value, "", _refused_rule)
    ids = [item for key, item in value if key == "query_id"] if isinstance(value, _Pairs) else []
    query_id = ids[-1] if ids and isinstance(ids[-1], str) else None
    field, rule = found if found is not None else ("", "a number cannot be read")
    return RecordError(name, number, query_id, field, rule)


def _first_bad(value: Any, path: str, rule_of: Callable[[Any], str | None]) -> tuple[str, str] | None:
    """``(field, rule)`` of the first value (in document order) that ``rule_of`` refuses, walking
    objects (dicts, or the second parse's key/value pairs) and arrays; depth is bounded by the
    callers (:data:`MAX_DEPTH` for JSON, the schema for Parquet)."""
    rule = rule_of(value)
    if rule is not None:
        return path, rule
    if isinstance(value, _Pairs):
        items: Iterable[tuple[str, Any]] = ((key_path(path, key), item) for key, item in value)
    elif isinstance(value, dict):
        items = ((key_path(path, key), item) for key, item in value.items())
    elif isinstance(value, list):
        items = ((join_path(path, f"[{index}]"), item) for index, item in enumerate(value))
    else:
        return None
    for item_path, item in items:
        found = _first_bad(item, item_path, rule_of)
        if found is not None:
            return found
    return None


def _refused_rule(value: Any) -> str | None:
    return value.rule if isinstance(value, _Refused) else None


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
            problem = _first_bad(clean, "", _non_finite_rule)  # JSON's wording
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
