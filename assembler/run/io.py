"""Readers: lane dumps in (JSON Lines or Parquet, streamed), one :class:`RawRecord` at a time.

Each record comes with its position (file, line or row), so memory stays bounded by the chunk
being assembled, never by the file. Whatever goes wrong with one record (invalid UTF-8 or JSON,
nesting past 128 levels, numbers JSON or the contract refuse, a Parquet value that cannot be read,
a record longer than ``max_record_bytes``) becomes that record's
:class:`~assembler.errors.RecordError`, never an exception of the run.

Every JSON Lines input of every command is opened by :func:`open_input`: gzip and zstd are
decompressed by their magic bytes, and a file that is something else (Parquet, another
compression, binary, a JSON array or pretty-printed JSON) is a
:class:`~assembler.errors.UsageError` naming what it is.
Writers are in :mod:`assembler.run.atomic`, the Parquet schemas in :mod:`assembler.run.schemas`.
"""

from __future__ import annotations

import datetime
import decimal
import io
import json
import os
import re
import sys
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import IO, TYPE_CHECKING, Any

import pyarrow as pa

from assembler.contract.jsoninput import (  # the guarded JSON reader; re-exported here
    NumberRefused,
    first_bad,
    locate_refused_number,
    nesting_depth,
    parse_json,
    syntax_rule,
    too_deep,
)
from assembler.contract.wire import ShapeError, non_finite_rule
from assembler.errors import RecordError, UsageError, encodable, unexpected_rule
from assembler.run.paths import PARQUET_SUFFIXES, shown
from assembler.stages.lanes import drop_nulls, record_id

if TYPE_CHECKING:
    import pyarrow.parquet as pq

__all__ = [
    "DEFAULT_MAX_RECORD_BYTES",
    "MAX_DECOMPRESSED_WHOLE",
    "PARQUET_READ_BYTES",
    "PARQUET_READ_ROWS",
    "RESERVED_COLUMNS",
    "SNIFF_BYTES",
    "InputStream",
    "Inputs",
    "NumberRefused",
    "Oversized",
    "RawRecord",
    "check_json_lines",
    "check_max_record_bytes",
    "check_parquet_columns",
    "input_paths",
    "is_parquet",
    "memory_panics",
    "nesting_depth",
    "not_json_lines",
    "open_input",
    "parquet_batches",
    "parquet_pieces",
    "parquet_record",
    "parse_json",
    "read_input",
    "read_raw",
    "refuse_folder",
    "stream_lines",
    "table_rows",
    "too_deep",
    "unexpected_error",
]

STDIO = "-"

DEFAULT_MAX_RECORD_BYTES = 64 * 2**20
"""The longest record read (64 MiB): a JSON Lines line of more bytes, or a Parquet row of more
decoded bytes, is a record error (:class:`Oversized`) and its text is never held in memory.
Typical records are about 17.5 kB and records of 200 passages about 200 kB. Memory grows about
35 times a record's size while it is assembled: a 20 MB passage peaks at 861 MiB, a 65 MB one
(just under the limit) at 2.3 GiB (docs/lane-dump.md, "Size limit, compression and what is not JSON Lines")."""
PARQUET_READ_ROWS = 16
"""Parquet rows decoded at a time before their size is known (:func:`parquet_pieces`); one row at
a time would cost ten times as much per row (0.2 ms)."""
PARQUET_READ_BYTES = 4 * 2**20
"""Decoded bytes of Parquet rows read at a time once their size is known (at least one row)."""
PARQUET_RUN_ROWS = 1024
"""Rows of consecutive row groups read by one Parquet reader (:func:`parquet_pieces`)."""
MAX_DECOMPRESSED_WHOLE = 2**30
"""A compressed input read whole (:func:`read_input`: eval files, corpora) may decompress to at
most this many bytes (1 GiB), so that a small compressed file cannot fill memory."""
RESERVED_COLUMNS = ("json_line", "source_file", "source_line", "source_error")
"""Column names of the engine's input tables (``assembler.run.batch``); a Parquet lane dump
holding one is refused whole, by every command alike."""


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


_MEMORY_PANIC = re.compile(r"alloc|memory|capacity overflow", re.IGNORECASE)


@contextmanager
def memory_panics() -> Iterator[None]:
    """A Rust panic of Polars or Arrow that says an allocation failed (``PanicException``, a
    ``BaseException``: "Cannot allocate memory to hold CompactString") becomes ``MemoryError``,
    which the command reports as "out of memory" (exit 1) once the run's outputs are cleaned up.

    Only panics surface here: an allocation that fails outside a panic aborts the process
    (``memory allocation of N bytes failed``, exit 134), and the next run writing the same output
    removes the temporary file it left (:func:`assembler.run.atomic.remove_stale_temps`).
    """
    try:
        yield
    except BaseException as exc:
        if type(exc).__name__ == "PanicException" and _MEMORY_PANIC.search(str(exc)):
            raise MemoryError("out of memory (in Polars or Arrow)") from None
        raise


def is_parquet(path: str) -> bool:
    """Parquet by file extension (``.parquet`` / ``.pq``, in any case, as outputs are named);
    everything else is JSON Lines."""
    return path.lower().endswith(PARQUET_SUFFIXES)


def check_max_record_bytes(value: object, name: str = "max_record_bytes") -> int:
    """The record limit, refused unless an integer of at least 1 (``name`` words the message)."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise UsageError(f"{name} must be at least 1, got {value!r}")
    return value


@dataclass(frozen=True)
class Oversized:
    """A record longer than the limit: its size only (a JSON Lines line is skipped to its newline
    without being kept; a Parquet row's decoded size is measured and the row dropped)."""

    size: int
    limit: int
    decoded: bool = False

    @property
    def rule(self) -> str:
        """The rule it broke, as the error says it."""
        what = "bytes decoded" if self.decoded else "bytes"
        return f"record is {self.size} {what}, over the limit of {self.limit} (--max-record-bytes)"

    def record(self, file: str, line: int) -> RawRecord:
        """The record as read: no value, no text (the errors file shows ``""``), and its error."""
        return RawRecord(file, line, None, "", RecordError(file, line, None, "", self.rule))


def read_raw(
    paths: Sequence[str],
    *,
    parquet_batch_rows: int = 256,
    max_record_bytes: int = DEFAULT_MAX_RECORD_BYTES,
) -> Iterator[RawRecord]:
    """Every record of every input in order; ``-`` is standard input (JSON Lines, opened like a
    file by :func:`open_input`). A record over ``max_record_bytes`` is an :class:`Oversized` error."""
    check_max_record_bytes(max_record_bytes)
    for path in paths:
        refuse_folder(path)
        if path != STDIO and is_parquet(path):
            yield from _read_parquet(path, parquet_batch_rows, max_record_bytes)
            continue
        with open_input(path) as handle:
            yield from _read_jsonl(handle, handle.name_shown, max_record_bytes)


def refuse_folder(path: str) -> None:
    """A folder given as a lane dump is a :class:`UsageError` saying what to give (the local
    engine reads files; ``assembler.run.ray.list_inputs`` takes a folder for its files)."""
    if path != STDIO and os.path.isdir(path):
        raise UsageError(
            f"{shown(path)} is a directory: give a JSON Lines or Parquet file "
            "(only assemble --engine ray reads a folder, as the files in it)"
        )


def _read_jsonl(stream: IO[bytes], name: str, max_record_bytes: int | None = None) -> Iterator[RawRecord]:
    for number, raw in stream_lines(stream, max_bytes=max_record_bytes):
        yield raw.record(name, number) if isinstance(raw, Oversized) else line_record(name, number, raw)


# --- opening a JSON Lines input: compression and formats by their magic bytes -----------------------

SNIFF_BYTES = 64 * 1024
"""How much of a JSON Lines input (after decompression) is looked at before a line is read: for a NUL
byte (JSON text never holds one: control characters in strings are escaped, so a NUL there means a
binary file) and for the start of a JSON document (:func:`not_json_lines`)."""
_READ = {b"\x1f\x8b": "gzip", b"\x28\xb5\x2f\xfd": "zstd"}
_REFUSED = (
    (b"PAR1", "is a Parquet file, not JSON Lines (name it .parquet)"),
    (b"\xfd7zXZ\x00", "is xz-compressed: only gzip and zstd are read"),
    (b"BZh", "is bzip2-compressed: only gzip and zstd are read"),
    (b"\x04\x22\x4d\x18", "is lz4-compressed: only gzip and zstd are read"),
    (b"\x1f\x9d", "is compress(1)-compressed (.Z): only gzip and zstd are read"),
    (b"PK\x03\x04", "is a zip archive: only gzip and zstd are read"),
    (b"7z\xbc\xaf\x27\x1c", "is a 7z archive: only gzip and zstd are read"),
)


class InputStream(io.BufferedReader):
    """A JSON Lines input as :func:`open_input` opens it: the bytes of the lines (decompressed),
    with the name errors use (``name_shown``) and the compression read (``compression``)."""

    name_shown: str
    compression: str | None


class _Replay(io.RawIOBase):
    """A stream that gives ``head`` (bytes already read from ``inner``) first, then the rest of
    ``inner``, read into the caller's buffer (no copy of its own); a decompressor's failure is a
    :class:`UsageError` naming the file."""

    def __init__(self, inner: Any, head: bytes, name: str, compression: str | None, owned: bool) -> None:
        super().__init__()
        self.inner, self.head, self.name_shown, self.compression, self.owned = inner, head, name, compression, owned

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        view = memoryview(buffer).cast("B")
        if self.head:
            count = min(len(view), len(self.head))
            view[:count] = self.head[:count]
            self.head = self.head[count:]
            return count
        try:
            return int(self.inner.readinto(view) or 0)
        except (OSError, EOFError, pa.ArrowException) as exc:
            if self.compression is None:
                raise
            reason = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else type(exc).__name__
            what = f"the {self.compression} data is corrupt"
            raise UsageError(f"cannot read {self.name_shown}: {what} ({reason})") from None

    def close(self) -> None:
        if not self.closed and self.owned:
            self.inner.close()
        super().close()


def _read_up_to(stream: Any, size: int) -> bytes:
    """Up to ``size`` bytes of ``stream`` (a pipe may give fewer per read: read until EOF or size)."""
    parts: list[bytes] = []
    wanted = size
    while wanted > 0:
        part = stream.read(wanted)
        if not part:
            break
        parts.append(part)
        wanted -= len(part)
    return b"".join(parts)


def open_input(path: str, *, json_lines: bool = True) -> InputStream:
    """Open a JSON Lines input for reading its lines; ``-`` is standard input (not closed after).

    gzip (``1f 8b``) and zstd (``28 b5 2f fd``) are decompressed as they are read, by Arrow's
    codecs (multi-member and multi-frame too; memory stays that of a block). Anything else that
    cannot be JSON Lines is a :class:`UsageError` before a line is read: a Parquet file, another
    compression or archive format, a file whose first 64 KiB (decompressed) hold a NUL byte
    ("looks binary"), and a JSON document where lines were expected: a JSON array, or an object
    split over lines (:func:`not_json_lines`). A file that cannot be opened or read is a
    :class:`UsageError` too. With ``json_lines=False`` the file is only decompressed, whatever it
    holds (a run or a corpus of any format, :func:`assembler.run.queries.plain_path`).
    """
    try:
        return _open(path, json_lines)
    except OSError as exc:
        where = shown(path) if path != STDIO else "<stdin>"
        raise UsageError(f"cannot read {where}: {exc.strerror or exc}") from None


def _open(path: str, json_lines: bool = True) -> InputStream:
    """:func:`open_input`, an ``OSError`` of opening or of the first read left as it is."""
    if path == STDIO:
        raw: Any = sys.stdin.buffer
        name, owned = "<stdin>", False
    else:
        name, owned = shown(path), True
        raw = open(path, "rb", buffering=0)  # noqa: SIM115 - closed with the returned stream
    try:
        return _sniffed(raw, name, owned, json_lines)
    except BaseException:
        if owned:
            raw.close()
        raise


def _sniffed(raw: Any, name: str, owned: bool, json_lines: bool) -> InputStream:
    """The stream of ``raw`` by its first bytes. A regular file is read from its start again after
    the look (a plain one is then a buffered reader of the file itself); a pipe gets the bytes
    looked at first."""
    seekable = owned and raw.seekable()
    magic = _read_up_to(raw, 8)
    for prefix, what in _REFUSED if json_lines else ():
        if magic.startswith(prefix):
            raise UsageError(f"{name} {what}")
    compression = next((kind for prefix, kind in _READ.items() if magic.startswith(prefix)), None)
    if compression is None:
        head = (magic + _read_up_to(raw, SNIFF_BYTES - len(magic))) if json_lines else magic
    else:
        if seekable:
            raw.seek(0)
        source = raw if seekable else _Replay(raw, magic, name, None, owned)
        decompressed = pa.CompressedInputStream(pa.PythonFile(source, mode="r"), compression)
        raw = _Replay(decompressed, b"", name, compression, True)
        head = _read_up_to(raw, SNIFF_BYTES)
    if json_lines:
        check_json_lines(head, name, compression)
    if compression is None and seekable:
        raw.seek(0)
        stream = InputStream(raw, 1 << 16)
    else:
        stream = InputStream(_Replay(raw, head, name, compression, owned or compression is not None), 1 << 16)
    stream.name_shown, stream.compression = name, compression
    return stream


def check_json_lines(head: bytes, name: str, compression: str | None = None) -> None:
    """Refuse (:class:`UsageError`) an input named ``name`` whose first bytes (``head``, up to
    :data:`SNIFF_BYTES`, decompressed) show it is not JSON Lines: a NUL byte, or a JSON document
    (:func:`not_json_lines`)."""
    if b"\0" in head:
        once = f" once {compression}-decompressed" if compression else ""
        raise UsageError(f"{name} looks binary{once} (a NUL byte in its first 64 KiB): it is not JSON Lines")
    found = not_json_lines(head)
    if found is not None:
        line, what = found
        raise UsageError(f"{name}:{line}: not JSON Lines: {what}; the input holds one JSON object per line")


def not_json_lines(head: bytes) -> tuple[int, str] | None:
    """``(line, what)`` when the first non-blank line of an input shows a JSON document where JSON
    Lines were expected: a JSON array (the first non-blank byte is ``[``; a TSV line, which holds
    a tab, is not one) or a pretty-printed object (the line is a lone ``{``). Only ``head`` is
    looked at (a first line longer than it is judged by its start).

    >>> not_json_lines(b'\\n[{"query_id": "q1"},\\n'), not_json_lines(b'{\\n  "query_id": "q1"\\n}\\n')
    ((2, 'a JSON array'), (1, "an object split over lines? (the line is a lone '{', as pretty-printed JSON writes it)"))
    >>> not_json_lines(b'{"query_id": "q1"}\\n'), not_json_lines(b'[q1]\\tWho?\\n')
    (None, None)
    """
    body = head.lstrip(b" \t\r\n")
    first = body.split(b"\n", 1)[0].rstrip(b" \t\r")
    line = head.count(b"\n", 0, len(head) - len(body)) + 1
    if first.startswith(b"[") and b"\t" not in first:
        return line, "a JSON array"
    if first == b"{":
        return line, "an object split over lines? (the line is a lone '{', as pretty-printed JSON writes it)"
    return None


def read_input(path: str | os.PathLike[str], *, limit: int = MAX_DECOMPRESSED_WHOLE) -> bytes:
    """The whole content of a JSON Lines input as :func:`open_input` reads it (decompressed), for
    loaders that read a file at once (eval files, corpora). A compressed file that decompresses to
    more than ``limit`` bytes, and a file that is not JSON Lines, are a :class:`UsageError`; an
    ``OSError`` of opening or reading is left to the caller to word (its loader names the file)."""
    with _open(os.fspath(path)) as stream:
        if stream.compression is None:
            return stream.read()
        data = stream.read(limit + 1)
        if len(data) > limit:
            raise UsageError(
                f"{stream.name_shown} decompresses to more than {limit} bytes, the most read of a compressed "
                "file read whole"
            )
        return data


def jsonl_lines(stream: Iterable[bytes]) -> Iterator[tuple[int, bytes]]:
    """``(line number, bytes without the newline)`` of every non-blank line."""
    for number, raw_line in enumerate(stream, start=1):
        raw = raw_line.rstrip(b"\r\n")
        if not raw.strip():
            continue  # blank lines separate nothing and are skipped
        yield number, raw


def stream_lines(
    stream: IO[bytes], block_size: int = 1 << 20, *, max_bytes: int | None = None
) -> Iterator[tuple[int, bytes | Oversized]]:
    """:func:`jsonl_lines` of a binary stream, read in blocks: the same numbers and bytes, with the
    splitting done by ``bytes.split`` (a line iterator is slow on long lines). A line longer than a
    block is joined once from its pieces.

    With ``max_bytes``, a line of more bytes (counted without its line ending, ``\\n`` or
    ``\\r\\n``) comes as :class:`Oversized` instead: once its pieces pass the limit they are dropped
    and the rest of the line only counted, so memory stays about ``max_bytes`` plus a block
    whatever the input (a stream without a newline is one line). A line of whitespace only is
    blank, however long.
    """
    limit = -1 if max_bytes is None else max_bytes
    number = 0
    pending: list[bytes] = []  # the pieces of the line being read
    held = 0  # their bytes
    skipped = -1  # bytes of the over-long line being skipped (-1: none is)
    blank = True  # that line is whitespace so far
    last = b""  # and its last byte

    def line(raw: bytes) -> bytes | Oversized | None:
        """A whole line (no newline) as given: None when blank, else its bytes or its size."""
        stripped = raw.rstrip(b"\r")
        if not stripped or stripped.isspace():  # blank lines separate nothing and are skipped
            return None
        size = len(raw) - raw.endswith(b"\r")
        return Oversized(size, limit) if 0 <= limit < size else stripped

    while block := stream.read(block_size):
        parts = block.split(b"\n")
        tail = parts.pop()
        if parts:  # the line being read ends in this block
            first = parts[0]
            number += 1
            if skipped >= 0:
                if not (blank and (not first or first.isspace())):
                    ending = first[-1:] if first else last
                    yield number, Oversized(skipped + len(first) - (ending == b"\r"), limit)
                skipped, blank = -1, True
            else:
                if pending:
                    first = b"".join([*pending, first])
                    pending, held = [], 0
                got = line(first)
                if got is not None:
                    yield number, got
            for raw in parts[1:]:
                number += 1
                got = line(raw)
                if got is not None:
                    yield number, got
        if not tail:
            continue
        if skipped >= 0:
            skipped += len(tail)
            blank, last = blank and tail.isspace(), tail[-1:]
            continue
        pending.append(tail)
        held += len(tail)
        if 0 <= limit < held - tail.endswith(b"\r"):  # over the limit: from here on only counted
            skipped, blank, last = held, all(piece.isspace() for piece in pending), tail[-1:]
            pending, held = [], 0
    if skipped >= 0:
        if not blank:
            yield number + 1, Oversized(skipped - (last == b"\r"), limit)
    elif pending:
        got = line(b"".join(pending))
        if got is not None:
            yield number + 1, got


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
        return RawRecord(name, number, None, text, RecordError(name, number, None, "", syntax_rule(exc, text)))
    except MemoryError:
        raise
    except Exception as exc:  # last resort: a failure confined to one line is that line's error
        return RawRecord(name, number, None, text, unexpected_error(name, number, None, exc, "reading"))
    return RawRecord(name, number, value, text)


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


def parquet_file(source: str | IO[bytes]) -> pq.ParquetFile:
    """A Parquet file to read. ``pyarrow.parquet`` loads here, on first use: with Arrow's file
    systems it costs about 40 ms of CPU to import, and only Parquet inputs and outputs need it."""
    import pyarrow.parquet as pq

    return pq.ParquetFile(source)


def parquet_writer(sink: IO[bytes], schema: pa.Schema) -> pq.ParquetWriter:
    """A Parquet writer of ``schema`` rows into ``sink`` (``pyarrow.parquet`` loads on first use,
    as for :func:`parquet_file`)."""
    import pyarrow.parquet as pq

    return pq.ParquetWriter(sink, schema)


def _read_parquet(path: str, batch_rows: int, max_record_bytes: int) -> Iterator[RawRecord]:
    name = shown(path)
    try:
        # A name that is not UTF-8 is opened by Python (Arrow cannot encode its surrogates).
        parquet = parquet_file(path if name == path else open(path, "rb"))  # noqa: SIM115
    except (OSError, pa.ArrowInvalid) as exc:
        raise UsageError(f"cannot read {name} as Parquet: {exc}") from None
    check_parquet_columns(parquet.schema_arrow.names, name)
    row = 0
    for piece in parquet_pieces(path, parquet, max_record_bytes=max_record_bytes, batch_rows=batch_rows):
        if isinstance(piece, Oversized):
            row += 1
            yield piece.record(name, row)
            continue
        for value, problem in table_rows(pa.Table.from_batches([piece])):
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
        except MemoryError:
            raise
        except (OSError, pa.ArrowException) as exc:
            reason = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else type(exc).__name__
            raise UsageError(f"cannot read {shown(name)} as Parquet (a corrupt page?): {reason}") from None
        yield batch


def parquet_pieces(
    name: str,
    parquet: pq.ParquetFile,
    *,
    max_record_bytes: int = DEFAULT_MAX_RECORD_BYTES,
    batch_rows: int = 256,
    row_groups: Sequence[int] | None = None,
) -> Iterator[pa.RecordBatch | Oversized]:
    """The rows of a Parquet file in order, decoded a few at a time: runs of rows as batches, and in
    place of each row of more than ``max_record_bytes`` decoded bytes (its Arrow buffers,
    ``nbytes``) an :class:`Oversized`. Rows are measured one by one only in a batch larger than
    the limit.

    The first row group is decoded :data:`PARQUET_READ_ROWS` rows at a time; from then on as many
    rows as fill :data:`PARQUET_READ_BYTES` by the size of the rows read last (at least one, at
    most ``batch_rows``), for each next run of row groups (a reader reads a run of about
    :data:`PARQUET_RUN_ROWS` rows). So memory stays a few rows of the file beyond the chunk, and
    typical rows are read 256 at a time, which costs half as much per row as 16 at a time.
    """
    groups = list(range(parquet.metadata.num_row_groups)) if row_groups is None else list(row_groups)
    size = min(batch_rows, PARQUET_READ_ROWS)
    for run in _group_runs(parquet, groups):
        for batch in parquet_batches(name, parquet, batch_size=size, row_groups=run):
            if batch.num_rows:
                size = max(1, min(batch_rows, PARQUET_READ_BYTES * batch.num_rows // max(1, batch.nbytes)))
            if batch.nbytes <= max_record_bytes:
                yield batch
                continue
            start = 0
            for index, row_bytes in enumerate(row_sizes(batch)):
                if row_bytes > max_record_bytes:
                    if index > start:
                        yield batch.slice(start, index - start)
                    yield Oversized(row_bytes, max_record_bytes, decoded=True)
                    start = index + 1
            if start < batch.num_rows:
                yield batch.slice(start)


def _group_runs(parquet: pq.ParquetFile, groups: Sequence[int]) -> Iterator[list[int]]:
    """The first row group alone (read before any row's size is known), then consecutive row groups
    in runs of at least :data:`PARQUET_RUN_ROWS` rows (the last may hold fewer): each run is read
    by a reader of its own, whose batch size is chosen before it."""
    if not groups:
        return
    yield [groups[0]]
    run: list[int] = []
    rows = 0
    for group in groups[1:]:
        run.append(group)
        rows += parquet.metadata.row_group(group).num_rows
        if rows >= PARQUET_RUN_ROWS:
            yield run
            run, rows = [], 0
    if run:
        yield run


def row_sizes(batch: pa.RecordBatch | pa.Table) -> list[int]:
    """The decoded bytes of every row (the buffer ranges each row's values take, ``nbytes``)."""
    return [batch.slice(index, 1).nbytes for index in range(batch.num_rows)]


def check_parquet_columns(names: Sequence[str], file: str) -> None:
    """The columns of a Parquet lane dump, refused whole as every command refuses them: a repeated
    name (:func:`check_unique_columns`) or a name of :data:`RESERVED_COLUMNS` (a ``json_line``
    column would make the file a table of JSON text to one reader and a record field to another)."""
    check_unique_columns(names, file)
    reserved = [name for name in names if name in RESERVED_COLUMNS]
    if reserved:
        raise UsageError(
            f"{file}: column {reserved[0]!r} is reserved for the engine's input tables: a Parquet lane dump "
            "holds the lane-dump columns (query_id, context, request, lanes, plan_lanes)"
        )


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
