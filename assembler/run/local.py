"""The local engine: read in chunks, assemble each chunk (here or in a process pool), write in order.

Memory is bounded by the chunk (``chunk_size`` queries or ``chunk_bytes`` of input), plus the set
of query ids seen, needed to reject a duplicate anywhere in the input. On a bad record the run
either stops (``on_error="stop"``: an :class:`~assembler.errors.InputError`, nothing written) or
sets the record aside with its reason in an errors file (``on_error="skip"``) and goes on, so
nothing is lost. With ``workers`` > 1 the chunks are assembled by a process pool and written in
input order (``assembler.run.pool``): the same bytes, errors and counts.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable

import pyarrow as pa

from assembler.contract import wire
from assembler.contract.request import REQUEST_FIELDS
from assembler.run.batch import BudgetNote, assemble_table, ignored_keys_shown, read_tables, rejected_entries
from assembler.run.io import (
    DEFAULT_MAX_RECORD_BYTES,
    Inputs,
    RawRecord,
    check_max_record_bytes,
    input_paths,
    memory_panics,
    open_input,
    parquet_writer,
    read_raw,
)
from assembler.run.options import DEFAULT_CHUNK_SIZE, OnError, OutputFormat, RunOptions
from assembler.run.outputs import PackageSink, RunSummary, run_outputs
from assembler.run.paths import output_format as choose_format
from assembler.run.paths import refuse_same_files
from assembler.run.records import iter_records
from assembler.run.schemas import LANE_DUMP_SCHEMA
from assembler.run.signals import held_signals
from assembler.run.workers import default_workers, input_size, usable_cpus
from assembler.stages.lanes import LANE_NAMES, LaneRecord

__all__ = ["convert", "run_assembly"]


def run_assembly(
    inputs: Inputs,
    output: str | os.PathLike[str],
    options: RunOptions | None = None,
    *,
    progress: Callable[[int], None] | None = None,
) -> RunSummary:
    """Assemble every record of ``inputs`` into ``output`` as ``options`` say; return the run's counts.

    With ``on_error="stop"`` the first bad record raises :class:`~assembler.errors.InputError` and
    no output file is left; an output that is an input or the other output is refused
    (:func:`~assembler.run.paths.refuse_same_files`), and so is an output whose extension names no
    format when ``options.output_format`` is not given (:func:`~assembler.run.paths.output_format`).
    Budget keys that are no budget field and budgets clamped to the contract's ceilings are counted
    in the summary (:meth:`RunSummary.warnings`). ``progress`` is called with the number of
    packages of each chunk written. ``workers=None`` chooses from the input's size
    (:func:`~assembler.run.workers.default_workers`: one process below two workers' worth of bytes, or
    for standard input). With ``workers`` other than 1 the workers are spawned processes: a script
    using them needs the ``if __name__ == "__main__":`` guard.
    """
    options = options or RunOptions()
    output = os.fspath(output)
    paths = input_paths(inputs)
    errors = options.errors_path if options.on_error == "skip" else None
    refuse_same_files({"inputs": paths}, {"output": output, "errors_path": errors})
    options = options.writing(output)
    workers = options.workers
    if workers is None:  # a reranker keeps the run in one process
        workers = 1 if options.reranker is not None else default_workers(input_size(paths), usable_cpus())
    summary = RunSummary()
    started = time.perf_counter()
    parquet = options.output_format == "parquet"
    with memory_panics(), run_outputs(output, parquet, options.on_error, options.errors_path) as (out, rejects):
        sink = PackageSink(out, parquet, options.assess)
        seen: set[str] = set()  # query ids of earlier chunks

        def assemble_here(table: pa.Table) -> None:
            # A reranker's HTTP waits stay interruptible at once (such a run is one process).
            with held_signals() if options.reranker is None else contextlib.nullcontext():
                assembled = assemble_table(
                    table,
                    overrides=options.overrides,
                    policy=options.selection_policy,
                    on_error=options.on_error,
                    seen=seen,
                    reranker=options.reranker,
                )
            for raw, error in rejected_entries(assembled.rejected):
                rejects.reject(raw, error)
            result = assembled.batch
            sink.write(result)
            summary.add_packages(result.summaries.to_arrow())
            summary.add_budget_notes(assembled.budget_notes.values())
            if progress is not None:
                progress(len(result.query_ids))

        try:
            if workers == 1:
                for table in read_tables(paths, options.chunk_size, options.chunk_bytes, options.max_record_bytes):
                    assemble_here(table)
            else:  # the pool's modules load for a pool only
                from assembler.run.parts import FILE_COLUMN, Parts, Splitter
                from assembler.run.pool import ChunkJob, run_pooled

                # Chunks of plain JSON Lines files are sent by where they lie, the others whole;
                # both come back in part files beside the output's temporary (assembler/run/parts.py).
                parts = Parts.beside(out)
                splitter = Splitter(paths) if parts is not None else None
                tables = read_tables(
                    paths,
                    options.chunk_size,
                    options.chunk_bytes,
                    options.max_record_bytes,
                    opener=open_input if splitter is None else splitter.open,
                    file_column=None if splitter is None else FILE_COLUMN,
                )
                run_pooled(
                    tables,
                    workers=workers,
                    job=ChunkJob.of(options),
                    in_process=assemble_here,
                    seen=seen,
                    sink=sink,
                    rejects=rejects,
                    summary=summary,
                    progress=progress,
                    splitter=splitter,
                    parts=parts,
                )
        finally:
            sink.close()
    summary.rejected = rejects.count
    summary.seconds = time.perf_counter() - started
    return summary


def _clean_row(raw: RawRecord, record: LaneRecord) -> dict[str, object]:
    """A validated record as a Parquet row: known fields only, lanes uncut."""
    value = raw.value
    request = dict(value["request"])
    for field in REQUEST_FIELDS:  # f64 fields as the record path reads them (an integer past i64 too)
        if field.kind in ("f64", "f32") and request.get(field.name) is not None:
            request[field.name] = wire.check_number(request[field.name], f"request.{field.name}")
    request["origins"] = list(record.request.origins)
    request["labels"] = list(record.request.labels) if request.get("labels") is not None else None
    lanes_raw = value["lanes"]
    shapes = {
        "graph_query": wire.ASSOCIATION,
        "graph_activate": wire.ACTIVATION,
        "passages": wire.PASSAGE_HIT,
        "communities": wire.COMMUNITY_HIT,
        "citations": wire.CITATION_ENTRY,
    }
    lanes = {
        name: None
        if lanes_raw.get(name) is None
        else [wire.validate(shapes[name], entry, name) for entry in lanes_raw[name]]
        for name in LANE_NAMES
    }
    return {
        "query_id": record.query_id,
        "context": record.context,
        "request": request,
        "lanes": lanes,
        "plan_lanes": record.plan_lanes,
    }


def convert(
    inputs: Inputs,
    output: str | os.PathLike[str],
    *,
    on_error: OnError = "stop",
    errors_path: str | None = None,
    chunk_size: int = DEFAULT_CHUNK_SIZE,
    output_format: OutputFormat | None = None,
    max_record_bytes: int = DEFAULT_MAX_RECORD_BYTES,
) -> RunSummary:
    """Lane dumps from JSON Lines to Parquet or back, validated; the output's format is
    ``output_format``, else its extension, as for :func:`run_assembly`
    (:func:`~assembler.run.paths.output_format`). A record of more than ``max_record_bytes`` is a
    record error, as in :func:`run_assembly`."""
    check_max_record_bytes(max_record_bytes)
    summary = RunSummary()
    started = time.perf_counter()
    output = os.fspath(output)
    errors = errors_path if on_error == "skip" else None
    refuse_same_files({"inputs": inputs}, {"output": output, "errors_path": errors})
    to_parquet = choose_format(output, output_format) == "parquet"
    with memory_panics(), run_outputs(output, to_parquet, on_error, errors_path) as (out, rejects):
        writer = parquet_writer(out.handle, LANE_DUMP_SCHEMA) if to_parquet else None
        try:
            rows: list[dict[str, object]] = []
            raws = read_raw(input_paths(inputs), max_record_bytes=max_record_bytes)
            for raw, record in iter_records(raws, rejects.reject):
                summary.queries += 1
                if writer is None:
                    out.handle.write(raw.text + "\n")
                    continue
                rows.append(_clean_row(raw, record))
                ignored = ignored_keys_shown(raw.value)
                if ignored:  # the schema has no place for them: dropped
                    summary.add_budget_notes([BudgetNote(ignored)])
                if len(rows) >= chunk_size:
                    writer.write_table(pa.Table.from_pylist(rows, schema=LANE_DUMP_SCHEMA))
                    rows = []
            if writer is not None and rows:
                writer.write_table(pa.Table.from_pylist(rows, schema=LANE_DUMP_SCHEMA))
        finally:
            if writer is not None:
                writer.close()
    summary.rejected = rejects.count
    summary.seconds = time.perf_counter() - started
    return summary
