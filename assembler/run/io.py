"""Readers and writers: lane dumps in (JSON Lines or Parquet, streamed), packages out (atomic).

Readers yield :class:`RawRecord` one input record at a time with its position, so memory stays
bounded by the chunk being assembled, never by the file. Writers write to a temporary file beside
the destination and rename it into place only when the run succeeds: a failed run leaves no
partial output file.
"""

from __future__ import annotations

import contextlib
import datetime
import decimal
import io
import json
import math
import os
import re
import secrets
import stat
import sys
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from itertools import accumulate
from typing import IO, Any, ClassVar

import pyarrow as pa
import pyarrow.parquet as pq

from assembler.contract.jsontext import escape_string
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
from assembler.errors import AssemblerError, RecordError, UsageError, encodable
from assembler.run.paths import shown
from assembler.stages.lanes import drop_nulls, record_id

__all__ = [
    "LANE_DUMP_SCHEMA",
    "PACKAGE_SCHEMA",
    "AtomicFile",
    "Inputs",
    "NumberRefused",
    "OutputError",
    "RawRecord",
    "input_paths",
    "is_parquet",
    "parquet_batches",
    "parquet_record",
    "read_raw",
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
    for number, raw in jsonl_lines(stream):
        yield line_record(name, number, raw)


def jsonl_lines(stream: Iterable[bytes]) -> Iterator[tuple[int, bytes]]:
    """``(line number, bytes without the newline)`` of every non-blank line."""
    for number, raw_line in enumerate(stream, start=1):
        raw = raw_line.rstrip(b"\r\n")
        if not raw.strip():
            continue  # blank lines separate nothing and are skipped
        yield number, raw


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
    found = _first_refused(value, "")
    ids = [item for key, item in value if key == "query_id"] if isinstance(value, _Pairs) else []
    query_id = ids[-1] if ids and isinstance(ids[-1], str) else None
    field, rule = found if found is not None else ("", "a number cannot be read")
    return RecordError(name, number, query_id, field, rule)


def _first_refused(value: Any, path: str) -> tuple[str, str] | None:
    """``(field, rule)`` of the first refused number of a second-parse value (depth bounded by MAX_DEPTH)."""
    if isinstance(value, _Refused):
        return path, value.rule
    if isinstance(value, _Pairs):
        items = ((key_path(path, key), item) for key, item in value)
    elif isinstance(value, list):
        items = ((join_path(path, f"[{index}]"), item) for index, item in enumerate(value))
    else:
        return None
    for item_path, item in items:
        found = _first_refused(item, item_path)
        if found is not None:
            return found
    return None


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
            problem = _non_finite_field(clean, "")
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


def _non_finite_field(value: Any, path: str) -> tuple[str, str] | None:
    """``(field, rule)`` of the first NaN or infinity of a row (JSON's wording)."""
    if type(value) is float and value - value:
        return path, non_finite_rule(value)
    if type(value) is dict:
        items: Iterable[tuple[str, Any]] = ((key_path(path, key), item) for key, item in value.items())
    elif type(value) is list:
        items = ((join_path(path, f"[{index}]"), item) for index, item in enumerate(value))
    else:
        return None
    for item_path, item in items:
        found = _non_finite_field(item, item_path)
        if found is not None:
            return found
    return None


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


class OutputError(AssemblerError):
    """An output could not be created or written (disk full, permission denied, I/O error): exit 1."""

    exit_status: ClassVar[int] = 1


def _write_failure(name: str, exc: OSError) -> OutputError:
    return OutputError(f"cannot write {shown(name)}: {exc.strerror or exc}")


class _Sink(io.FileIO):
    """The raw file under an output's buffers: an ``OSError`` while writing (a full disk, an I/O
    error) becomes an :class:`OutputError` naming the output, whoever writes (the text layer, a
    Parquet writer). A broken pipe stays a ``BrokenPipeError`` (a reader that stopped early)."""

    shown_name = STDIO
    discarding = False

    def write(self, data: Any) -> int:
        if self.discarding:  # a run being cleaned up: its buffered bytes are not wanted
            return len(memoryview(data))
        try:
            return super().write(data) or 0
        except BrokenPipeError:
            raise
        except OSError as exc:
            raise _write_failure(self.shown_name, exc) from None


TEMP_SUFFIX = ".tmp"
_BUFFER = 1 << 20


def temp_pattern(name: str) -> re.Pattern[str]:
    """The names of :class:`AtomicFile`'s temporary files for an output named ``name`` (no folder):
    ``.<name>.<pid>.<8 hex>.tmp``; the pid tells whether their writer still lives."""
    return re.compile(rf"\.{re.escape(name)}\.(\d+)\.[0-9a-f]{{8}}{re.escape(TEMP_SUFFIX)}")


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's live process
        return True
    return True


def remove_stale_temps(target: str) -> list[str]:
    """Remove the temporary files a killed run left for ``target`` (only names of
    :func:`temp_pattern` for that output, and only when their process is dead); return them."""
    folder, name = os.path.split(target)
    pattern = temp_pattern(name)
    removed: list[str] = []
    try:
        entries = os.listdir(folder or ".")
    except OSError:
        return removed
    for entry in entries:
        match = pattern.fullmatch(entry)
        if match is None or _alive(int(match.group(1))):
            continue
        stale = os.path.join(folder, entry)
        try:
            os.unlink(stale)
        except OSError:
            continue
        removed.append(stale)
    return removed


class AtomicFile:
    """An output file, written so that a failed run never leaves a partial one.

    * A regular file (or a new one) is written to a temporary file beside it, flushed to disk
      (``fsync``) and renamed into place on :meth:`commit`; leaving the ``with`` block without
      ``commit`` (an error, Ctrl-C) removes the temporary. A new file gets the mode an ordinary
      file would (the umask applies); an overwritten one keeps its mode (and, where allowed, owner).
      Temporary files of a killed run for the same output are removed first.
    * A symlink is written through: the file it points to is replaced (beside the target), the
      link stays, as ``sort -o`` and ``cp`` do.
    * ``-`` (standard output), a FIFO, a character device and any other non-regular file are
      written straight through: nothing to rename, and streamed output cannot be taken back.

    ``handle`` is text (UTF-8, ``\\n``; a character that cannot be encoded, such as the surrogate
    of a non-UTF-8 file name, is written as a ``\\uXXXX``-style escape) or binary. A failure to
    create or write the file raises :class:`OutputError` naming :attr:`path`.
    """

    def __init__(self, path: str | os.PathLike[str], *, binary: bool = False) -> None:
        self.path = os.fspath(path)
        self._tmp: str | None = None
        self._target = self.path
        self._closed = False
        self._raw: _Sink | None = None
        self.handle: IO[Any]
        if self.path == STDIO:
            sys.stdout.flush()  # what was printed before comes first
            try:
                descriptor = sys.stdout.fileno()
            except (AttributeError, OSError, ValueError):  # a replaced sys.stdout (captured by a test)
                self._closed = True  # nothing of ours to close
                self.handle = sys.stdout.buffer if binary else sys.stdout
                return
            raw = _Sink(descriptor, "wb", closefd=False)
            raw.shown_name = "standard output"
        else:
            raw = self._open()
            raw.shown_name = self.path
        self._raw = raw
        buffered = io.BufferedWriter(raw, _BUFFER)
        self.handle = (
            buffered
            if binary
            else io.TextIOWrapper(buffered, encoding="utf-8", errors="backslashreplace", newline="\n")
        )

    def _open(self) -> _Sink:
        target = os.path.realpath(self.path) if os.path.islink(self.path) else self.path
        self._target = target
        try:
            info: os.stat_result | None = os.stat(target)
        except OSError:
            info = None
        if info is not None and stat.S_ISDIR(info.st_mode):
            raise UsageError(f"cannot write {shown(self.path)}: it is a folder")
        if info is not None and not stat.S_ISREG(info.st_mode):  # FIFO, device, socket: stream into it
            try:
                return _Sink(target, "wb")
            except OSError as exc:
                raise _write_failure(self.path, exc) from None
        folder = os.path.dirname(target) or "."
        if not os.path.exists(folder):
            raise UsageError(f"cannot write {shown(self.path)}: folder {shown(folder)} does not exist")
        if not os.path.isdir(folder):
            raise UsageError(f"cannot write {shown(self.path)}: {shown(folder)} is not a folder")
        remove_stale_temps(target)
        name = os.path.basename(target)
        while True:
            tmp = os.path.join(folder, f".{name}.{os.getpid()}.{secrets.token_hex(4)}{TEMP_SUFFIX}")
            try:
                fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o666)  # umask applies
            except FileExistsError:
                continue
            except OSError as exc:
                raise _write_failure(self.path, exc) from None
            break
        self._tmp = tmp
        try:
            if info is not None:
                _keep_mode(fd, info)
            return _Sink(fd, "wb", closefd=True)
        except BaseException:
            os.close(fd)
            os.unlink(tmp)
            raise

    @property
    def write_path(self) -> str:
        """Where bytes go now (the temporary file, or the destination when streaming)."""
        return self._tmp or self._target

    def commit(self) -> None:
        """Flush and move the finished file into place (a streamed output: flush it)."""
        if self._closed:
            self.handle.flush()
            return
        try:
            self.handle.flush()
            if self._tmp is None:
                self._close()
                return
            os.fsync(self.handle.fileno())
        except BrokenPipeError:
            raise
        except OSError as exc:  # fsync, or a flush that failed before reaching the sink
            raise _write_failure(self.path, exc) from None
        self._close()
        try:
            os.replace(self._tmp, self._target)
        except OSError as exc:
            raise _write_failure(self.path, exc) from None
        self._tmp = None
        _sync_folder(os.path.dirname(self._target) or ".")

    def _close(self) -> None:
        self._closed = True
        with contextlib.suppress(OSError):  # discarding after a failed write: those bytes are not wanted
            self.handle.close()

    def discard(self) -> None:
        """Remove the temporary file (the destination is left as it was); a streamed output keeps
        what was written (best effort) and is closed."""
        if self._closed:
            return
        if self._tmp is None:
            with contextlib.suppress(Exception):  # the run's own error is the one reported
                self.handle.flush()
        if self._raw is not None:
            self._raw.discarding = True
        self._close()
        if self._tmp is None:
            return
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self._tmp)
        self._tmp = None

    def __enter__(self) -> AtomicFile:
        return self

    def __exit__(self, *exc: object) -> None:
        self.discard()


def _keep_mode(fd: int, info: os.stat_result) -> None:
    """Give a replacement the replaced file's mode (and owner, where this process may)."""
    os.fchmod(fd, stat.S_IMODE(info.st_mode))
    if (info.st_uid, info.st_gid) != (os.geteuid(), os.getegid()):
        with contextlib.suppress(OSError):
            os.fchown(fd, info.st_uid, info.st_gid)


def _sync_folder(folder: str) -> None:
    """Make the rename durable (best effort: not every file system lets a folder be opened)."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def package_line(query_id: str, package: str) -> str:
    """One output line: ``{"query_id":<id>,"package":<package>}``."""
    return f'{{"query_id":{escape_string(query_id)},"package":{package}}}\n'


# --- Parquet schemas ---------------------------------------------------------------------------

_LOCATOR = pa.struct([("kind", pa.string()), ("value", pa.string())])
_ATTRIBUTION = pa.struct(
    [
        ("source", pa.string()),
        ("weight", pa.float64()),
        ("count", pa.uint64()),
        ("paragraph", pa.uint32()),
        ("section", pa.string()),
        ("locator", _LOCATOR),
    ]
)
_ASSOCIATION = pa.struct(
    [
        ("subject", pa.string()),
        ("label", pa.string()),
        ("object", pa.string()),
        ("weight", pa.float64()),
        ("count", pa.uint64()),
        ("attributions", pa.list_(_ATTRIBUTION)),
    ]
)
_ACTIVATION = pa.struct([("strength", pa.float64()), ("path", pa.list_(pa.string())), ("association", _ASSOCIATION)])
_LANE_EVIDENCE = pa.struct([("rank", pa.uint64()), ("score", pa.float64())])
_PASSAGE = pa.struct(
    [
        ("source", pa.string()),
        ("paragraph", pa.uint32()),
        ("score", pa.float64()),
        ("text", pa.string()),
        ("lanes", pa.struct([("bm25", _LANE_EVIDENCE), ("vector", _LANE_EVIDENCE)])),
    ]
)
_COMMUNITY = pa.struct(
    [
        ("community", pa.string()),
        ("score", pa.float64()),
        ("text", pa.string()),
        ("paragraph", pa.uint32()),
        ("level", pa.uint64()),
        ("parent", pa.string()),
        ("concept_count", pa.uint64()),
        ("members", pa.list_(pa.struct([("name", pa.string()), ("strength", pa.float64())]))),
        ("members_truncated", pa.bool_()),
    ]
)
_CITATION_ENTRY = pa.struct(
    [
        ("source", pa.string()),
        ("paragraph", pa.uint32()),
        (
            "citation",
            pa.struct(
                [("text", pa.string()), ("source", pa.string()), ("section", pa.string()), ("locator", _LOCATOR)]
            ),
        ),
    ]
)
_LANE_PLAN = pa.struct([("ran", pa.bool_()), ("reason", pa.string()), ("floor", pa.float64())])
LANE_DUMP_SCHEMA = pa.schema(
    [
        ("query_id", pa.string()),
        ("context", pa.string()),
        (
            "request",
            pa.struct(
                [
                    ("origins", pa.list_(pa.string())),
                    ("labels", pa.list_(pa.string())),
                    ("text_fallback_query", pa.string()),
                    ("search_limit", pa.uint64()),
                    ("include_communities", pa.bool_()),
                    (
                        "budget",
                        pa.struct(
                            [("max_items", pa.uint64()), ("max_bytes", pa.uint64()), ("max_tokens", pa.uint64())]
                        ),
                    ),
                    ("rerank", pa.struct([("model", pa.string())])),
                    ("dice_floor", pa.float64()),
                    ("semantic_floor", pa.float64()),
                    ("resolve_limit", pa.uint64()),
                    ("activate_decay", pa.float64()),
                    ("activate_limit", pa.uint64()),
                ]
            ),
        ),
        (
            "lanes",
            pa.struct(
                [
                    ("graph_query", pa.list_(_ASSOCIATION)),
                    ("graph_activate", pa.list_(_ACTIVATION)),
                    ("passages", pa.list_(_PASSAGE)),
                    ("communities", pa.list_(_COMMUNITY)),
                    ("citations", pa.list_(_CITATION_ENTRY)),
                ]
            ),
        ),
        (
            "plan_lanes",
            pa.struct(
                [
                    (name, _LANE_PLAN)
                    for name in ("resolve", "query", "activate", "passages", "communities", "citations")
                ]
            ),
        ),
    ]
)
"""The Parquet form of a lane dump: one row per query, nested columns (see docs/lane-dump.md).

``null`` anywhere means absent; ``origins``/``labels`` are always lists; every ``score`` is stored
as the f64 it was parsed as (rounded to f32 on reading, as from JSON)."""

PACKAGE_SCHEMA = pa.schema(
    [
        ("query_id", pa.string()),
        ("package", pa.string()),
        ("items_used", pa.int64()),
        ("bytes_used", pa.int64()),
        ("tokens_used", pa.int64()),
        ("omitted_total", pa.int64()),
        ("omitted_budget_exceeded", pa.int64()),
        ("omitted_contradiction_group_exceeds_budget", pa.int64()),
        ("omitted_duplicate_passage", pa.int64()),
        ("omitted_evidence_in_passage", pa.int64()),
        ("search_limit_cuts", pa.int64()),
    ]
)
"""The Parquet form of the package stream: the package text plus summary columns."""
