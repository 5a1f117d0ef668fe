"""The Ray engine: ``assembler assemble --engine ray``, the same assembly as a Ray Data job.

Plan: the inputs are cut into splits of ``chunk_size`` records (JSON Lines files scanned by Ray
tasks, Parquet files cut at row groups). Read and assemble: one task per split reads it with the
local engine's reader (:func:`assembler.run.batch.file_tables`), each row tagged with its file's index
and its line, and ``map_batches`` calls :func:`assembler.run.batch.assemble_table` on it. Write: the
driver takes the blocks back in input order (Ray Data's ``preserve_order``, checked against the
carried (file, line) key and the planned record count), rejects a query id already assembled in an
earlier split, and writes one output file and the errors file exactly as the local engine does.

Ray is imported only when a run starts (the ``ray`` extra). See docs/scaling.md.
"""

from __future__ import annotations

import io
import logging
import os
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import asdict, dataclass
from functools import partial
from itertools import pairwise
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.parquet as pq

from assembler.errors import RecordError, UsageError, install_hint
from assembler.run.batch import SOURCE_FILE, SOURCE_LINE, BudgetNote, assemble_table, file_tables, record_texts
from assembler.run.io import Inputs, RawRecord, check_parquet_columns, input_paths, is_parquet, jsonl_lines, open_input
from assembler.run.options import DEFAULT_CHUNK_SIZE, RunOptions
from assembler.run.outputs import PackageSink, Rejects, RunSummary, run_outputs
from assembler.run.schemas import PACKAGE_SCHEMA
from assembler.selection import CONTRACT, SelectionPolicy
from assembler.stages.lanes import DUPLICATE_RULE

if TYPE_CHECKING:
    from ray.data import Dataset


__all__ = ["InputFile", "assemble_dataset", "lane_dump_dataset", "list_inputs", "run_ray_assembly"]

FILE_INDEX = "file_index"
LOOPBACK_ONLY = "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"
"""With this set to ``0`` before Ray is imported, a local instance listens on 127.0.0.1 only."""
BatchHook = Callable[[pa.Table], None]
_ERROR_COLUMNS = ("field", "rule", "record")
_NOTE_COLUMNS = ("budget_ignored", "budget_clamped")
_BLOCK_SCHEMA = pa.schema(
    [
        (FILE_INDEX, pa.int64()),
        (SOURCE_FILE, pa.string()),
        (SOURCE_LINE, pa.int64()),
        *PACKAGE_SCHEMA,
        *((name, pa.string()) for name in _ERROR_COLUMNS),
        *((name, pa.list_(pa.string())) for name in _NOTE_COLUMNS),
    ]
)
"""What an assembly task returns: packages and rejected records (``rule`` not null), in input order;
a package's :class:`~assembler.run.batch.BudgetNote` as its ``budget_*`` lists."""


@dataclass(frozen=True)
class InputFile:
    """One lane-dump file of a run: ``name`` as errors show it, ``path`` as workers open it."""

    index: int
    name: str
    path: str
    parquet: bool


def list_inputs(inputs: Sequence[str]) -> list[InputFile]:
    """The files of ``inputs`` in order; a folder stands for its files (recursively, by name).

    Names starting with ``.`` or ``_`` inside a folder are skipped (``_SUCCESS``, ``.crc``). Paths
    may be local or URIs that ``pyarrow.fs`` opens (``s3://...``); every worker must reach them.
    """
    names: list[str] = []
    for given in inputs:
        if given == "-":
            raise UsageError("the Ray engine reads files or folders, not standard input")
        found = _expand(given)
        if not found:
            raise UsageError(f"cannot read {given}: the folder holds no files")
        names.extend(found)
    files = [InputFile(index, name, name, is_parquet(name)) for index, name in enumerate(names)]
    for file in files:
        if file.parquet:
            _check_parquet(file)
        elif "://" not in file.path:
            _check_jsonl(file)
    return files


def _check_jsonl(file: InputFile) -> None:
    """A local JSON Lines input must be plain text: the plan cuts it at byte offsets, which a
    compressed file does not have (the local engine reads gzip and zstd)."""
    with open_input(file.path) as stream:
        if stream.compression is not None:
            raise UsageError(
                f"{stream.name_shown} is {stream.compression}-compressed: the Ray engine splits JSON Lines files "
                "at byte offsets and reads them uncompressed (decompress it, or use --engine local)"
            )


def _expand(given: str) -> list[str]:
    import pyarrow.fs as pafs

    if "://" not in given:
        path = Path(given)
        if path.is_dir():
            return [
                os.path.join(given, str(found.relative_to(path)))
                for found in sorted(path.rglob("*"))
                if found.is_file() and not _hidden(found.relative_to(path).parts)
            ]
        if not path.exists():
            raise UsageError(f"cannot read {given}: No such file or directory")
        return [given]
    filesystem, root = pafs.FileSystem.from_uri(given)
    info = filesystem.get_file_info(root)
    if info.type == pafs.FileType.NotFound:
        raise UsageError(f"cannot read {given}: No such file or directory")
    if info.type != pafs.FileType.Directory:
        return [given]
    selected = filesystem.get_file_info(pafs.FileSelector(root, recursive=True))
    relative = sorted(entry.path[len(root) :].lstrip("/") for entry in selected if entry.type == pafs.FileType.File)
    return [f"{given.rstrip('/')}/{rel}" for rel in relative if not _hidden(tuple(rel.split("/")))]


def _hidden(parts: tuple[str, ...]) -> bool:
    return any(part.startswith((".", "_")) for part in parts)


def _check_parquet(file: InputFile) -> None:
    try:
        with _open(file) as stream:
            metadata = pq.read_metadata(stream)
    except (OSError, pa.ArrowInvalid) as exc:
        raise UsageError(f"cannot read {file.name} as Parquet: {exc}") from None
    check_parquet_columns(metadata.schema.to_arrow_schema().names, file.name)  # here, not inside a task


def _open(file: InputFile) -> IO[bytes]:
    if "://" not in file.path:
        return open(file.path, "rb")  # the caller closes it
    import pyarrow.fs as pafs

    filesystem, path = pafs.FileSystem.from_uri(file.path)
    if file.parquet:
        native: IO[bytes] = filesystem.open_input_file(path)
        return native
    return io.BufferedReader(filesystem.open_input_stream(path), 1 << 20)


# --- the Ray Data job ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Split:
    """``records`` consecutive records of one file: a read task's share.

    JSON Lines: bytes ``start``..``end``, whose first record is on line ``first_line``. Parquet:
    ``row_groups``, whose first row is row ``first_line``.
    """

    file: InputFile
    first_line: int
    records: int
    start: int = 0
    end: int = 0
    row_groups: tuple[int, ...] = ()

    def row(self) -> dict[str, Any]:
        """The split as a Dataset row (a read task gets its split in its input, nothing else)."""
        return {
            **asdict(self.file),
            "first_line": self.first_line,
            "records": self.records,
            "start": self.start,
            "end": self.end,
            "row_groups": list(self.row_groups),
        }

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> Split:
        """The inverse of :meth:`row`."""
        file = InputFile(row["index"], row["name"], row["path"], row["parquet"])
        return cls(file, row["first_line"], row["records"], row["start"], row["end"], tuple(row["row_groups"] or ()))


def plan_splits(files: Sequence[InputFile], rows: int) -> list[Split]:
    """Cut every file into splits of ``rows`` records, in input order (JSON Lines files are scanned
    once, by Ray tasks in parallel; Parquet files are cut at row groups from their footers)."""
    import ray

    scan = ray.remote(_jsonl_splits)
    pending = {file.index: scan.remote(file, rows) for file in files if not file.parquet}
    splits: list[Split] = []
    for file in files:
        found: list[Split] = _parquet_splits(file, rows) if file.parquet else ray.get(pending[file.index])
        splits.extend(found)
    return splits


def _jsonl_splits(file: InputFile, rows: int) -> list[Split]:
    """Where every run of ``rows`` records starts (byte and line), by the local reader's line rules."""
    bounds = [0, 0]  # start and end byte of the line jsonl_lines is on (it takes one line at a time)

    def tracked(stream: IO[bytes]) -> Iterator[bytes]:
        for raw_line in stream:
            bounds[0], bounds[1] = bounds[1], bounds[1] + len(raw_line)
            yield raw_line

    starts: list[tuple[int, int]] = []
    total = 0
    with _open(file) as stream:
        for total, (number, _) in enumerate(jsonl_lines(tracked(stream)), start=1):
            if (total - 1) % rows == 0:
                starts.append((bounds[0], number))
    ends = [start for start, _ in starts[1:]] + [bounds[1]]
    counts = [rows] * (len(starts) - 1) + [total - rows * (len(starts) - 1)]
    return [
        Split(file, line, count, start, end) for (start, line), end, count in zip(starts, ends, counts, strict=True)
    ]


def _parquet_splits(file: InputFile, rows: int) -> list[Split]:
    with _open(file) as stream:
        metadata = pq.read_metadata(stream)
    splits: list[Split] = []
    groups: list[int] = []
    first = count = 0
    for group in range(metadata.num_row_groups):
        groups.append(group)
        count += metadata.row_group(group).num_rows
        if count - first >= rows or group == metadata.num_row_groups - 1:
            splits.append(Split(file, first + 1, count - first, row_groups=tuple(groups)))
            groups, first = [], count
    return splits


def _read_splits(batch: pa.Table, *, rows: int) -> Iterator[pa.Table]:
    """Ray task: the input tables of the splits in ``batch``, tagged with the file index."""
    for row in batch.to_pylist():
        split = Split.from_row(row)
        with _open(split.file) as stream:
            if not split.file.parquet:
                stream.seek(split.start)
                stream = io.BytesIO(stream.read(split.end - split.start))
            tables = file_tables(
                split.file.name,
                stream,
                parquet=split.file.parquet,
                rows=rows,
                first_line=split.first_line,
                row_groups=split.row_groups,
            )
            for table in tables:
                yield table.append_column(FILE_INDEX, pa.array([split.file.index] * table.num_rows, pa.int64()))


def _assemble_block(
    block: pa.Table,
    *,
    overrides: Mapping[str, int] | None,
    policy: SelectionPolicy,
    hook: BatchHook | None,
) -> pa.Table:
    """Ray task: one block through the entry point; packages and rejects in one table."""
    if hook is not None:
        hook(block)
    result = assemble_table(block.drop_columns([FILE_INDEX]), overrides=overrides, policy=policy, on_error="skip")
    keys = block.select([FILE_INDEX, SOURCE_FILE, SOURCE_LINE])
    packages, rejected = result.packages, result.rejected
    notes = [result.budget_notes.get(index) for index in range(packages.num_rows)]
    note_lists = {
        "budget_ignored": [None if note is None else note.ignored for note in notes],
        "budget_clamped": [None if note is None else note.clamped for note in notes],
    }
    accepted = _block_part(
        keys.take(pa.array(result.package_rows, pa.int64())),
        {name: packages.column(name) for name in packages.schema.names}
        | {name: pa.array(lists, pa.list_(pa.string())) for name, lists in note_lists.items()},
    )
    refused = _block_part(
        keys.take(pa.array(result.rejected_rows, pa.int64())),
        {name: rejected.column(name) for name in ("query_id", *_ERROR_COLUMNS)},
    )
    return pa.concat_tables([accepted, refused]).sort_by([(FILE_INDEX, "ascending"), (SOURCE_LINE, "ascending")])


def _block_part(keys: pa.Table, columns: Mapping[str, Any]) -> pa.Table:
    """``keys`` and ``columns`` as :data:`_BLOCK_SCHEMA` rows; the other columns null."""
    data = {name: keys.column(name) for name in keys.column_names}
    for field in _BLOCK_SCHEMA:
        if field.name not in data:
            data[field.name] = columns[field.name] if field.name in columns else pa.nulls(keys.num_rows, field.type)
    return pa.table(data, schema=_BLOCK_SCHEMA)


def lane_dump_dataset(splits: Sequence[Split], *, rows: int = DEFAULT_CHUNK_SIZE) -> Dataset:
    """The records of ``splits`` as a Ray Dataset of entry-point input tables, one read task per split."""
    import ray.data

    parts = ray.data.from_items([split.row() for split in splits], override_num_blocks=len(splits))
    return parts.map_batches(partial(_read_splits, rows=rows), batch_size=1, batch_format="pyarrow")


def assemble_dataset(
    lane_dumps: Dataset,
    *,
    overrides: Mapping[str, int] | None = None,
    policy: SelectionPolicy = CONTRACT,
    batch_hook: BatchHook | None = None,
) -> Dataset:
    """``map_batches`` with the entry point: every block of ``lane_dumps`` assembled.

    Ray Data's task defaults apply: a task whose worker dies is run again, an exception raised by
    the code is not retried. ``batch_hook`` runs on each block first (tests kill workers with it).
    """
    return lane_dumps.map_batches(
        partial(_assemble_block, overrides=dict(overrides or {}), policy=policy, hook=batch_hook),
        batch_size=None,
        batch_format="pyarrow",
    )


# --- the driver ------------------------------------------------------------------------------------


def run_ray_assembly(
    inputs: Inputs,
    output: str | os.PathLike[str],
    options: RunOptions | None = None,
    *,
    progress: Callable[[int], None] | None = None,
    address: str | None = None,
    num_cpus: int | None = None,
    batch_hook: BatchHook | None = None,
) -> RunSummary:
    """:func:`assembler.run.local.run_assembly` on Ray: same output, same errors, same counts.

    Joins the cluster at ``address`` (``auto``, ``HOST:PORT``), or starts a local Ray instance with
    ``num_cpus`` CPUs (default: all) when no Ray is running in this process; the Ray instance's
    CPUs do the work, so ``options.workers`` is not read. ``assess`` and a ``reranker`` are not
    available on Ray yet (a usage error).
    """
    output = os.fspath(output)
    options = (options or RunOptions()).writing(output)
    if options.assess or options.reranker is not None:
        raise UsageError("the Ray engine does not support an assessment or a reranker yet; use the local engine")
    on_error, chunk_size = options.on_error, options.chunk_size
    summary = RunSummary()
    started = time.perf_counter()
    files = list_inputs(input_paths(inputs))
    parquet = options.output_format == "parquet"
    with (
        _ray_session(address, num_cpus),
        run_outputs(output, parquet, on_error, options.errors_path) as (out, rejects),
    ):
        splits = plan_splits(files, chunk_size)
        sink = PackageSink(out, parquet)
        try:
            if splits:
                lane_dumps = lane_dump_dataset(splits, rows=chunk_size)
                dataset = assemble_dataset(
                    lane_dumps, overrides=options.overrides, policy=options.selection_policy, batch_hook=batch_hook
                )
                returned = _drain(dataset, files, sink, rejects, summary, progress)
                planned = sum(split.records for split in splits)
                if returned != planned:  # nothing dropped (a repeat fails the order check)
                    raise RuntimeError(f"Ray returned {returned} records of the {planned} planned")
        finally:
            sink.close()
    summary.rejected = rejects.count
    summary.seconds = time.perf_counter() - started
    return summary


@contextmanager
def _ray_session(address: str | None, num_cpus: int | None) -> Iterator[None]:
    """Use the Ray of this process, or join ``address``, or start a local instance (stopped after)."""
    if address is None and "ray" not in sys.modules:
        os.environ.setdefault(LOOPBACK_ONLY, "0")
    try:
        import ray
        import ray.data
    except ImportError:
        raise UsageError(f"the Ray engine needs Ray Data: {install_hint('ray')}") from None
    started = not ray.is_initialized()
    if started:
        ray.init(
            address=address or "local",  # "local": never join a cluster found on this machine by chance
            num_cpus=None if address else num_cpus,
            include_dashboard=False,
            logging_level=logging.WARNING,
        )
    context = ray.data.DataContext.get_current()
    saved = context.execution_options.preserve_order, context.enable_progress_bars
    context.execution_options.preserve_order = True  # blocks come back in input order
    context.enable_progress_bars = False  # the command line has its own
    quiet = {name: logging.getLogger(name) for name in ("ray.data", "ray.data._internal.progress")}
    levels = {name: logger.level for name, logger in quiet.items()}
    quiet["ray.data"].setLevel(logging.WARNING)  # no per-operator INFO lines
    quiet["ray.data._internal.progress"].setLevel(logging.ERROR)  # nor "progress bars disabled"
    try:
        yield
    finally:
        context.execution_options.preserve_order, context.enable_progress_bars = saved
        for name, logger in quiet.items():
            logger.setLevel(levels[name])
        if started:
            ray.shutdown()


def _drain(
    dataset: Dataset,
    files: Sequence[InputFile],
    sink: PackageSink,
    rejects: Rejects,
    summary: RunSummary,
    progress: Callable[[int], None] | None,
) -> int:
    """Write every block in input order (a query id seen in an earlier block is a duplicate);
    return the number of records (packages and rejects) the blocks held."""
    seen: set[str] = set()
    last = (-1, 0)
    rows = 0
    with ExitStack() as stack:
        texts = _RecordTexts(files, stack)
        for block in dataset.iter_batches(batch_size=None, batch_format="pyarrow", prefetch_batches=2):
            assert isinstance(block, pa.Table)
            keys = list(zip(block.column(FILE_INDEX).to_pylist(), block.column(SOURCE_LINE).to_pylist(), strict=True))
            if keys and (keys[0] <= last or any(a >= b for a, b in pairwise(keys))):
                raise RuntimeError("Ray returned records out of input order (preserve_order is off?)")
            last = keys[-1] if keys else last
            rows += len(keys)
            keep = _take_rejects(block, keys, files, seen, rejects, texts)
            kept = block.filter(pa.array(keep, pa.bool_()))
            packages = kept.select(PACKAGE_SCHEMA.names)
            sink.write_table(packages)
            summary.add_packages(packages)
            ignored, clamped = (kept.column(name).to_pylist() for name in _NOTE_COLUMNS)
            summary.add_budget_notes(
                BudgetNote(tuple(keys), tuple(fields))
                for keys, fields in zip(ignored, clamped, strict=True)
                if keys is not None
            )
            if progress is not None:
                progress(packages.num_rows)
    return rows


def _take_rejects(
    block: pa.Table,
    keys: Sequence[tuple[int, int]],
    files: Sequence[InputFile],
    seen: set[str],
    rejects: Rejects,
    texts: _RecordTexts,
) -> list[bool]:
    """Hand each rejected record of ``block`` to ``rejects`` in order; which rows are packages."""
    keep = []
    query_ids = block.column("query_id").to_pylist()
    rules = block.column("rule").to_pylist()
    for row, (query_id, rule) in enumerate(zip(query_ids, rules, strict=True)):
        file_index, line = keys[row]
        name = files[file_index].name
        if rule is not None:
            field, text = block.column("field")[row].as_py(), block.column("record")[row].as_py()
            rejects.reject(RawRecord(name, line, None, text), RecordError(name, line, query_id, field, rule))
            keep.append(False)
        elif query_id in seen:
            error = RecordError(name, line, query_id, "query_id", DUPLICATE_RULE)
            text = texts.text(file_index, line) if rejects.on_error == "skip" else ""
            rejects.reject(RawRecord(name, line, None, text), error)
            keep.append(False)
        else:
            seen.add(query_id)
            keep.append(True)
    return keep


class _RecordTexts:
    """The text of a record repeated across blocks (rare): read forward through its file once."""

    def __init__(self, files: Sequence[InputFile], stack: ExitStack) -> None:
        self.files = files
        self.stack = stack
        self.readers: dict[int, Iterator[tuple[int, str]]] = {}

    def text(self, file_index: int, line: int) -> str:
        reader = self.readers.get(file_index)
        if reader is None:
            file = self.files[file_index]
            stream = self.stack.enter_context(_open(file))
            tables = file_tables(file.name, stream, parquet=file.parquet, rows=DEFAULT_CHUNK_SIZE)
            reader = self.readers[file_index] = (pair for table in tables for pair in record_texts(table))
        for number, text in reader:
            if number == line:
                return text
        raise RuntimeError(f"{self.files[file_index].name}:{line} vanished while the run was reading it")
