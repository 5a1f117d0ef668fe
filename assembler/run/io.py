"""Readers and writers: lane dumps in (JSON Lines or Parquet, streamed), packages out (atomic).

Readers yield :class:`RawRecord` one input record at a time with its position, so memory stays
bounded by the chunk being assembled, never by the file. Writers write to a temporary file beside
the destination and rename it into place only when the run succeeds: a failed run leaves no
partial output file.
"""

from __future__ import annotations

import contextlib
import io
import json
import math
import os
import re
import secrets
import stat
import sys
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import IO, Any, ClassVar

import pyarrow as pa
import pyarrow.parquet as pq

from assembler.contract.jsontext import escape_string
from assembler.contract.wire import object_pairs
from assembler.errors import AssemblerError, RecordError, UsageError
from assembler.run.paths import shown
from assembler.stages.lanes import drop_nulls

__all__ = [
    "LANE_DUMP_SCHEMA",
    "PACKAGE_SCHEMA",
    "AtomicFile",
    "Inputs",
    "OutputError",
    "RawRecord",
    "input_paths",
    "is_parquet",
    "parquet_batches",
    "read_raw",
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
    """One JSON Lines line as a record, or the reason it is not valid UTF-8 JSON."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        shown = raw.decode("utf-8", "replace")
        error = RecordError(name, number, None, "", f"invalid UTF-8 at byte {exc.start} of the line")
        return RawRecord(name, number, None, shown, error)
    try:
        value = parse_json(text)
    except ValueError as exc:  # json.JSONDecodeError is a ValueError too
        where = f" at column {exc.colno}: {exc.msg}" if isinstance(exc, json.JSONDecodeError) else f": {exc}"
        return RawRecord(name, number, None, text, RecordError(name, number, None, "", f"invalid JSON{where}"))
    return RawRecord(name, number, value, text)


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def _parse_float(text: str) -> float:
    value = float(text)
    if math.isinf(value):
        raise ValueError("number out of range")
    return value


def parse_json(text: str) -> Any:
    """Parse one JSON document as serde_json would: no NaN/Infinity, no out-of-range numbers.

    Repeated keys are remembered so that validation can refuse a repeated known field.
    """
    return json.loads(text, parse_constant=_refuse_constant, parse_float=_parse_float, object_pairs_hook=object_pairs)


def _read_parquet(path: str, batch_rows: int) -> Iterator[RawRecord]:
    name = shown(path)
    try:
        # A name that is not UTF-8 is opened by Python (Arrow cannot encode its surrogates).
        parquet = pq.ParquetFile(path if name == path else open(path, "rb"))  # noqa: SIM115
    except (OSError, pa.ArrowInvalid) as exc:
        raise UsageError(f"cannot read {name} as Parquet: {exc}") from None
    row = 0
    for batch in parquet_batches(path, parquet, batch_size=batch_rows):
        for value in batch.to_pylist():
            row += 1
            clean = drop_nulls(value)
            yield RawRecord(name, row, clean, row_text(clean))


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


def row_text(value: Any) -> str:
    """A Parquet row's text in the errors file: compact JSON of the row without its nulls."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


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
