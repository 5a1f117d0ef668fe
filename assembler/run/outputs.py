"""The output side of a run: packages, the errors file and the run's counts.

Both files land only when the run finishes, together (:class:`~assembler.run.atomic.AtomicFile`,
:func:`~assembler.run.atomic.commit_together`: if the errors file cannot be renamed into place, the
packages are not left replaced either). Every engine writes through these: the local run, the
process pool's parent and the Ray driver.
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field

import polars as pl
import pyarrow as pa

from assembler.contract.jsontext import escape_string, utf8_buffer
from assembler.contract.request import LIMIT_CEILINGS
from assembler.errors import InputError, RecordError, UsageError, counted, encodable
from assembler.pipeline import REASONS, BatchResult
from assembler.run.atomic import AtomicFile, commit_together
from assembler.run.batch import NAMED_BUDGET_KEYS, BudgetNote, packages_table, summary_counts
from assembler.run.io import RawRecord, parquet_writer
from assembler.run.options import OnError
from assembler.run.schemas import PACKAGE_SCHEMA

__all__ = [
    "PackageSink",
    "Rejects",
    "RunSummary",
    "encoded_lines",
    "output_lines",
    "package_line",
    "run_outputs",
]


@dataclass
class RunSummary:
    """Counts of a run, for the one-line summary and for callers."""

    queries: int = 0
    items: int = 0
    omitted: dict[str, int] = field(default_factory=lambda: dict.fromkeys(REASONS, 0))
    search_limit_cuts: int = 0
    rejected: int = 0
    seconds: float = 0.0
    ignored_budget_keys: dict[str, int] = field(default_factory=dict)
    """Keys of request budgets that are no budget field (ignored, as the server ignores unknown
    fields), as messages show them (escaped, at most 80 characters), each with its number of
    records; at most :data:`~assembler.run.batch.NAMED_BUDGET_KEYS` keys."""
    other_ignored_budget_keys: int = 0
    """Records holding such a key beyond the ones named in :attr:`ignored_budget_keys`."""
    clamped_budgets: dict[str, int] = field(default_factory=dict)
    """Budget fields asked above the contract's ceiling (by the request or an override) and
    clamped to it, each with its number of records."""

    def line(self) -> str:
        """``assembled N queries: ...`` (no candidate text, safe to log). The rate is given only for
        runs of a second or more: a shorter run's rate is mostly start-up and would not reproduce.

        >>> RunSummary(queries=5, items=8, omitted={"budget_exceeded": 3}, seconds=0.04).line()
        'assembled 5 queries: 8 items admitted, omitted 3 (budget_exceeded 3), 0 search-limit cuts, 0 rejected'
        >>> RunSummary(queries=1, items=1, search_limit_cuts=1).line()
        'assembled 1 query: 1 item admitted, omitted 0, 1 search-limit cut, 0 rejected'
        """
        reasons = [f"{reason} {count}" for reason, count in self.omitted.items() if count]
        omitted = f" ({', '.join(reasons)})" if reasons else ""
        rate = f"; {self.queries / self.seconds:,.0f} queries/s" if self.seconds >= 1 else ""
        return (
            f"assembled {counted(self.queries, 'query', 'queries')}: {counted(self.items, 'item')} admitted, "
            f"omitted {sum(self.omitted.values())}{omitted}, {counted(self.search_limit_cuts, 'search-limit cut')}, "
            f"{self.rejected} rejected{rate}"
        )

    def warnings(self) -> list[str]:
        """What the run did with budgets that its packages do not show, one message each (no
        candidate text; keys escaped and bounded): keys that are no budget field, and values
        clamped to the contract's ceiling. The command prints each as ``assembler: warning: ...``.

        >>> summary = RunSummary(ignored_budget_keys={"max_item": 12}, clamped_budgets={"max_bytes": 1})
        >>> for message in summary.warnings():
        ...     print(message)
        budget key 'max_item' is not a budget field (ignored in 12 records; fields: max_items, max_bytes, max_tokens)
        budget max_bytes above the ceiling 1048576 clamped to it in 1 record
        """
        fields = ", ".join(LIMIT_CEILINGS)
        said = [
            f"budget key '{key}' is not a budget field (ignored in {counted(count, 'record')}; fields: {fields})"
            for key, count in self.ignored_budget_keys.items()
        ]
        if self.other_ignored_budget_keys:
            said.append(
                f"budget keys beyond these {len(self.ignored_budget_keys)} are not budget fields either "
                f"(ignored in {counted(self.other_ignored_budget_keys, 'record')})"
            )
        clamped = self.clamped_budgets
        said += [
            f"budget {name} above the ceiling {ceiling} clamped to it in {counted(clamped[name], 'record')}"
            for name, ceiling in LIMIT_CEILINGS.items()
            if name in clamped
        ]
        return said

    def add_budget_notes(self, notes: Iterable[BudgetNote]) -> None:
        """Count the budget notes of the packages written (:class:`~assembler.run.batch.BudgetNote`)."""
        named = self.ignored_budget_keys
        for note in notes:
            unnamed = False
            for key in note.ignored:
                if key in named or len(named) < NAMED_BUDGET_KEYS:
                    named[key] = named.get(key, 0) + 1
                else:
                    unnamed = True
            self.other_ignored_budget_keys += unnamed
            for name in note.clamped:
                self.clamped_budgets[name] = self.clamped_budgets.get(name, 0) + 1

    def add_packages(self, packages: pa.Table) -> None:
        """Count the packages of a ``PACKAGE_SCHEMA`` table (or of its summary columns alone)."""
        counts = summary_counts(packages)
        self.queries += packages.num_rows
        self.items += counts["items_used"]
        self.search_limit_cuts += counts["search_limit_cuts"]
        for reason in REASONS:
            self.omitted[reason] += counts[f"omitted_{reason}"]


def output_lines(query_ids: Sequence[str], packages: pl.Series) -> bytes:
    """The JSON Lines output of packages, UTF-8: one ``{"query_id":<id>,"package":<package>}``
    line per package, in order.

    The lines are one Polars string column, and its UTF-8 buffer is the output: no Python string
    is made per package (that took about a tenth of a typical run).

    >>> output_lines(["q1"], pl.Series(['{"items":[]}']))
    b'{"query_id":"q1","package":{"items":[]}}\\n'
    """
    # The ids are escaped by the contract's own function (a few per chunk), so that the output does
    # not rest on Polars' JSON writer agreeing with it (the columnar reader's probe).
    ids = pl.Series(list(map(escape_string, query_ids)), dtype=pl.String)
    lines = pl.select(
        pl.concat_str(pl.lit('{"query_id":'), pl.lit(ids), pl.lit(',"package":'), pl.lit(packages), pl.lit("}\n"))
    ).to_series()
    return utf8_buffer(lines)


def package_line(query_id: str, package: str) -> str:
    """One output line (:func:`output_lines` of one package), as text."""
    return output_lines([query_id], pl.Series([package], dtype=pl.String)).decode("utf-8")


class Rejects:
    """Where rejected records go (``skip``) or why the run stops (``stop``)."""

    def __init__(self, on_error: OnError, sink: AtomicFile | None) -> None:
        self.on_error = on_error
        self.sink = sink
        self.count = 0

    def reject(self, raw: RawRecord, error: RecordError) -> None:
        """Stop the run with ``error``, or write the record and its reason to the errors file.

        The line is always valid UTF-8 JSON: a lone surrogate is written as its escape text.
        """
        if self.on_error == "stop":
            raise InputError(error)
        self.count += 1
        assert self.sink is not None
        entry = {**error.as_dict(), "record": encodable(raw.text)}
        self.sink.handle.write(json.dumps(entry, ensure_ascii=False, separators=(",", ":")) + "\n")


@contextmanager
def run_outputs(
    output: str, binary: bool, on_error: OnError, errors_path: str | None
) -> Iterator[tuple[AtomicFile, Rejects]]:
    """The output and the rejects of a run; both land only if the block finishes, together (within
    an enclosing :func:`~assembler.run.atomic.commit_together`, with the caller's other outputs)."""
    if on_error == "skip" and not errors_path:
        raise UsageError("on_error='skip' needs an errors file to put rejected records in")
    with commit_together(), AtomicFile(output, binary=binary) as out:
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


def encoded_lines(result: BatchResult, assess: bool = False) -> bytes:
    """The JSON Lines output of a batch, UTF-8, one line per package (``assess``: with its assessment)."""
    if assess:
        from assembler.assess.packages import assessed_line, assessment_texts  # only --assess loads U7

        lines = map(assessed_line, result.query_ids, result.packages, assessment_texts(result.packages))
        return "".join(lines).encode("utf-8", "backslashreplace")
    return output_lines(result.query_ids, result.package_column)


class PackageSink:
    """Packages into the run's output file, as JSON Lines or Parquet."""

    def __init__(self, out: AtomicFile, parquet: bool, assess: bool = False) -> None:
        self.out = out
        self.assess = assess
        self.writer = parquet_writer(out.handle, PACKAGE_SCHEMA) if parquet else None

    def write(self, result: BatchResult) -> None:
        if self.writer is None:
            self.write_encoded(encoded_lines(result, self.assess))
            return
        self.writer.write_table(packages_table(result))

    def write_encoded(self, data: bytes) -> None:
        """Write JSON Lines output already rendered and encoded as UTF-8 (:func:`encoded_lines`;
        in a pool, by the worker that assembled the chunk)."""
        handle = self.out.handle
        if isinstance(handle, io.TextIOWrapper) and handle.encoding == "utf-8":
            handle.flush()
            handle.buffer.write(data)
        else:  # a replaced standard output (captured by a test)
            handle.write(data.decode("utf-8"))

    def write_table(self, packages: pa.Table) -> None:
        """Write a ``PACKAGE_SCHEMA`` table (the Ray engine's blocks)."""
        if self.writer is not None:
            self.writer.write_table(packages)
            return
        texts = pl.Series(packages.column("package"))
        self.write_encoded(output_lines(packages.column("query_id").to_pylist(), texts))

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
