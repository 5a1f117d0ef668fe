"""Readers and writers: lane dumps in (JSON Lines or Parquet, streamed), packages out (atomic).

Readers yield :class:`RawRecord` one input record at a time with its position, so memory stays
bounded by the chunk being assembled, never by the file. Writers write to a temporary file beside
the destination and rename it into place only when the run succeeds: a failed run leaves no
partial output file.
"""

from __future__ import annotations

import json
import math
import os
import sys
import tempfile
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import pyarrow as pa
import pyarrow.parquet as pq

from assembler.contract.jsontext import escape_string
from assembler.contract.wire import object_pairs
from assembler.errors import RecordError, UsageError
from assembler.stages.lanes import drop_nulls

__all__ = [
    "LANE_DUMP_SCHEMA",
    "PACKAGE_SCHEMA",
    "AtomicFile",
    "Inputs",
    "RawRecord",
    "input_paths",
    "is_parquet",
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
                raise UsageError(f"cannot read {path}: {exc.strerror}") from None
            with handle:
                yield from _read_jsonl(handle, path)


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
    try:
        parquet = pq.ParquetFile(path)
    except (OSError, pa.ArrowInvalid) as exc:
        raise UsageError(f"cannot read {path} as Parquet: {exc}") from None
    row = 0
    for batch in parquet.iter_batches(batch_size=batch_rows):
        for value in batch.to_pylist():
            row += 1
            clean = drop_nulls(value)
            yield RawRecord(path, row, clean, row_text(clean))


def row_text(value: Any) -> str:
    """A Parquet row's text in the errors file: compact JSON of the row without its nulls."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


class AtomicFile:
    """A destination written through a temporary file, renamed into place on :meth:`commit`.

    ``-`` writes straight to standard output (nothing to rename; streamed output cannot be taken
    back). Use as a context manager: leaving the block without ``commit`` removes the temporary.
    """

    def __init__(self, path: str, *, binary: bool = False) -> None:
        self.path = path
        self._tmp: str | None = None
        if path == STDIO:
            self.handle: IO[Any] = sys.stdout.buffer if binary else sys.stdout
            return
        target = Path(path)
        if target.is_dir():
            raise UsageError(f"cannot write {path}: it is a folder")
        if not target.parent.exists():
            raise UsageError(f"cannot write {path}: folder {target.parent} does not exist")
        fd, self._tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
        self.handle = os.fdopen(
            fd, "wb" if binary else "w", encoding=None if binary else "utf-8", newline=None if binary else "\n"
        )

    @property
    def write_path(self) -> str:
        """Where bytes go now (the temporary file, or ``-``)."""
        return self._tmp or self.path

    def commit(self) -> None:
        """Flush and move the finished file into place."""
        self.handle.flush()
        if self._tmp is None:
            return
        self.handle.close()
        os.replace(self._tmp, self.path)
        self._tmp = None

    def discard(self) -> None:
        """Remove the temporary file (the destination is left as it was)."""
        if self._tmp is None:
            return
        self.handle.close()
        os.unlink(self._tmp)
        self._tmp = None

    def __enter__(self) -> AtomicFile:
        return self

    def __exit__(self, *exc: object) -> None:
        self.discard()


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
