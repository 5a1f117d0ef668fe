"""The engine-agnostic entry point: an Arrow table of lane-dump rows in, Arrow tables of packages out.

Every engine calls :func:`assemble_table` on one batch: the local engine (``assembler.run.local``)
on each chunk it reads, the Ray engine (``assembler.run.ray``) inside ``map_batches``. It reads
the records as columns (:mod:`assembler.stages.lanes_columnar`), hands what the columns cannot
decide to the record rules (:func:`assembler.stages.lanes.parse_record`, through
:func:`assembler.run.records.iter_records`) and assembles with :func:`assembler.pipeline.assemble_lanes`.

An input table has one of two forms (docs/scaling.md):

* **JSON Lines**: a column ``json_line`` (binary or string), one lane-dump line per row, as read
  from the file without its newline. Blank or null rows are skipped, as blank lines are.
* **Parquet**: the lane-dump columns themselves (``assembler.run.schemas.LANE_DUMP_SCHEMA``, or any table
  whose rows read as lane-dump objects; null means absent).

Either form may carry ``source_file`` (string) and ``source_line`` (1-based line or row) to name
records in errors; without them records are ``<memory>`` rows 1, 2, ...  Other columns of the
JSON Lines form are ignored; in the Parquet form every other column belongs to the record.

A third form holds records the file readers refused before they were held (a record over the size
limit, :class:`~assembler.run.io.Oversized`): a table with a ``source_error`` column (the rule),
beside ``source_file`` and ``source_line``; every row of it is a rejected record whose text is not
kept (the errors file shows ``""``). :func:`file_tables` yields such a row as a table of its own.
"""

from __future__ import annotations

import io
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import IO, TYPE_CHECKING, Any, Literal

import numpy as np
import polars as pl
import pyarrow as pa

from assembler.contract.arrow import byte_total, numbers
from assembler.contract.request import clamped_fields, ignored_budget_keys
from assembler.errors import InputError, RecordError, UsageError, encodable
from assembler.errors import shown as shown_key
from assembler.pipeline import BatchResult, assemble_lanes
from assembler.run.io import (
    DEFAULT_MAX_RECORD_BYTES,
    RESERVED_COLUMNS,
    InputStream,
    Oversized,
    RawRecord,
    check_parquet_columns,
    check_unique_columns,
    is_parquet,
    line_record,
    open_input,
    parquet_file,
    parquet_pieces,
    parquet_record,
    refuse_folder,
    row_sizes,
    row_text,
    stream_lines,
    table_rows,
)
from assembler.run.paths import shown
from assembler.run.records import iter_records
from assembler.run.schemas import PACKAGE_SCHEMA
from assembler.selection import CONTRACT, SelectionPolicy
from assembler.stages.lanes import LaneBatch, LaneRecord, QueryRecord, build_batch, concat_batches, repeated_query_id
from assembler.stages.lanes_columnar import ColumnarLanes, read_lane_lines, read_lane_rows

if TYPE_CHECKING:
    from assembler.stages.reorder import Reranker

__all__ = [
    "JSON_LINE",
    "NAMED_BUDGET_KEYS",
    "REJECTED_SCHEMA",
    "SOURCE_ERROR",
    "SOURCE_FILE",
    "SOURCE_LINE",
    "ArrowResult",
    "BudgetNote",
    "arrow_column",
    "assemble_table",
    "budget_note",
    "file_tables",
    "ignored_keys_shown",
    "lines_table",
    "packages_table",
    "read_tables",
    "record_texts",
    "rejected_entries",
    "summary_counts",
]

JSON_LINE, SOURCE_FILE, SOURCE_LINE, SOURCE_ERROR = RESERVED_COLUMNS
_SOURCE_COLUMNS = (SOURCE_FILE, SOURCE_LINE, SOURCE_ERROR)
_TEXT_TYPES = (pa.binary(), pa.large_binary(), pa.string(), pa.large_string())

REJECTED_SCHEMA = pa.schema(
    [
        ("file", pa.string()),
        ("line", pa.int64()),
        ("query_id", pa.string()),
        ("field", pa.string()),
        ("rule", pa.string()),
        ("record", pa.string()),
    ]
)
"""Rejected records: the fields of the errors file (docs/lane-dump.md), ``record`` untouched."""


NAMED_BUDGET_KEYS = 10
"""How many distinct keys that are no budget field a run names; the records holding others are
only counted (of one record, the first eleven such keys are looked at), so that a dump of made-up
keys can fill neither memory nor the terminal."""


@dataclass(frozen=True)
class BudgetNote:
    """What one record's budget asked that its package does not do: ``ignored`` keys that are no
    budget field (as shown in messages: escaped, at most 80 characters; at most
    :data:`NAMED_BUDGET_KEYS` + 1 of them), and ``clamped`` fields asked above the contract's
    ceiling (by the request or an override)."""

    ignored: tuple[str, ...] = ()
    clamped: tuple[str, ...] = ()


def ignored_keys_shown(value: Any) -> tuple[str, ...]:
    """The keys of a lane-dump object's budget that are no budget field, as messages show them
    (at most :data:`NAMED_BUDGET_KEYS` + 1 of them)."""
    request = value.get("request") if isinstance(value, dict) else None
    return tuple(map(shown_key, ignored_budget_keys(request)[: NAMED_BUDGET_KEYS + 1]))


def budget_note(record: QueryRecord, value: Any, overrides: Mapping[str, int]) -> BudgetNote | None:
    """The :class:`BudgetNote` of an accepted record (``value``: its lane-dump object, or ``None``
    when the columnar reader took it, which refuses any unknown key), ``None`` if it has nothing."""
    ignored = ignored_keys_shown(value)
    clamped = clamped_fields(record.request.budget, overrides) if record.request.budget or overrides else []
    if not ignored and not clamped:
        return None
    return BudgetNote(ignored, tuple(clamped))


@dataclass(frozen=True, eq=False)  # holds frames or arrays: compared by identity
class ArrowResult:
    """One batch assembled.

    ``packages`` (``assembler.run.schemas.PACKAGE_SCHEMA``) has one row per accepted record and
    ``rejected`` (:data:`REJECTED_SCHEMA`) one per rejected record, each in input order;
    ``package_rows`` / ``rejected_rows`` give each row's index in the input table. ``batch`` is
    the pipeline's own result (package texts as Python strings, decisions, summaries).
    ``budget_notes`` holds the :class:`BudgetNote` of each package (by its index) that has one.
    """

    batch: BatchResult
    rejected: pa.Table
    package_rows: list[int]
    rejected_rows: list[int]
    budget_notes: dict[int, BudgetNote] = field(default_factory=dict)

    @cached_property
    def packages(self) -> pa.Table:
        """The packages with their summary columns (made on first use: the local engine needs none)."""
        return packages_table(self.batch)


def assemble_table(
    table: pa.Table | pa.RecordBatch,
    *,
    overrides: Mapping[str, int] | None = None,
    policy: SelectionPolicy = CONTRACT,
    on_error: Literal["stop", "skip"] = "skip",
    seen: set[str] | None = None,
    reranker: Reranker | None = None,
) -> ArrowResult:
    """Validate and assemble every lane-dump row of ``table``.

    A bad record raises :class:`~assembler.errors.InputError` with ``on_error="stop"`` and is
    returned in ``rejected`` with ``"skip"``. A query id met earlier in the table, or found in
    ``seen`` (the ids of earlier batches, updated in place), is a duplicate.
    """
    if isinstance(table, pa.RecordBatch):
        table = pa.Table.from_batches([table])
    text_form = _text_form(table)
    rejected: list[tuple[RawRecord, RecordError]] = []
    rejected_rows: list[int] = []
    package_rows: list[int] = []
    notes: dict[int, BudgetNote] = {}
    checked = dict(overrides or {})
    seen = set() if seen is None else seen

    def reject_row(index: int) -> Callable[[RawRecord, RecordError], None]:
        def reject(raw: RawRecord, error: RecordError) -> None:
            if on_error == "stop":
                raise InputError(error)
            rejected.append((raw, error))
            rejected_rows.append(index)

        return reject

    batch = _columnar_lanes(table, text_form, reject_row, checked, seen, package_rows, notes)
    return ArrowResult(
        batch=assemble_lanes(batch, policy=policy, reranker=reranker),
        rejected=_rejected_table(rejected, text_form),
        package_rows=package_rows,
        rejected_rows=rejected_rows,
        budget_notes=notes,
    )


def _columnar_lanes(
    table: pa.Table,
    text_form: bool,
    reject_row: Callable[[int], Callable[[RawRecord, RecordError], None]],
    overrides: dict[str, int],
    seen: set[str],
    package_rows: list[int],
    notes: dict[int, BudgetNote],
) -> LaneBatch:
    """The lanes of an input table: the columnar reader takes what it can
    (:mod:`assembler.stages.lanes_columnar`), the record path validates the rest and words every
    error; records stay in input order and a repeated query id is refused wherever it is. The
    budget notes of the records kept go into ``notes``."""
    indices, fast, raw_of = _read_columns(table, text_form, overrides)
    records: list[QueryRecord] = []
    fast_targets: list[int | None] = []
    slow_records: list[LaneRecord] = []
    slow_targets: list[int | None] = []
    taken = iter(fast.batch.records)
    for k, index in enumerate(indices):
        reject = reject_row(index)
        value = None
        if fast.taken[k]:
            record = next(taken)
            repeated = repeated_query_id(record, seen)
            if repeated is not None:
                reject(raw_of(k), repeated)
                fast_targets.append(None)
                continue
            fast_targets.append(len(records))
        else:
            accepted = list(iter_records([raw_of(k)], reject, overrides, seen))
            if not accepted:
                continue
            raw, record = accepted[0]
            value = raw.value
            slow_records.append(record)
            slow_targets.append(len(records))
        note = budget_note(record, value, overrides)
        if note is not None:
            notes[len(records)] = note
        records.append(record)
        package_rows.append(index)
    if not slow_records:
        return concat_batches([(fast.batch, fast_targets)], records) if None in fast_targets else fast.batch
    return concat_batches([(fast.batch, fast_targets), (build_batch(slow_records), slow_targets)], records)


def _read_columns(
    table: pa.Table, text_form: bool, overrides: dict[str, int]
) -> tuple[list[int], ColumnarLanes, Callable[[int], RawRecord]]:
    """The row index of every record of the table, what the columnar reader took of them, and the
    record-path form of the ``k``-th one (made only when needed)."""
    if SOURCE_ERROR in table.column_names:  # records refused while reading: each is its error
        refused = [raw for _, raw in _refused_raws(table)]
        none_taken = ColumnarLanes(np.zeros(len(refused), dtype=bool), build_batch([]))
        return list(range(len(refused))), none_taken, refused.__getitem__
    if text_form:
        lines = list(_table_lines(table))
        fast = read_lane_lines(
            [data for _, _, _, data in lines],
            sources=[file for _, file, _, _ in lines],
            line_numbers=[line for _, _, line, _ in lines],
            overrides=overrides,
        )
        return [row[0] for row in lines], fast, lambda k: line_record(*lines[k][1:])
    files, numbers = _sources(table)
    records = _record_columns(table, files)
    fast = read_lane_rows(records, sources=files, line_numbers=numbers, overrides=overrides)

    def raw_of(k: int) -> RawRecord:
        # The text is made only if the record is rejected (see _rejected_table).
        value, problem = table_rows(records.slice(k, 1))[0]
        return parquet_record(files[k], numbers[k], value, problem)

    return list(range(table.num_rows)), fast, raw_of


def _sources(table: pa.Table) -> tuple[list[str], list[int]]:
    """The file and line of every row (``<memory>`` rows 1, 2, ... without source columns)."""
    n = table.num_rows
    files = table.column(SOURCE_FILE).to_pylist() if SOURCE_FILE in table.column_names else ["<memory>"] * n
    lines = table.column(SOURCE_LINE).to_pylist() if SOURCE_LINE in table.column_names else list(range(1, n + 1))
    return files, lines


def _record_columns(table: pa.Table, files: Sequence[str]) -> pa.Table:
    """The lane-dump columns of a Parquet-form table (refused when a name repeats)."""
    record_columns = [name for name in table.column_names if name not in _SOURCE_COLUMNS]
    check_unique_columns(record_columns, files[0] if files else "<memory>")
    return table.select(record_columns)


def _table_lines(table: pa.Table) -> Iterator[tuple[int, str, int, bytes]]:
    """``(row index, file, line, bytes)`` of every non-blank row of a ``json_line`` table."""
    files, lines = _sources(table)
    column = table.column(JSON_LINE)
    if column.type not in _TEXT_TYPES:
        raise UsageError(f"column {JSON_LINE} must be binary or string, not {column.type}")
    for index, (file, line, raw) in enumerate(zip(files, lines, column.to_pylist(), strict=True)):
        data = raw.encode("utf-8") if isinstance(raw, str) else raw
        if data is not None and data.strip():
            yield index, file, line, data


def _text_form(table: pa.Table) -> bool:
    """Whether a record's text in the errors file is its line as read (the JSON Lines form, and
    refused records, whose text is not kept), rather than made from its Parquet row."""
    return JSON_LINE in table.column_names or SOURCE_ERROR in table.column_names


def _refused_raws(table: pa.Table) -> Iterator[tuple[int, RawRecord]]:
    """``(row index, record)`` of a table of records refused while reading (``source_error``)."""
    files, lines = _sources(table)
    for index, (file, line, rule) in enumerate(zip(files, lines, table.column(SOURCE_ERROR).to_pylist(), strict=True)):
        error = RecordError(file, line, None, "", rule if isinstance(rule, str) else "refused while reading")
        yield index, RawRecord(file, line, None, "", error)


def refused_table(name: str, line: int, refused: Oversized) -> pa.Table:
    """A one-row input table of a record refused while reading (the ``source_error`` form)."""
    table = pa.table({SOURCE_ERROR: arrow_column([refused.rule], pl.String)})
    return _with_source(table, name, [line])


def _table_raws(table: pa.Table, text_form: bool) -> Iterator[tuple[int, RawRecord]]:
    """``(row index, record)`` of every row that holds a record (all through the record path)."""
    if SOURCE_ERROR in table.column_names:
        yield from _refused_raws(table)
        return
    if text_form:
        for index, file, line, data in _table_lines(table):
            yield index, line_record(file, line, data)
        return
    files, lines = _sources(table)
    values = table_rows(_record_columns(table, files))
    for index, (file, line, (value, problem)) in enumerate(zip(files, lines, values, strict=True)):
        yield index, parquet_record(file, line, value, problem)


def packages_table(result: BatchResult) -> pa.Table:
    """The packages of a batch as ``assembler.run.schemas.PACKAGE_SCHEMA`` rows, in input order."""
    summaries = result.summaries.drop("query_id").to_arrow()
    columns: dict[str, Any] = {
        "query_id": arrow_column(result.query_ids, pl.String),
        "package": result.package_column.to_arrow(compat_level=pl.CompatLevel.oldest()),
    }
    columns.update({name: summaries.column(name) for name in summaries.column_names})
    return pa.table(columns).cast(PACKAGE_SCHEMA)


def _shown(raw: RawRecord, text_form: bool) -> str:
    """A record's text as the errors file shows it (a Parquet row's is made here, when needed);
    always valid UTF-8."""
    return encodable(raw.text) if text_form else row_text(raw.value)


def _rejected_table(rejected: Sequence[tuple[RawRecord, RecordError]], text_form: bool) -> pa.Table:
    if not rejected:  # the usual chunk: no cast (a cast imports pyarrow.compute, ~40 ms of start-up)
        return pa.Table.from_batches([], schema=REJECTED_SCHEMA)  # empty_table() imports pandas
    columns: dict[str, list[Any]] = {name: [] for name in REJECTED_SCHEMA.names}
    for raw, error in rejected:
        for name, value in error.as_dict().items():
            columns[name].append(value)
        columns["record"].append(_shown(raw, text_form))
    types = {"line": pl.Int64}
    arrays = [arrow_column(columns[name], types.get(name, pl.String)) for name in REJECTED_SCHEMA.names]
    return pa.Table.from_arrays(arrays, names=REJECTED_SCHEMA.names).cast(REJECTED_SCHEMA)


def record_texts(table: pa.Table) -> Iterator[tuple[int, str]]:
    """``(line, text)`` of every record of an input table, the text as the errors file shows it."""
    text_form = _text_form(table)
    for _, raw in _table_raws(table, text_form):
        yield raw.line, _shown(raw, text_form)


def rejected_entries(table: pa.Table) -> Iterator[tuple[RawRecord, RecordError]]:
    """The rows of a :data:`REJECTED_SCHEMA` table as ``(record, error)`` pairs."""
    for row in table.to_pylist():
        error = RecordError(row["file"], row["line"], row["query_id"], row["field"], row["rule"])
        yield RawRecord(row["file"], row["line"], None, row["record"]), error


def summary_counts(packages: pa.Table) -> dict[str, int]:
    """Column sums of a packages table (items, omissions by reason, search-limit cuts)."""
    return {name: int(numbers(packages.column(name)).sum()) for name in PACKAGE_SCHEMA.names[2:]}


# --- reading files into input tables --------------------------------------------------------------


def file_tables(
    name: str,
    stream: IO[bytes],
    *,
    parquet: bool,
    rows: int,
    first_line: int = 1,
    row_groups: Sequence[int] | None = None,
    max_bytes: int | None = None,
    max_record_bytes: int = DEFAULT_MAX_RECORD_BYTES,
) -> Iterator[pa.Table]:
    """One input file as input tables of at most ``rows`` rows, each row named ``name`` + line/row.

    JSON Lines gives the ``json_line`` form (blank lines dropped, line numbers kept), Parquet the
    lane-dump columns of the file. The same rules as :func:`assembler.run.io.read_raw`. A part of a
    file is read by giving the line (or row) it starts at, and for Parquet its ``row_groups``.
    With ``max_bytes`` a table also ends at the line (or row) that reaches that many bytes: of
    JSON text, or of decoded Arrow buffers for Parquet. A record over ``max_record_bytes`` comes
    as a one-row table of the ``source_error`` form, between the tables of the records around it.
    """
    if parquet:
        yield from _parquet_tables(name, stream, rows, first_line, row_groups, max_bytes, max_record_bytes)
        return
    numbers: list[int] = []
    lines: list[bytes] = []
    size = 0

    def table() -> pa.Table:
        # The lines are let go before the table is yielded: the chunk is assembled while this
        # generator waits, and would otherwise be held twice (as Python bytes and in Arrow).
        nonlocal numbers, lines, size
        made = _with_source(lines_table(lines), name, numbers)
        numbers, lines, size = [], [], 0
        return made

    for number, raw in stream_lines(stream, max_bytes=max_record_bytes):
        if isinstance(raw, Oversized):
            if lines:
                yield table()
            yield refused_table(name, number + first_line - 1, raw)
            continue
        numbers.append(number + first_line - 1)
        lines.append(raw)
        size += len(raw)
        del raw
        if len(lines) >= rows or (max_bytes is not None and size >= max_bytes):
            yield table()
    if lines:
        yield table()


def range_table(raw: IO[bytes], name: str, start: int, end: int, *, first_line: int, max_record_bytes: int) -> pa.Table:
    """The records of a plain JSON Lines file from byte ``start`` (where line ``first_line``
    begins) to byte ``end`` as one table, read as :func:`file_tables` reads the whole file: the
    same rows, named ``name`` and by the file's own line numbers. ``raw`` is the file opened
    unbuffered (read from ``start`` on). A record over ``max_record_bytes`` would come as a
    table of its own (the ranges of a chunk hold none: such a record is a chunk of its own)."""
    raw.seek(start)
    stream = io.BufferedReader(_ByteRange(raw, end - start), 1 << 16)
    tables = list(
        file_tables(
            name, stream, parquet=False, rows=sys.maxsize, first_line=first_line, max_record_bytes=max_record_bytes
        )
    )
    return pa.concat_tables(tables) if tables else _with_source(lines_table([]), name, [])


class _ByteRange(io.RawIOBase):
    """The next ``size`` bytes of an unbuffered file."""

    def __init__(self, raw: IO[bytes], size: int) -> None:
        super().__init__()
        self.raw, self.left = raw, size

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        view = memoryview(buffer).cast("B")[: self.left]
        count = int(self.raw.readinto(view) or 0) if len(view) else 0  # type: ignore[attr-defined]
        self.left -= count
        return count


def _parquet_tables(
    name: str,
    stream: IO[bytes],
    rows: int,
    first_line: int,
    row_groups: Sequence[int] | None,
    max_bytes: int | None,
    max_record_bytes: int,
) -> Iterator[pa.Table]:
    """:func:`file_tables` of a Parquet file: its rows decoded a few at a time
    (:func:`~assembler.run.io.parquet_pieces`), gathered into tables of ``rows`` rows that also end
    at the row reaching ``max_bytes`` decoded bytes."""
    try:
        parquet = parquet_file(stream)
    except (OSError, pa.ArrowInvalid) as exc:
        raise UsageError(f"cannot read {shown(name)} as Parquet: {exc}") from None
    check_parquet_columns(parquet.schema_arrow.names, name)
    budget = max_bytes if max_bytes is not None else -1
    first = first_line
    pending: list[pa.RecordBatch] = []
    count = size = 0

    def table() -> pa.Table:
        # One contiguous chunk: the columnar reader is a third slower on a table of many small ones.
        joined = pa.Table.from_batches(pending).combine_chunks()
        return _with_source(joined, name, range(first, first + count))

    pieces = parquet_pieces(name, parquet, max_record_bytes=max_record_bytes, batch_rows=rows, row_groups=row_groups)
    for piece in pieces:
        if isinstance(piece, Oversized):
            if pending:
                yield table()
                first, pending, count, size = first + count, [], 0, 0
            yield refused_table(name, first, piece)
            first += 1
            continue
        while piece.num_rows:
            take = min(piece.num_rows, rows - count)
            full = count + take >= rows
            part = piece.slice(0, take)
            part_bytes = part.nbytes
            if 0 <= budget <= size + part_bytes:  # the row that reaches the budget ends the table
                reached = size
                for index, row_bytes in enumerate(row_sizes(part)):
                    reached += row_bytes
                    if reached >= budget:
                        take, full = index + 1, True
                        break
                part = piece.slice(0, take)
                part_bytes = part.nbytes
            pending.append(part)
            count, size = count + take, size + part_bytes
            piece = piece.slice(take)
            if full:
                yield table()
                first, pending, count, size = first + count, [], 0, 0
    if pending:
        yield table()


def _with_source(table: pa.Table, name: str, lines: Iterable[int]) -> pa.Table:
    table = table.drop_columns([column for column in (SOURCE_FILE, SOURCE_LINE) if column in table.column_names])
    table = table.append_column(SOURCE_FILE, arrow_column([name] * table.num_rows, pl.String))
    return table.append_column(SOURCE_LINE, arrow_column(list(lines), pl.Int64))


def arrow_column(values: Sequence[Any], dtype: pl.DataType | type[pl.DataType]) -> pa.Array:
    """An Arrow array of Python values, made by Polars (``pa.array`` imports pandas, when it is
    installed, on first use: a tenth of a second or more of every process's start)."""
    return pl.Series(values, dtype=dtype).to_arrow(compat_level=pl.CompatLevel.oldest())


def lines_table(lines: Sequence[bytes]) -> pa.Table:
    """An input table of the JSON Lines form from lines in memory (no newlines), rows named
    ``<memory>`` line 1, 2, ..."""
    return pa.table({JSON_LINE: arrow_column(lines, pl.Binary)})


def read_tables(
    paths: Sequence[str],
    rows: int,
    max_bytes: int | None = None,
    max_record_bytes: int = DEFAULT_MAX_RECORD_BYTES,
    *,
    opener: Callable[[str], InputStream] = open_input,
    file_column: str | None = None,
) -> Iterator[pa.Table]:
    """Every input file in order as input tables of ``rows`` rows (fewer only where the form changes,
    or, with ``max_bytes``, where a table reaches that many bytes: of JSON Lines text, or of
    decoded Parquet rows).

    ``-`` is standard input (JSON Lines); JSON Lines inputs are opened by ``opener``
    (:func:`~assembler.run.io.open_input`: gzip and zstd decompressed). Consecutive tables of one
    schema are joined across files. A record over ``max_record_bytes`` is a table of its own (the
    ``source_error`` form). With ``file_column``, every table of the JSON Lines and ``source_error``
    forms also holds the index in ``paths`` of each row's file in that column (Int64; ignored by
    :func:`assemble_table` as any other column of these forms), the chunks staying the same.
    """
    pending: list[pa.Table] = []
    count = size = 0
    for table in _file_tables_of(paths, rows, max_bytes, max_record_bytes, opener, file_column):
        if pending and not table.schema.equals(pending[0].schema):
            yield pa.concat_tables(pending)
            pending, count, size = [], 0, 0
        pending.append(table)
        count += table.num_rows
        size += _chunk_bytes(table)
        if count < rows and max_bytes is not None and size >= max_bytes:
            yield pa.concat_tables(pending)
            pending, count, size = [], 0, 0
        while count >= rows:
            joined = pa.concat_tables(pending)
            yield joined.slice(0, rows)
            rest = joined.slice(rows)
            pending, count, size = ([rest] if rest.num_rows else []), rest.num_rows, _chunk_bytes(rest)
    if pending:
        yield pa.concat_tables(pending)


def _chunk_bytes(table: pa.Table) -> int:
    """What ``max_bytes`` counts of an input table: the bytes of its JSON Lines (the ``json_line``
    form) or of its decoded record columns (the Parquet form); 0 for refused records."""
    if table.num_rows == 0 or SOURCE_ERROR in table.column_names:
        return 0
    if JSON_LINE not in table.column_names:
        return int(table.drop_columns([name for name in _SOURCE_COLUMNS if name in table.column_names]).nbytes)
    return byte_total(table.column(JSON_LINE))


def _file_tables_of(
    paths: Sequence[str],
    rows: int,
    max_bytes: int | None,
    max_record_bytes: int,
    opener: Callable[[str], InputStream] = open_input,
    file_column: str | None = None,
) -> Iterator[pa.Table]:
    for index, path in enumerate(paths):
        refuse_folder(path)
        if path != "-" and is_parquet(path):
            try:
                handle: IO[bytes] = open(path, "rb")  # noqa: SIM115 - closed by the with below
            except OSError as exc:
                raise UsageError(f"cannot read {shown(path)}: {exc.strerror}") from None
            name = shown(path)
        else:
            handle = stream = opener(path)
            name = stream.name_shown
        with handle:
            tables = file_tables(
                name,
                handle,
                parquet=path != "-" and is_parquet(path),
                rows=rows,
                max_bytes=max_bytes,
                max_record_bytes=max_record_bytes,
            )
            for table in tables:
                if file_column is not None and (JSON_LINE in table.column_names or SOURCE_ERROR in table.column_names):
                    table = table.append_column(file_column, arrow_column([index] * table.num_rows, pl.Int64))
                yield table
