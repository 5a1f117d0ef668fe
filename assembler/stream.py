"""Streaming batch runs: read in chunks, assemble each chunk, write, account for every record.

Memory is bounded by the chunk (``chunk_size`` queries or ``chunk_bytes`` of input), plus the set
of query ids seen, needed to reject a duplicate anywhere in the input. On a bad record the run
either stops (``on_error="stop"``: an :class:`~assembler.errors.InputError`, nothing written) or
sets the record aside with its reason in an errors file (``on_error="skip"``) and goes on, so
nothing is lost. With ``workers`` > 1 the chunks are assembled by a process pool and written in
input order (``assembler.engines.pool``): the same bytes, errors and counts.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Literal

import pyarrow as pa
import pyarrow.parquet as pq

from assembler import wire
from assembler.arrow import (
    DEFAULT_CHUNK_BYTES,
    assemble_table,
    packages_table,
    read_tables,
    rejected_entries,
    summary_counts,
)
from assembler.errors import InputError, RecordError, UsageError
from assembler.io import LANE_DUMP_SCHEMA, PACKAGE_SCHEMA, AtomicFile, RawRecord, is_parquet, package_line, read_raw
from assembler.lanes import LANE_NAMES, LaneRecord, parse_record
from assembler.pipeline import REASONS, BatchResult
from assembler.policy import CONTRACT, SelectionPolicy
from assembler.reorder import Reranker

__all__ = [
    "DUPLICATE_RULE",
    "OnError",
    "PackageSink",
    "Rejects",
    "RunSummary",
    "convert",
    "iter_records",
    "package_lines",
    "run_assembly",
    "run_outputs",
]

OnError = Literal["stop", "skip"]
# Measured: 256 typical queries per chunk peak at ~0.4 GB RSS and run faster than 2048 (1.2 GB);
# see docs/performance.md.
DEFAULT_CHUNK_SIZE = 256
DUPLICATE_RULE = "duplicate query_id (each query may appear once in the input)"


@dataclass
class RunSummary:
    """Counts of a run, for the one-line summary and for callers."""

    queries: int = 0
    items: int = 0
    omitted: dict[str, int] = field(default_factory=lambda: dict.fromkeys(REASONS, 0))
    search_limit_cuts: int = 0
    rejected: int = 0
    seconds: float = 0.0

    def line(self) -> str:
        """``assembled N queries: ...`` (no candidate text, safe to log)."""
        rate = self.queries / self.seconds if self.seconds > 0 else 0.0
        omitted = ", ".join(f"{reason} {count}" for reason, count in self.omitted.items())
        return (
            f"assembled {self.queries} queries: {self.items} items admitted, "
            f"omitted {sum(self.omitted.values())} ({omitted}), {self.search_limit_cuts} search-limit cuts, "
            f"{self.rejected} rejected; {rate:,.0f} queries/s"
        )

    def add_packages(self, packages: pa.Table) -> None:
        """Count the packages of a ``PACKAGE_SCHEMA`` table (or of its summary columns alone)."""
        counts = summary_counts(packages)
        self.queries += packages.num_rows
        self.items += counts["items_used"]
        self.search_limit_cuts += counts["search_limit_cuts"]
        for reason in REASONS:
            self.omitted[reason] += counts[f"omitted_{reason}"]


class Rejects:
    """Where rejected records go (``skip``) or why the run stops (``stop``)."""

    def __init__(self, on_error: OnError, sink: AtomicFile | None) -> None:
        self.on_error = on_error
        self.sink = sink
        self.count = 0

    def reject(self, raw: RawRecord, error: RecordError) -> None:
        if self.on_error == "stop":
            raise InputError(error)
        self.count += 1
        assert self.sink is not None
        entry = {**error.as_dict(), "record": raw.text}
        self.sink.handle.write(json.dumps(entry, ensure_ascii=False, separators=(",", ":")) + "\n")


@contextmanager
def run_outputs(
    output: str, binary: bool, on_error: OnError, errors_path: str | None
) -> Iterator[tuple[AtomicFile, Rejects]]:
    """The output and the rejects of a run; both land only if the block finishes."""
    if on_error == "skip" and not errors_path:
        raise UsageError("on_error='skip' needs an errors file to put rejected records in")
    with AtomicFile(output, binary=binary) as out:
        errors = AtomicFile(errors_path) if on_error == "skip" and errors_path else None
        try:
            rejects = Rejects(on_error, errors)
            yield out, rejects
            out.commit()
            if errors is not None:
                errors.commit()
        finally:
            if errors is not None:
                errors.discard()


def iter_records(
    raws: Iterable[RawRecord],
    reject: Callable[[RawRecord, RecordError], None],
    overrides: dict[str, int] | None = None,
    seen: set[str] | None = None,
) -> Iterator[tuple[RawRecord, LaneRecord]]:
    """Validated records; each bad one (including a repeated query id) is handed to ``reject``.

    ``seen`` holds the query ids accepted before (earlier batches of one run); it is updated.
    """
    seen = set() if seen is None else seen
    for raw in raws:
        if raw.error is not None:
            reject(raw, raw.error)
            continue
        try:
            record = parse_record(raw.value, file=raw.file, line=raw.line, overrides=overrides)
        except InputError as exc:
            reject(raw, exc.error)
            continue
        if record.query_id in seen:
            reject(
                raw,
                RecordError(raw.file, raw.line, record.query_id, "query_id", DUPLICATE_RULE),
            )
            continue
        seen.add(record.query_id)
        yield raw, record


def package_lines(result: BatchResult, assess: bool = False) -> list[str]:
    """The JSON Lines output of a batch, one line per package (``assess``: with its assessment)."""
    if assess:
        from assembler.assess.packages import assessed_line, assessment_texts  # lazy: assess imports stream

        return list(map(assessed_line, result.query_ids, result.packages, assessment_texts(result.packages)))
    return list(map(package_line, result.query_ids, result.packages))


class PackageSink:
    def __init__(self, out: AtomicFile, parquet: bool, assess: bool = False) -> None:
        self.out = out
        self.assess = assess
        self.writer = pq.ParquetWriter(out.write_path, PACKAGE_SCHEMA) if parquet else None

    def write(self, result: BatchResult) -> None:
        if self.writer is None:
            self.out.handle.write("".join(package_lines(result, self.assess)))
            return
        self.writer.write_table(packages_table(result))

    def write_text(self, text: str) -> None:
        """Write JSON Lines output already rendered (the process pool's chunks)."""
        self.out.handle.write(text)

    def write_table(self, packages: pa.Table) -> None:
        """Write a ``PACKAGE_SCHEMA`` table (the Ray engine's blocks)."""
        if self.writer is not None:
            self.writer.write_table(packages)
            return
        lines = map(package_line, packages.column("query_id").to_pylist(), packages.column("package").to_pylist())
        self.out.handle.write("".join(lines))

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()


def run_assembly(
    inputs: Sequence[str],
    output: str,
    *,
    output_format: Literal["jsonl", "parquet"] = "jsonl",
    overrides: dict[str, int] | None = None,
    on_error: OnError = "stop",
    errors_path: str | None = None,
    chunk_size: int = DEFAULT_CHUNK_SIZE,
    policy: SelectionPolicy = CONTRACT,
    progress: Callable[[int], None] | None = None,
    assess: bool = False,
    reranker: Reranker | None = None,
    workers: int | None = 1,
    chunk_bytes: int | None = DEFAULT_CHUNK_BYTES,
) -> RunSummary:
    """Assemble every record of ``inputs`` into ``output``; return the run's counts.

    With ``on_error="stop"`` the first bad record raises :class:`InputError` and no output file
    is left. With ``"skip"`` rejected records go to ``errors_path`` with their reasons.
    ``assess`` adds an ``assessment`` object beside each package (JSON Lines output only).
    ``reranker`` reorders the survivors of every query that asks for a rerank (section 11).
    A JSON Lines chunk ends at ``chunk_size`` queries or ``chunk_bytes`` bytes of input, whichever
    comes first (``None``: queries only), so that records of many passages make smaller chunks.
    ``workers``: processes assembling chunks; 1 (default) assembles in this process, N > 1 starts
    a pool of N once the input holds a second chunk (``assembler.engines.pool``: same output),
    ``None`` means one per usable CPU (one only with a ``reranker``, which cannot go to a pool).
    The workers are spawned: a script using them needs the ``if __name__ == "__main__":`` guard.
    """
    workers = _worker_count(workers, reranker)
    summary = RunSummary()
    started = time.perf_counter()
    parquet = output_format == "parquet"
    if assess and parquet:
        raise UsageError("--assess writes JSON Lines only; it cannot be combined with Parquet output")
    with run_outputs(output, parquet, on_error, errors_path) as (out, rejects):
        sink = PackageSink(out, parquet, assess)
        seen: set[str] = set()  # query ids of earlier chunks

        def assemble_here(table: pa.Table) -> None:
            assembled = assemble_table(
                table, overrides=overrides, policy=policy, on_error=on_error, seen=seen, reranker=reranker
            )
            for raw, error in rejected_entries(assembled.rejected):
                rejects.reject(raw, error)
            result = assembled.batch
            sink.write(result)
            summary.add_packages(result.summaries.to_arrow())
            if progress is not None:
                progress(len(result.packages))

        try:
            tables = read_tables(inputs, chunk_size, chunk_bytes)
            if workers == 1:
                for table in tables:
                    assemble_here(table)
            else:
                from assembler.engines.pool import ChunkJob, run_pooled  # the pool imports this module

                job = ChunkJob.of(overrides, policy, on_error=on_error, parquet=parquet, assess=assess)
                run_pooled(
                    tables,
                    workers=workers,
                    job=job,
                    in_process=assemble_here,
                    seen=seen,
                    sink=sink,
                    rejects=rejects,
                    summary=summary,
                    progress=progress,
                )
        finally:
            sink.close()
    summary.rejected = rejects.count
    summary.seconds = time.perf_counter() - started
    return summary


def _worker_count(workers: int | None, reranker: Reranker | None) -> int:
    if workers is None:
        from assembler.engines.pool import usable_cpus

        return 1 if reranker is not None else usable_cpus()
    if workers < 1:
        raise UsageError(f"workers must be at least 1, got {workers}")
    if workers > 1 and reranker is not None:
        raise UsageError(
            "--workers above 1 cannot be combined with a reranker (one HTTP client and circuit breaker "
            "serve the whole run); use --workers 1"
        )
    return workers


def _clean_row(raw: RawRecord, record: LaneRecord) -> dict[str, object]:
    """A validated record as a Parquet row: known fields only, lanes uncut."""
    value = raw.value
    request = dict(value["request"])
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
    inputs: Sequence[str],
    output: str,
    *,
    on_error: OnError = "stop",
    errors_path: str | None = None,
    chunk_size: int = DEFAULT_CHUNK_SIZE,
) -> RunSummary:
    """Lane dumps from JSON Lines to Parquet or back (by the output's extension), validated."""
    summary = RunSummary()
    started = time.perf_counter()
    to_parquet = is_parquet(output)
    with run_outputs(output, to_parquet, on_error, errors_path) as (out, rejects):
        writer = pq.ParquetWriter(out.write_path, LANE_DUMP_SCHEMA) if to_parquet else None
        try:
            rows: list[dict[str, object]] = []
            for raw, record in iter_records(read_raw(inputs), rejects.reject):
                summary.queries += 1
                if writer is None:
                    out.handle.write(raw.text + "\n")
                    continue
                rows.append(_clean_row(raw, record))
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
