"""``assembler assess``: run contexts in (JSON Lines), one ``EvidenceAssemblyResult`` line out, in order.

Streamed in chunks like ``assemble``, with the same error discipline and the same pieces: records
come from ``assembler.run.io.read_raw``; output and errors file go through ``assembler.run.outputs``'s
atomic run outputs, so a run that stops on a bad record leaves no output file, and
``on_error="skip"`` puts every rejected record, untouched, with its reason in the errors file.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field

from assembler.assess.context import ParsedRun, RunRecordError, duplicate_run_error, parse_context
from assembler.assess.rules import (
    DEFAULTS,
    AssessOptions,
    Clock,
    assess_parsed,
    format_timestamp,
    result_lines,
    utc_now,
)
from assembler.errors import InputError, RecordError, UsageError, counted
from assembler.run.io import (
    DEFAULT_MAX_RECORD_BYTES,
    RawRecord,
    check_max_record_bytes,
    is_parquet,
    memory_panics,
    read_raw,
)
from assembler.run.options import DEFAULT_CHUNK_SIZE, OnError
from assembler.run.outputs import run_outputs
from assembler.run.paths import refuse_same_files
from assembler.run.signals import held_signals

__all__ = ["AssessSummary", "run_assess"]

LEVELS = ("strong", "partial", "weak")


@dataclass
class AssessSummary:
    """Counts of an ``assess`` run, for the one-line summary and for callers."""

    runs: int = 0
    support: dict[str, int] = field(default_factory=lambda: dict.fromkeys(LEVELS, 0))
    rejected: int = 0
    seconds: float = 0.0

    def line(self) -> str:
        """``assessed N runs: ...`` (no payload text, safe to log)."""
        levels = ", ".join(f"{level} {count}" for level, count in self.support.items())
        return f"assessed {counted(self.runs, 'run')}: {levels}; {self.rejected} rejected"


def _parsed(
    raws: Iterator[RawRecord], reject: Callable[[RawRecord, RecordError], None], options: AssessOptions
) -> Iterator[ParsedRun]:
    """Valid run contexts; every bad one (and a repeated run id) goes to ``reject``."""
    seen: set[str] = set()
    for raw in raws:
        if raw.error is not None:
            reject(raw, RunRecordError.of(raw.error))
            continue
        try:
            run = parse_context(raw.value, file=raw.file, line=raw.line, selectors=options.build_citation_paths)
            if run.run_id in seen:
                raise duplicate_run_error(run)
        except InputError as exc:
            reject(raw, exc.error)
            continue
        seen.add(run.run_id)
        yield run


def _chunks(runs: Iterator[ParsedRun], size: int) -> Iterator[list[ParsedRun]]:
    chunk: list[ParsedRun] = []
    for run in runs:
        chunk.append(run)
        if len(chunk) >= size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def run_assess(
    inputs: Sequence[str],
    output: str,
    *,
    on_error: OnError = "stop",
    errors_path: str | None = None,
    chunk_size: int = DEFAULT_CHUNK_SIZE,
    clock: Clock = utc_now,
    options: AssessOptions = DEFAULTS,
    max_record_bytes: int = DEFAULT_MAX_RECORD_BYTES,
) -> AssessSummary:
    """Assess every run context of ``inputs`` (JSON Lines) into ``output``; return the counts.

    ``clock`` is read once: every result of the run has the same ``assembled_at``. With
    ``on_error="stop"`` the first bad record raises :class:`InputError` and no output is left.
    A run context of more than ``max_record_bytes`` is a record error (its text is not kept).
    """
    check_max_record_bytes(max_record_bytes)
    parquet = [path for path in inputs if is_parquet(path)]
    if parquet:
        raise UsageError(f"assess reads run contexts as JSON Lines, not Parquet: {parquet[0]}")
    errors = errors_path if on_error == "skip" else None
    refuse_same_files({"inputs": inputs}, {"output": output, "errors_path": errors})
    summary = AssessSummary()
    started = time.perf_counter()
    assembled_at = format_timestamp(clock())
    with memory_panics(), run_outputs(output, False, on_error, errors_path) as (out, rejects):
        raws = read_raw(inputs, max_record_bytes=max_record_bytes)
        for chunk in _chunks(_parsed(raws, rejects.reject, options), chunk_size):
            with held_signals():  # as a chunk is assembled (assembler.run.signals)
                results = assess_parsed(chunk, assembled_at, options)
            out.handle.write("".join(line + "\n" for line in result_lines(results)))
            summary.runs += results.height
            for level, count in results.group_by("support_level").len().iter_rows():
                summary.support[level] += count
    summary.rejected = rejects.count
    summary.seconds = time.perf_counter() - started
    return summary
