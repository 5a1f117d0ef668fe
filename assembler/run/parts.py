"""Workers that read and write their own parts: where a chunk lies in its files, and part files.

With ``workers`` > 1 (:mod:`assembler.run.pool`) a started worker is sent where a chunk lies
rather than the chunk itself, and writes what it assembled to part files rather than sending it
back through the pool's pipes: the command (the pool's parent) then only reads each part back,
in input order, into the output.

* **Where a chunk lies.** The command reads the input as the one-process run does
  (:func:`assembler.run.batch.read_tables`), so chunks end where they end in one process: the
  Parquet output's row groups and the progress calls are the same. :class:`Splitter` opens each
  plain JSON Lines input that is a regular file through a reader that counts the newlines of every
  block read (a mark: offset and newlines before it), and tells each chunk's rows which input they
  come from (``read_tables(file_column=FILE_COLUMN)``). A chunk of such inputs is a few
  :class:`Span`\\ s: its first and last line in a file, and marks before them. A worker finds the
  exact byte offsets from the marks (:func:`read_spans`: at most a block read past each mark) and
  reads those bytes with the one-process reader (:func:`assembler.run.batch.range_table`), so
  its table holds the command's rows: the same bytes, lines and names. Standard input,
  gzip and zstd inputs, Parquet inputs and records refused while reading have no spans: their
  chunks go to the worker through the pipes, and what it assembled comes back in part files.
* **Part files** are temporary files beside the output's own (:class:`Parts`, named by
  :meth:`~assembler.run.atomic.AtomicFile.temporary_beside`: host-tagged, the command's pid), so
  that a run killed outright leaves nothing that the next run writing that output does not remove
  (:func:`~assembler.run.atomic.remove_stale_temps`). The command removes each part once it has
  read it, and every part it named when the run ends in any other way (an error, a signal, a
  worker killed), once the workers have exited. An output that streams (standard output, a FIFO)
  has no temporary: its runs send every chunk through the pipes.
"""

from __future__ import annotations

import bisect
import contextlib
import io
import itertools
import os
import stat
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from assembler.contract.arrow import byte_total
from assembler.errors import OutputError, UsageError
from assembler.run.atomic import AtomicFile
from assembler.run.batch import JSON_LINE, SOURCE_FILE, SOURCE_LINE, range_table
from assembler.run.io import InputStream, is_parquet, open_input
from assembler.run.paths import shown

__all__ = [
    "FILE_COLUMN",
    "Mark",
    "PartNames",
    "Parts",
    "Span",
    "Splitter",
    "read_bytes",
    "read_spans",
    "read_table",
    "write_bytes",
    "write_table",
]

FILE_COLUMN = "source_index"
"""The column of the command's chunks (JSON Lines form) that holds each row's input, by its index."""
LOCATE_BYTES = 1 << 16
"""Bytes read at a time while looking for a line's start past a mark."""
NEWLINE = ord("\n")


@dataclass(frozen=True)
class Mark:
    """A byte offset of an input file and the number of newlines before it."""

    offset: int
    newlines: int


@dataclass(frozen=True)
class Span:
    """The rows of a chunk that come from one file: lines ``first_line`` to ``last_line`` (``rows``
    records of ``size`` bytes, blank lines aside), marks at or before the newline that ends the
    line before ``first_line`` (``start``) and the one that ends ``last_line`` (``end``), the bytes
    of the file the command had read by then (``read``: a last line without a newline ends there)
    and the file's device and inode (``identity``)."""

    path: str
    name: str
    first_line: int
    last_line: int
    rows: int
    size: int
    start: Mark
    end: Mark
    read: int
    identity: tuple[int, int]


class _Counted(io.RawIOBase):
    """An unbuffered file that marks every block read (:class:`Mark`)."""

    def __init__(self, raw: Any) -> None:
        super().__init__()
        self.raw = raw
        self.identity = _identity(raw)
        self.offsets = [0]
        self.newlines = [0]

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        view = memoryview(buffer).cast("B")
        count = int(self.raw.readinto(view) or 0)
        if count:
            self.offsets.append(self.offsets[-1] + count)
            newlines = int(np.count_nonzero(np.frombuffer(view[:count], dtype=np.uint8) == NEWLINE))
            self.newlines.append(self.newlines[-1] + newlines)
        return count

    @property
    def bytes_read(self) -> int:
        """The bytes read so far."""
        return self.offsets[-1]

    def mark_before(self, newline: int) -> Mark:
        """The last mark with fewer than ``newline`` newlines before it (``Mark(0, 0)`` for 0)."""
        index = max(0, bisect.bisect_left(self.newlines, newline) - 1)
        return Mark(self.offsets[index], self.newlines[index])

    def close(self) -> None:
        if not self.closed:
            self.raw.close()
        super().close()


class Splitter:
    """Where the command's chunks lie: the ``opener`` of its :func:`~assembler.run.batch.read_tables`
    (with ``file_column=FILE_COLUMN``), and :meth:`spans` of each chunk read."""

    def __init__(self, paths: list[str]) -> None:
        self.paths = paths
        self._jsonl = iter([index for index, path in enumerate(paths) if path == "-" or not is_parquet(path)])
        self._files: dict[int, _Counted] = {}

    def open(self, path: str) -> InputStream:
        """:func:`~assembler.run.io.open_input`, and for a plain regular file a reader that marks
        its blocks (the same bytes)."""
        index = next(self._jsonl)
        assert self.paths[index] == path, "the inputs are opened in order"
        stream = open_input(path)
        if path == "-" or stream.compression is not None or not stat.S_ISREG(os.fstat(stream.fileno()).st_mode):
            return stream
        name = stream.name_shown
        raw = stream.detach()  # nothing read past the look at its first bytes: at offset 0
        counted = _Counted(raw)
        marked = InputStream(counted, 1 << 16)
        marked.name_shown, marked.compression = name, None
        self._files[index] = counted
        return marked

    def spans(self, table: pa.Table) -> tuple[Span, ...] | None:
        """Where a chunk's rows lie, file by file; ``None`` unless all come from marked files."""
        if JSON_LINE not in table.column_names or FILE_COLUMN not in table.column_names or table.num_rows == 0:
            return None
        files = table.column(FILE_COLUMN).to_pylist()
        if any(index not in self._files for index in set(files)):
            return None
        lines = table.column(SOURCE_LINE).to_pylist()
        starts = [0, *(row for row in range(1, len(files)) if files[row] != files[row - 1]), len(files)]
        return tuple(
            self._span(table, files[start], lines[start:stop], start) for start, stop in itertools.pairwise(starts)
        )

    def _span(self, table: pa.Table, index: int, lines: list[int], row: int) -> Span:
        counted, first, last = self._files[index], lines[0], lines[-1]
        name = table.column(SOURCE_FILE)[row].as_py()
        size = byte_total(table.column(JSON_LINE).slice(row, len(lines)))
        start, end = counted.mark_before(first - 1), counted.mark_before(last)
        return Span(
            self.paths[index], name, first, last, len(lines), size, start, end, counted.bytes_read, counted.identity
        )


def _identity(raw: Any) -> tuple[int, int]:
    info = os.fstat(raw.fileno())
    return info.st_dev, info.st_ino


def _same_rows(table: pa.Table, span: Span) -> bool:
    """Whether lines read back hold as many records, of as many bytes, from the same first line."""
    if table.num_rows != span.rows or byte_total(table.column(JSON_LINE)) != span.size:
        return False
    return bool(table.column(SOURCE_LINE)[0].as_py() == span.first_line)


def _after_newline(raw: Any, mark: Mark, newline: int, limit: int) -> int | None:
    """The offset just past the ``newline``-th newline of the file, looked for from ``mark``
    (which has fewer before it) up to byte ``limit``; ``None`` if there are fewer."""
    offset, seen = mark.offset, mark.newlines
    while block := os.pread(raw.fileno(), min(LOCATE_BYTES, limit - offset), offset):
        found = block.count(b"\n")
        if seen + found >= newline:
            at = -1
            for _ in range(newline - seen):
                at = block.index(b"\n", at + 1)
            return offset + at + 1
        seen, offset = seen + found, offset + len(block)
    return None


def read_spans(spans: tuple[Span, ...], max_record_bytes: int) -> pa.Table:
    """A chunk read back from where it lies: the command's rows (its ``FILE_COLUMN`` aside)."""
    tables = []
    for span in spans:
        try:
            raw = open(span.path, "rb", buffering=0)  # noqa: SIM115 - closed by the with below
        except OSError as exc:
            raise UsageError(f"cannot read {span.name}: {exc.strerror or exc}") from None
        with raw:
            start = 0 if span.first_line == 1 else _after_newline(raw, span.start, span.first_line - 1, span.read)
            end = _after_newline(raw, span.end, span.last_line, span.read)
            table = None
            if start is not None and _identity(raw) == span.identity:
                end = span.read if end is None else end
                table = range_table(
                    raw, span.name, start, end, first_line=span.first_line, max_record_bytes=max_record_bytes
                )
        if table is None or not _same_rows(table, span):
            raise UsageError(f"{span.name} changed while it was read (lines {span.first_line} to {span.last_line})")
        tables.append(table)
    return pa.concat_tables(tables)


# --- part files -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PartNames:
    """Where a worker writes one chunk: its packages (JSON Lines output lines, or the Parquet
    output's rows as an Arrow stream) and its rejected records (an Arrow stream, only if any);
    ``output`` names the run's output in messages."""

    packages: str
    rejects: str
    output: str


class Parts:
    """The command's part files: named beside the output's temporary, removed once read, and all
    removed when the run ends otherwise (:meth:`remove_all`, once no worker runs)."""

    def __init__(self, out: AtomicFile) -> None:
        self.out = out
        self.named: set[str] = set()

    @classmethod
    def beside(cls, out: AtomicFile) -> Parts | None:
        """The parts of a run writing ``out``; ``None`` when ``out`` streams (no temporary)."""
        return cls(out) if out.temporary_beside() is not None else None

    def new(self) -> PartNames:
        """Names for one chunk's parts (no file is made: the worker makes them)."""
        return PartNames(self._name(), self._name(), shown(self.out.path))

    def _name(self) -> str:
        name = self.out.temporary_beside()
        assert name is not None
        self.named.add(name)
        return name

    def remove(self, names: PartNames) -> None:
        for name in (names.packages, names.rejects):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(name)
            self.named.discard(name)

    def remove_all(self) -> None:
        for name in self.named:
            with contextlib.suppress(OSError):
                os.unlink(name)
        self.named.clear()


def write_bytes(path: str, data: bytes, output: str) -> None:
    """A part of bytes (a new file)."""
    try:
        with open(path, "xb") as handle:
            handle.write(data)
    except OSError as exc:
        raise OutputError(f"cannot write {output}: {exc.strerror or exc}") from None


def write_table(path: str, table: pa.Table, output: str) -> None:
    """A part holding an Arrow table (a new file, an Arrow stream)."""
    try:
        with open(path, "xb") as handle, pa.ipc.new_stream(handle, table.schema) as writer:
            writer.write_table(table)
    except OSError as exc:
        raise OutputError(f"cannot write {output}: {exc.strerror or exc}") from None


def read_bytes(path: str, output: str) -> bytes:
    """A part of bytes, read back."""
    try:
        with open(path, "rb") as handle:
            return handle.read()
    except OSError as exc:
        raise OutputError(f"cannot write {output}: a part file cannot be read back ({exc.strerror or exc})") from None


def read_table(path: str, output: str) -> pa.Table:
    """A part holding an Arrow table, read back."""
    try:
        with open(path, "rb") as handle:
            return pa.ipc.open_stream(handle).read_all()
    except OSError as exc:
        raise OutputError(f"cannot write {output}: a part file cannot be read back ({exc.strerror or exc})") from None
