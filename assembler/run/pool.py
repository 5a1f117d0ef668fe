"""The local engine on every core: chunks assembled by a process pool, written in input order.

:func:`assembler.run.local.run_assembly` with ``workers`` > 1 (``assembler assemble --workers N``)
hands its chunks here. N processes assemble: this one and N - 1 started workers. The command reads
the inputs in chunks exactly as the one-process run does
(:func:`assembler.run.batch.read_tables`) and sends each chunk to a worker of a
:class:`~concurrent.futures.ProcessPoolExecutor` (forked by the command line before it loads any
library, spawned by a process that has: :func:`~assembler.run.workers.start_method`) while the
started workers have fewer than ``IN_FLIGHT_PER_WORKER`` chunks each; otherwise it assembles the
chunk itself (a process that only read, sent and wrote would leave a core half idle, and one more
worker would cost an interpreter's start). At the end of the input it takes back the chunks no
worker has started. Results are taken strictly in input order, so that memory stays bounded by the
chunk size.

What goes through the pool's pipes is small when it can be: a chunk of plain JSON Lines files
(regular files, not compressed) is sent by where it lies (:class:`~assembler.run.parts.Span`, found
as the command reads), and the worker reads it from the files itself and writes what it assembled
to part files beside the output's temporary, which the command reads back in its turn
(:func:`assemble_stored_chunk`, :mod:`assembler.run.parts`). Other chunks (standard input, gzip
and zstd, Parquet, records over the size limit) go through the pipes whole, and their packages
come back in part files too; every chunk of a run whose output streams (no temporary) goes and
comes back through the pipes. A chunk of spans that the command assembles itself behind unwritten
ones waits in part files too, its table let go (read again from its spans if a repeated id or a
bad record needs it): so the command does not wait for a worker that is starting or held up, up
to ``RUN_AHEAD_CHUNKS`` chunks ahead, with memory still bounded by the chunks held in memory.

A chunk is assembled by :func:`assemble_chunk` wherever it runs: :func:`assembler.run.batch.assemble_table`
with no ``seen`` set (duplicates within the chunk only), giving a :class:`ChunkResult`: the package
lines already rendered (JSON Lines, with ``--assess`` too) or the ``PACKAGE_SCHEMA`` table
(Parquet), the summary columns, and the rejected records with their row indices. The command, like
the Ray engine's driver, then rejects a query id already written from an earlier chunk, hands every
reject to :class:`~assembler.run.outputs.Rejects` in input order and writes the rest. With
``on_error="stop"`` a chunk that holds a bad record comes back unassembled, and the command
validates it with the one-process step, which raises the first bad record's error; the chunks no
worker has started are taken back, and the ones a worker holds are finished and dropped, with
every part file (:func:`~assembler.run.workers.shut_down`). Output, errors file and counts are
byte for byte those of the one-process run.

Taking a chunk back goes through :class:`Claims`, not the pool's ``Future.cancel``: Python 3.11's
pool fails in its own thread (a traceback, and workers left running) when a worker dies while a
cancelled chunk is still queued.

An input of one chunk is assembled in this process: the pool starts only when a second chunk
exists, and then the command assembles the first chunk itself while the workers start (each a new
interpreter loading the package: about half a second). The workers' side (their start, the
claims, their end) is :mod:`assembler.run.workers`, which the command line also uses to start
them before it loads its own libraries when ``--workers N`` asks for them; such a pool is taken
here when it is the size the run needs.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import BrokenExecutor, Future
from dataclasses import dataclass, replace

import polars as pl
import pyarrow as pa

from assembler.errors import InputError, RecordError, WorkerError
from assembler.run.batch import (
    SOURCE_FILE,
    SOURCE_LINE,
    BudgetNote,
    arrow_column,
    assemble_table,
    packages_table,
    record_texts,
    rejected_entries,
)
from assembler.run.io import DEFAULT_MAX_RECORD_BYTES, RawRecord
from assembler.run.options import OnError, RunOptions
from assembler.run.outputs import PackageSink, Rejects, RunSummary, encoded_lines
from assembler.run.parts import (
    PartNames,
    Parts,
    Span,
    Splitter,
    read_bytes,
    read_spans,
    read_table,
    write_bytes,
    write_table,
)
from assembler.run.signals import held_signals
from assembler.run.workers import (
    IN_FLIGHT_PER_WORKER,
    Claims,
    claim_slots,
    shut_down,
    start_pool,
    take_early,
    worker_claims,
)
from assembler.selection import SelectionPolicy, get_policy, policies
from assembler.stages.lanes import DUPLICATE_RULE

__all__ = [
    "ChunkJob",
    "ChunkResult",
    "StoredChunk",
    "assemble_chunk",
    "assemble_sent_chunk",
    "assemble_stored_chunk",
    "run_pooled",
]

RUN_AHEAD_CHUNKS = 64
"""The most chunks the command holds in order behind the oldest unwritten one. Those it assembles
itself from spans wait in part files (a chunk's packages on disk, a few MB), not in memory: so it
goes on assembling while a worker starts (about half a second) or is held up, rather than waiting."""


@dataclass(frozen=True)
class ChunkJob:
    """What every worker needs besides its chunk; picklable (a registered policy goes by name)."""

    overrides: dict[str, int]
    policy: str | SelectionPolicy
    on_error: OnError
    parquet: bool
    assess: bool
    max_record_bytes: int = DEFAULT_MAX_RECORD_BYTES

    @classmethod
    def of(cls, options: RunOptions) -> ChunkJob:
        """The job of a run's options (a registered policy goes by name, another by value)."""
        policy = options.selection_policy
        registered = policies().get(policy.name) is policy
        return cls(
            dict(options.overrides),
            policy.name if registered else policy,
            options.on_error,
            options.output_format == "parquet",
            options.assess,
            options.max_record_bytes,
        )


@dataclass(frozen=True)
class ChunkResult:
    """One chunk assembled by a worker (a started one or the command).

    ``query_ids`` and ``package_rows`` (row index in the chunk) of every package in input order;
    ``lines`` its output lines (JSON Lines, encoded as the output file is: UTF-8, one line per
    package) or ``None`` (Parquet); ``packages`` the ``PACKAGE_SCHEMA`` table (Parquet) or only the
    summary columns (JSON Lines), one row per package; ``rejected`` (``REJECTED_SCHEMA``) with
    ``rejected_rows``; ``budget_notes`` by package index, as :class:`~assembler.run.batch.ArrowResult` has them.
    """

    query_ids: list[str]
    package_rows: list[int]
    lines: bytes | None
    packages: pa.Table
    rejected: pa.Table
    rejected_rows: list[int]
    budget_notes: dict[int, BudgetNote]


def assemble_chunk(table: pa.Table, job: ChunkJob) -> ChunkResult | None:
    """One chunk through the entry point, duplicates checked within the chunk only (in a started
    worker, or in the command as one).

    ``None``: the chunk holds a bad record and the run stops (``on_error="stop"``); it was found
    while validating, before any assembly, and the command finds it again (or an earlier duplicate
    of a query id of another chunk) by validating the chunk itself.
    """
    policy = get_policy(job.policy) if isinstance(job.policy, str) else job.policy
    try:
        assembled = assemble_table(table, overrides=job.overrides, policy=policy, on_error=job.on_error, seen=None)
    except InputError:
        return None
    batch = assembled.batch
    if job.parquet:
        lines, packages = None, packages_table(batch)
    else:
        lines = encoded_lines(batch, job.assess)
        packages = batch.summaries.drop("query_id").to_arrow()
    return ChunkResult(
        query_ids=list(batch.query_ids),
        package_rows=assembled.package_rows,
        lines=lines,
        packages=packages,
        rejected=assembled.rejected,
        rejected_rows=assembled.rejected_rows,
        budget_notes=assembled.budget_notes,
    )


@dataclass(frozen=True)
class StoredChunk:
    """A chunk a started worker read from where it lies and assembled into part files
    (:mod:`assembler.run.parts`): its :class:`ChunkResult` with ``lines`` (or, for Parquet, the
    packages' rows) and, when there are any, the rejected records in the parts instead."""

    result: ChunkResult
    names: PartNames
    rejects_stored: bool


def _store(result: ChunkResult, names: PartNames) -> StoredChunk:
    """Write a chunk's bulk to its parts (a worker's side)."""
    if result.lines is not None:
        write_bytes(names.packages, result.lines, names.output)
        packages = result.packages  # the summary columns: small
    else:
        write_table(names.packages, result.packages, names.output)
        packages = result.packages.slice(0, 0)
    stored = result.rejected.num_rows > 0
    if stored:
        write_table(names.rejects, result.rejected, names.output)
    kept = replace(
        result, lines=None if result.lines is None else b"", packages=packages, rejected=result.rejected.slice(0, 0)
    )
    return StoredChunk(kept, names, stored)


def _load(stored: StoredChunk, parts: Parts) -> ChunkResult:
    """A stored chunk's :class:`ChunkResult` read back from its parts, which are then removed."""
    names, result = stored.names, stored.result
    if result.lines is None:
        lines, packages = None, read_table(names.packages, names.output)
    else:
        lines, packages = read_bytes(names.packages, names.output), result.packages
    rejected = read_table(names.rejects, names.output) if stored.rejects_stored else result.rejected
    parts.remove(names)
    return replace(result, lines=lines, packages=packages, rejected=rejected)


def assemble_sent_chunk(
    slot: int, table: pa.Table, job: ChunkJob, names: PartNames | None = None
) -> ChunkResult | StoredChunk | None:
    """A started worker's task for a chunk sent whole: :func:`assemble_chunk`, written to the parts
    ``names`` when given (an output with a temporary); unless the command took the chunk back
    (``None`` then, which the command never reads: it assembled the chunk itself)."""
    if not worker_claims().claim(slot, Claims.STARTED):
        return None
    result = assemble_chunk(table, job)
    return result if result is None or names is None else _store(result, names)


def assemble_stored_chunk(slot: int, spans: tuple[Span, ...], job: ChunkJob, names: PartNames) -> StoredChunk | None:
    """A started worker's task for a chunk sent by where it lies: read it (:func:`read_spans`),
    :func:`assemble_chunk` it and write it to its parts; ``None`` as :func:`assemble_sent_chunk`
    gives it."""
    if not worker_claims().claim(slot, Claims.STARTED):
        return None
    result = assemble_chunk(read_spans(spans, job.max_record_bytes), job)
    return None if result is None else _store(result, names)


@dataclass
class _Pending:
    """A chunk the command holds until its turn to be written: its table (``None`` once its result
    waits in part files: read again from its ``spans`` when needed), its slot in the claims while
    a started worker may assemble it, and its result."""

    table: pa.Table | None
    spans: tuple[Span, ...] | None
    slot: int | None
    future: Future[ChunkResult | StoredChunk | None]

    def table_of(self, job: ChunkJob) -> pa.Table:
        if self.table is None:
            assert self.spans is not None, "a chunk without spans keeps its table"
            self.table = read_spans(self.spans, job.max_record_bytes)
        return self.table

    def held(self) -> bool:
        """Whether it holds a chunk's worth of memory: its table, or a result not in part files."""
        if self.table is not None:
            return True
        return self.future.done() and self.future.exception() is None and isinstance(self.future.result(), ChunkResult)

    def refused(self) -> bool:
        """Whether its result is an error, or a bad record's ``None`` (``on_error="stop"``)."""
        return self.future.done() and (self.future.exception() is not None or self.future.result() is None)


class _OrderedWriter:
    """The parent's side: rejects and packages of each chunk, taken in input order."""

    def __init__(
        self,
        sink: PackageSink,
        rejects: Rejects,
        summary: RunSummary,
        progress: Callable[[int], None] | None,
        seen: set[str],
    ) -> None:
        self.sink = sink
        self.rejects = rejects
        self.summary = summary
        self.progress = progress
        self.seen = seen  # query ids written from earlier chunks

    def take(self, table: Callable[[], pa.Table], result: ChunkResult) -> None:
        """Write a chunk's result; ``table`` gives its input table (only needed for a repeated id)."""
        keep = self._take_rejects(table, result)
        packages = result.packages
        lines = result.lines
        if not all(keep):  # a query id of an earlier chunk (rare)
            packages = packages.filter(arrow_column(keep, pl.Boolean))
            if lines is not None:  # a package's line holds no newline: JSON text escapes it
                split = lines.split(b"\n")[:-1]
                lines = b"".join(line + b"\n" for line, kept in zip(split, keep, strict=True) if kept)
        if lines is None:
            self.sink.write_table(packages)
        else:
            self.sink.write_encoded(lines)
        self.summary.add_packages(packages)
        self.summary.add_budget_notes(note for index, note in result.budget_notes.items() if keep[index])
        if self.progress is not None:
            self.progress(packages.num_rows)

    def _take_rejects(self, table_of: Callable[[], pa.Table], result: ChunkResult) -> list[bool]:
        """Hand the chunk's rejects to ``rejects`` by row index, a repeated query id among them;
        which packages are kept."""
        events = sorted(
            [(row, False, index) for index, row in enumerate(result.rejected_rows)]
            + [(row, True, index) for index, row in enumerate(result.package_rows)]
        )
        refused = list(rejected_entries(result.rejected)) if result.rejected_rows else []
        keep = [True] * len(result.package_rows)
        for row, is_package, index in events:
            if not is_package:
                self.rejects.reject(*refused[index])
                continue
            query_id = result.query_ids[index]
            if query_id not in self.seen:
                self.seen.add(query_id)
                continue
            keep[index] = False
            table = table_of()
            file, line = table.column(SOURCE_FILE)[row].as_py(), table.column(SOURCE_LINE)[row].as_py()
            text = next(record_texts(table.slice(row, 1)))[1] if self.rejects.on_error == "skip" else ""
            error = RecordError(file, line, query_id, "query_id", DUPLICATE_RULE)
            self.rejects.reject(RawRecord(file, line, None, text), error)
        return keep


def run_pooled(
    tables: Iterator[pa.Table],
    *,
    workers: int,
    job: ChunkJob,
    in_process: Callable[[pa.Table], None],
    seen: set[str],
    sink: PackageSink,
    rejects: Rejects,
    summary: RunSummary,
    progress: Callable[[int], None] | None,
    splitter: Splitter | None = None,
    parts: Parts | None = None,
) -> None:
    """Assemble every chunk of ``tables`` with ``workers`` processes, this one included; write in
    input order.

    ``in_process`` is the one-process run's step (it adds the query ids it writes to ``seen``):
    it assembles an input of one chunk without a pool, and else the first chunk while the
    workers start. A read error (an unreadable second file, say) is raised once the chunks read
    before it are written, as in the one-process run, so that an earlier bad record still wins.
    With ``splitter`` (the one that opened the inputs of ``tables``) and ``parts``, a chunk with
    :meth:`~assembler.run.parts.Splitter.spans` is sent by where it lies and comes back in part
    files.
    """
    failure: list[Exception] = []

    def read() -> pa.Table | None:
        if failure:
            return None
        try:
            return next(tables, None)
        except Exception as exc:
            failure.append(exc)
            return None

    first = read()
    second = None if first is None else read()
    if first is None or second is None:
        if first is not None:
            in_process(first)
        if failure:
            raise failure[0]
        return
    writer = _OrderedWriter(sink, rejects, summary, progress, seen)
    started = workers - 1  # this process is one of the workers
    limit = IN_FLIGHT_PER_WORKER * started
    pending: deque[_Pending] = deque()
    slots = claim_slots(started, IN_FLIGHT_PER_WORKER)

    def spans_of(table: pa.Table) -> tuple[Span, ...] | None:
        return None if splitter is None or parts is None else splitter.spans(table)

    def submit(table: pa.Table) -> None:
        spans = spans_of(table)
        slot = claims.send()
        future: Future[ChunkResult | StoredChunk | None]
        if parts is None:
            future = executor.submit(assemble_sent_chunk, slot, table, job)
        elif spans is None:  # sent whole, back in part files
            future = executor.submit(assemble_sent_chunk, slot, table, job, parts.new())
        else:
            future = executor.submit(assemble_stored_chunk, slot, spans, job, parts.new())
        pending.append(_Pending(table, spans, slot, future))

    def assembled_here(table: pa.Table, park: bool) -> Future[ChunkResult | StoredChunk | None]:
        """This process's share: assembled now, written in its turn (``park``: from part files)."""
        future: Future[ChunkResult | StoredChunk | None] = Future()
        with held_signals():
            result = assemble_chunk(table, job)
            if park and result is not None and parts is not None:
                future.set_result(_store(result, parts.new()))
            else:
                future.set_result(result)
        return future

    def take_oldest() -> None:
        chunk = pending.popleft()
        result = chunk.future.result()
        if isinstance(result, StoredChunk):
            assert parts is not None
            result = _load(result, parts)
        if result is None:  # a bad record, on_error="stop": the one-process step raises the first one
            in_process(chunk.table_of(job))
            raise RuntimeError("a worker refused a chunk that this process accepts")
        writer.take(lambda: chunk.table_of(job), result)

    def take_finished() -> None:
        while pending and pending[0].future.done():
            take_oldest()

    def must_wait() -> bool:
        """Whether the oldest chunk is waited for before the next one is read: when the chunks held
        in memory fill what the pool may hold (results behind a slow older chunk, say), when
        :data:`RUN_AHEAD_CHUNKS` wait in order, or when one is refused (its error, or the first
        bad record before it, is due)."""
        if len(pending) >= RUN_AHEAD_CHUNKS or sum(chunk.held() for chunk in pending) >= limit + IN_FLIGHT_PER_WORKER:
            return True
        return any(chunk.refused() for chunk in pending)

    def dispatch(table: pa.Table) -> None:
        """To a started worker while the workers have room, else here, once :func:`must_wait`
        allows. A chunk of spans that this process assembles behind unwritten ones waits in part
        files (it is read again from its spans if needed): memory stays bounded by the chunk, and
        this process goes on while a worker is still starting."""
        take_finished()
        while pending and must_wait():
            take_oldest()
            take_finished()
        if sum(not chunk.future.done() for chunk in pending) < limit:
            submit(table)
            return
        spans = spans_of(table)
        park = spans is not None and bool(pending)
        pending.append(_Pending(None if park else table, spans, None, assembled_here(table, park)))

    def steal_queued() -> None:
        """At the end of the input: take back the chunks no worker has started, newest first, and
        assemble them here (else this process would wait while they queue)."""
        for index in reversed(range(len(pending))):
            chunk = pending[index]
            if chunk.slot is not None and claims.claim(chunk.slot, Claims.TAKEN_BACK):
                table = chunk.table_of(job)
                pending[index] = _Pending(table, chunk.spans, None, assembled_here(table, False))

    pool = take_early(started, slots) or start_pool(started, slots)
    executor, claims = pool.executor, pool.claims
    finished = False
    try:
        submit(second)
        while len(pending) < limit and (table := read()) is not None:
            submit(table)
        in_process(first)  # while the workers start (unless they started with the command)
        while (table := read()) is not None:
            dispatch(table)
        steal_queued()
        while pending:
            take_oldest()
        finished = True
    except BrokenExecutor:  # a worker killed (by the kernel's out-of-memory killer, say)
        raise WorkerError("a worker process ended abruptly (killed, or out of memory)") from None
    finally:
        if not finished:
            claims.take_back_all()  # nobody will read them
        try:
            shut_down(executor)
        finally:
            if parts is not None:  # no worker writes any more (unless the shut-down was cut short)
                parts.remove_all()
    if failure:
        raise failure[0]
