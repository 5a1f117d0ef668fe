"""Lane dumps from retrieval runs made elsewhere: ``assembler lanes from-runs`` (docs/runs.md).

Each run (TREC, ranx/pyserini JSON, CSV/TSV or Parquet) becomes one sub-lane of the passage hits
(``PassageHit.lanes.bm25`` / ``.vector``, ``{rank, score}``); a passage's own ``score`` is the
reciprocal-rank fusion of its sub-lanes by the rule ``lanes build`` uses
(:func:`assembler.retrieval.hybrid.fuse_ranked`), and its text comes from the corpus. Runs are
parsed block by block into Polars columns (never one Python object per line) and spilled to
temporary Parquet files; the checks and the fusion then take a chunk of queries at a time, so
memory does not grow with the runs. The corpus is read once, keeping only the locators and
offsets of the documents the runs name (their text is read again, by offset, when served).

Every bad line is reported as ``file:line: query_id 'q' field F: rule`` and stops the run, or
with ``on_error="skip"`` is written to the errors file and left out.
"""

from __future__ import annotations

import csv
import json
import math
import os
import re
import tempfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np
import numpy.typing as npt
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq

from assembler.contract.jsoninput import read_json
from assembler.contract.jsontext import to_f32
from assembler.contract.request import DEFAULT_SEARCH_LIMIT, MAX_SEARCH_LIMIT
from assembler.contract.wire import ShapeError
from assembler.errors import InputError, RecordError, UsageError, counted, encodable, shown
from assembler.retrieval.build import Settings, citation_entries, passage_hit, record_text, triple_activations
from assembler.retrieval.graph import TripleGraph
from assembler.retrieval.hybrid import FusedHit, RankedEntry, fuse_ranked
from assembler.retrieval.inputs import Fact, Paragraph, read_facts
from assembler.run.io import (
    SNIFF_BYTES,
    RawRecord,
    check_json_lines,
    check_unique_columns,
    is_parquet,
    parquet_batches,
    row_text,
)
from assembler.run.outputs import Rejects, run_outputs
from assembler.run.paths import refuse_same_files
from assembler.run.paths import shown as shown_path
from assembler.run.queries import QueriesFormat, describe_trec_line, plain_path, read_queries
from assembler.run.schemas import LANE_DUMP_SCHEMA
from assembler.stages.fuse import RRF_K

__all__ = [
    "RUN_NAMES",
    "CorpusFormat",
    "FromRunsSettings",
    "FromRunsSummary",
    "Run",
    "RunFormat",
    "from_runs",
    "parse_run_option",
]

Json = dict[str, Any]
RunFormat = Literal["trec", "json", "csv", "parquet"]
CorpusFormat = Literal["beir", "jsonl", "parquet"]
RanksFrom = Literal["file", "score"]
RUN_NAMES = ("bm25", "vector")
"""The passage hit's sub-lanes: the contract knows these two and no other."""

MAX_U32 = 2**32 - 1
_BLOCK = 4 << 20
_CHUNK_QUERIES = 2048
_CHUNK_ROWS = 1 << 18
_QID_NAMES = ("qid", "query_id")
_DOCID_NAMES = ("docid", "doc_id")
_CORPUS_IDS: dict[str, tuple[str, ...]] = {"beir": ("_id",), "jsonl": ("id", "docid", "doc_id", "_id")}
_CORPUS_TEXTS: dict[str, tuple[str, ...]] = {"beir": ("text",), "jsonl": ("text", "contents")}
_QRELS_HINT = "qrels are relevance judgements: give them to 'assembler evaluate --qrels'"


@dataclass(frozen=True)
class Run:
    """One retrieval run: the sub-lane it fills (``bm25`` or ``vector``), its file, and its format
    (``None``: detected from the content, then the extension)."""

    name: str
    path: Path
    format: RunFormat | None = None


def parse_run_option(text: str) -> Run:
    """``NAME=FILE`` (the ``--run`` value): NAME must be a sub-lane of the contract."""
    name, equals, path = text.partition("=")
    if not equals or not path:
        raise UsageError(f"--run takes NAME=FILE (NAME bm25 or vector), got {shown(text)!r}")
    if name not in RUN_NAMES:
        raise UsageError(
            f"--run {shown(name)}=...: a passage hit has two sub-lanes, bm25 and vector, and no other; "
            "fuse further runs into one of them first (docs/runs.md, 'More than two retrievers')"
        )
    return Run(name, Path(path))


@dataclass(frozen=True)
class FromRunsSettings:
    """How runs become lanes (docs/runs.md for each rule).

    ``search_limit``: passages per query (the request's ``search_limit``); ``pool_depth``: ranks
    of each run kept before fusion (``None``: all); ``ranks``: ``file`` takes a run's rank column
    where it has one, ``score`` always ranks by score (descending, ties by document id);
    ``source_field`` / ``paragraph_field``: the corpus fields a document's locator comes from
    (default: source = the document id, paragraph = 0); ``with_title``: serve the title as the
    passage's first line; ``keep_without_hits``: write a record (with no passages) for a query no
    run names, else leave it out."""

    search_limit: int = DEFAULT_SEARCH_LIMIT
    pool_depth: int | None = None
    ranks: RanksFrom = "file"
    corpus_format: CorpusFormat | None = None
    queries_format: QueriesFormat | None = None
    source_field: str | None = None
    paragraph_field: str | None = None
    with_title: bool = False
    context: str = "corpus"
    activate_limit: int = 20
    keep_without_hits: bool = True

    def __post_init__(self) -> None:
        if not 1 <= self.search_limit <= MAX_SEARCH_LIMIT:
            raise UsageError(f"search_limit must be from 1 to {MAX_SEARCH_LIMIT}, got {self.search_limit}")
        if self.pool_depth is not None and self.pool_depth < 1:
            raise UsageError(f"pool_depth must be a positive integer, got {self.pool_depth}")


@dataclass
class FromRunsSummary:
    """What a run of :func:`from_runs` wrote and left out."""

    queries: int = 0
    passages: int = 0
    without_hits: int = 0
    unknown_queries: dict[str, int] = field(default_factory=dict)
    rejected: int = 0

    def line(self, output: str) -> str:
        """The command's one-line summary (counts only, no text)."""
        unknown = sum(self.unknown_queries.values())
        return (
            f"built lanes for {counted(self.queries, 'query', 'queries')} from runs: "
            f"{counted(self.passages, 'passage')}, {counted(self.without_hits, 'query', 'queries')} without hits, "
            f"{counted(unknown, 'run query id')} not in the queries file, {self.rejected} rejected -> {output}"
        )


# ---------------------------------------------------------------- reading lines


def _line_blocks(path: str) -> Iterator[tuple[int, int, bytes]]:
    """``(number of its first line, its byte offset, bytes)`` of whole-line blocks of about 8 MiB."""
    number = 1
    offset = 0
    pending = b""
    with open(path, "rb") as handle:
        while block := handle.read(_BLOCK):
            block = pending + block
            cut = block.rfind(b"\n") + 1
            if cut == 0:
                pending = block
                continue
            pending = block[cut:]
            yield number, offset, block[:cut]
            number += block.count(b"\n", 0, cut)
            offset += cut
    if pending:
        yield number, offset, pending + b"\n"


def _offset_lines(path: str) -> Iterator[tuple[int, int, bytes]]:
    """``(line number, byte offset, bytes)`` of every non-blank line (``\\r`` ends stripped)."""
    for first, offset, block in _line_blocks(path):
        for index, raw in enumerate(block.split(b"\n")[:-1]):
            start = offset
            offset += len(raw) + 1
            raw = raw.rstrip(b"\r")
            if raw.strip():
                yield first + index, start, raw


def _line_texts(path: str, wanted: set[int]) -> dict[int, str]:
    """The text of the wanted lines (bad bytes replaced): the errors file's ``record``."""
    found: dict[int, str] = {}
    if not wanted:
        return found
    last = max(wanted)
    for number, _, raw in _offset_lines(path):
        if number in wanted:
            found[number] = raw.decode("utf-8", "replace")
        if number >= last:
            break
    return found


# ---------------------------------------------------------------- runs


@dataclass
class _Problem:
    row: int
    line: int
    query_id: str | None
    field: str
    rule: str


class _RowSink:
    """The valid rows of one run whose query is in the queries file, with the query's position
    (``qorder``), spilled to temporary Parquet files a block at a time: memory holds a block, and
    later one chunk of queries (:meth:`scan`), never the whole run."""

    def __init__(self, folder: str, name: str, order: pl.DataFrame) -> None:
        self.pattern = os.path.join(folder, f"{name}-*.parquet")
        self.folder = folder
        self.name = name
        self.order = order
        self.blocks = 0
        self.rows = 0
        self.first_qid: str | None = None
        self.unknown: set[str] = set()
        self.counts = np.zeros(order.height, dtype=np.int64)

    def add(self, frame: pl.DataFrame) -> None:
        if frame.is_empty():
            return
        self.rows += frame.height
        if self.first_qid is None:
            self.first_qid = frame["qid"][0]
        known = frame.join(self.order, on="qid", how="inner", maintain_order="left")
        if known.height < frame.height:
            self.unknown.update(frame.join(self.order, on="qid", how="anti")["qid"].unique().to_list())
        if known.is_empty():
            return
        self.counts += np.bincount(known["qorder"].to_numpy(), minlength=len(self.counts))
        known.write_parquet(os.path.join(self.folder, f"{self.name}-{self.blocks:07d}.parquet"))
        self.blocks += 1

    def scan(self, begin: int, end: int) -> pl.DataFrame:
        """The rows of the queries ``begin <= qorder < end``, in file order."""
        if not self.blocks:
            return _empty_run().with_columns(pl.lit(0, pl.Int64).alias("qorder")).clear()
        chosen = pl.scan_parquet(self.pattern).filter(pl.col("qorder").is_between(begin, end - 1))
        return chosen.collect().sort("row")


@dataclass
class _RunFile:
    """One run, read: its bad lines, whether it has ranks, its valid rows (in ``sink``), and how
    to get the text of a row for the errors file."""

    run: Run
    problems: list[_Problem]
    has_rank: bool
    texts: Callable[[set[int]], dict[int, str]]
    sink: _RowSink

    @property
    def name(self) -> str:
        return shown_path(self.run.path)


def _detect_run_format(run: Run, plain: str) -> RunFormat:
    with open(plain, "rb") as handle:
        head = handle.read(1 << 16)
    if head.startswith(b"PAR1"):
        return "parquet"
    if head.lstrip().startswith(b"{"):
        return "json"
    first = next((line for line in head.decode("utf-8", "replace").splitlines() if line.strip()), "")
    names = [name.strip().strip('"') for name in re.split("[,\t]", first)]
    if any(n in _QID_NAMES for n in names) and any(n in _DOCID_NAMES for n in names):
        return "csv"
    if tuple(names) == ("query-id", "corpus-id", "score"):
        return "csv"  # refused as qrels when read
    suffix = run.path.name.removesuffix(".gz")
    if suffix.endswith((".csv", ".tsv")):
        return "csv"
    if is_parquet(suffix):
        return "parquet"
    return "trec"


_TREC_LINE = r"^[ \t]*([^ \t]+)[ \t]+([^ \t]+)[ \t]+([^ \t]+)[ \t]+([^ \t]+)[ \t]+([^ \t]+)[ \t]+([^ \t]+)[ \t]*$"
_FIELD_RULE = "must have 6 fields separated by spaces or tabs (qid Q0 docid rank score tag)"


def _checked(frame: pl.DataFrame, has_rank: bool) -> tuple[pl.DataFrame, list[_Problem]]:
    """The per-line rules on typed columns (``score`` Float64 and ``rank`` Int64, null where the
    text was not a number): ids not blank, rank a positive 32-bit integer, score finite in f32."""
    blank = pl.col("qid").is_null() | (pl.col("qid").str.strip_chars() == "")
    blank_doc = pl.col("docid").is_null() | (pl.col("docid").str.strip_chars() == "")
    bad_rank = (
        (pl.col("rank").is_null() | (pl.col("rank") < 1) | (pl.col("rank") > MAX_U32)) if has_rank else pl.lit(False)
    )
    bad_score = pl.col("score").is_null() | ~pl.col("score").cast(pl.Float32).is_finite()
    rule = (
        pl.when(blank)
        .then(pl.lit("qid\0must not be blank"))
        .when(blank_doc)
        .then(pl.lit("docid\0must not be blank"))
        .when(bad_rank)
        .then(pl.lit("rank\0must be a positive integer (at most 4294967295)"))
        .when(bad_score)
        .then(pl.lit("score\0must be a finite number that fits a 32-bit float"))
    )
    frame = frame.with_columns(rule.alias("problem"))
    bad = frame.filter(pl.col("problem").is_not_null())
    problems = [
        _Problem(row, line, None if qid is None or not qid.strip() else qid, *problem.split("\0", 1))
        for row, line, qid, problem in bad.select("row", "line", "qid", "problem").iter_rows()
    ]
    return frame.filter(pl.col("problem").is_null()).drop("problem"), problems


def _read_trec(run: Run, plain: str, sink: _RowSink) -> _RunFile:
    name = shown_path(run.path)
    problems: list[_Problem] = []
    first_checked = False
    for first, _, block in _line_blocks(plain):
        try:
            texts = block.decode("utf-8").split("\n")[:-1]
        except UnicodeDecodeError:
            texts = []
            for index, raw in enumerate(block.split(b"\n")[:-1]):
                try:
                    texts.append(raw.decode("utf-8"))
                except UnicodeDecodeError as exc:
                    line = first + index
                    problems.append(_Problem(line, line, None, "", f"invalid UTF-8 at byte {exc.start} of the line"))
                    texts.append("")
        del block
        lines = pl.DataFrame({"text": texts}).with_row_index("line", offset=first)
        del texts
        lines = lines.with_columns(pl.col("text").str.strip_chars_end("\r")).filter(
            pl.col("text").str.strip_chars() != ""
        )
        if not first_checked and lines.height:
            first_checked = True
            kind = describe_trec_line(lines["text"][0])
            if kind is not None and "qrels" in kind:
                raise UsageError(f"{name} is a qrels file, not a run (its first line is {kind}): {_QRELS_HINT}")
        parts = lines.with_columns(pl.col("text").str.extract_groups(_TREC_LINE).alias("f")).unnest("f")
        del lines
        malformed = parts.filter(pl.col("1").is_null())
        for line, text in malformed.select("line", "text").iter_rows():
            count = len(text.split())
            problems.append(_Problem(line, line, None, "", f"{_FIELD_RULE}, got {count}"))
        frame, more = _checked(
            parts.filter(pl.col("1").is_not_null()).select(
                pl.col("line").cast(pl.Int64).alias("row"),
                pl.col("line").cast(pl.Int64),
                pl.col("1").alias("qid"),
                pl.col("3").alias("docid"),
                pl.col("4").cast(pl.Int64, strict=False).alias("rank"),
                pl.col("5").cast(pl.Float64, strict=False).alias("score"),
            ),
            has_rank=True,
        )
        del parts
        sink.add(frame)
        problems += more
    return _RunFile(run, problems, True, lambda rows: _line_texts(plain, rows), sink)


def _empty_run() -> pl.DataFrame:
    return pl.DataFrame(
        schema={
            "row": pl.Int64,
            "line": pl.Int64,
            "qid": pl.String,
            "docid": pl.String,
            "rank": pl.Int64,
            "score": pl.Float64,
        }
    )


def _column(names: Sequence[str], wanted: Sequence[str], what: str, file: str, *, required: bool = True) -> str | None:
    for name in wanted:
        if name in names:
            return name
    if required:
        listed = ", ".join(shown(n) for n in names[:12])
        raise UsageError(f"{file}: no {what} column ({' or '.join(wanted)}); the columns are {listed}")
    return None


def _read_csv(run: Run, plain: str, sink: _RowSink) -> _RunFile:
    name = shown_path(run.path)
    suffix = run.path.name.removesuffix(".gz")
    with open(plain, encoding="utf-8", errors="surrogateescape", newline="") as handle:
        head = handle.readline()
        while head and not head.strip():
            head = handle.readline()
        delimiter = "\t" if suffix.endswith(".tsv") or ("\t" in head and "," not in head) else ","
        handle.seek(0)
        reader = csv.reader(handle, delimiter=delimiter)
        header: list[str] | None = None
        columns: dict[str, list[Any]] = {key: [] for key in ("row", "line", "qid", "docid", "rank", "score")}
        raw_rank: list[str | None] = []
        raw_score: list[str | None] = []
        problems: list[_Problem] = []
        picks: tuple[int, int, int, int | None] = (0, 0, 0, None)

        def flush() -> None:
            frame, more = _checked(_csv_frame(columns, raw_rank, raw_score), picks[3] is not None)
            sink.add(frame)
            problems.extend(more)
            for values in (*columns.values(), raw_rank, raw_score):
                values.clear()

        rows = iter(reader)
        while True:
            try:
                row = next(rows)
            except StopIteration:
                break
            except csv.Error as exc:  # a field past the csv module's limit, a stray quote at the end
                raise UsageError(f"{name}:{reader.line_num}: cannot be read as CSV: {shown(str(exc))}") from None
            line = reader.line_num
            if not any(cell.strip() for cell in row):
                continue
            if header is None:
                header = [cell.strip() for cell in row]
                check_unique_columns(header, name)
                if tuple(header) == ("query-id", "corpus-id", "score"):
                    raise UsageError(
                        f"{name} is a BEIR qrels file, not a run (header query-id, corpus-id, score): {_QRELS_HINT}"
                    )
                qid = _column(header, _QID_NAMES, "query id", name)
                docid = _column(header, _DOCID_NAMES, "document id", name)
                score = _column(header, ("score",), "score", name)
                rank = _column(header, ("rank",), "rank", name, required=False)
                assert qid is not None and docid is not None and score is not None
                picks = (
                    header.index(qid),
                    header.index(docid),
                    header.index(score),
                    header.index(rank) if rank else None,
                )
                continue
            if any(encodable(cell) != cell for cell in row):
                problems.append(_Problem(line, line, None, "", "invalid UTF-8"))
                continue
            if len(row) != len(header):
                problems.append(_Problem(line, line, None, "", f"has {len(row)} fields, the header {len(header)}"))
                continue
            q, d, s, r = picks
            columns["row"].append(line)
            columns["line"].append(line)
            columns["qid"].append(row[q])
            columns["docid"].append(row[d])
            raw_score.append(row[s].strip())
            raw_rank.append(row[r].strip() if r is not None else None)
            if len(raw_score) >= 1 << 16:
                flush()
        if header is None:
            raise UsageError(f"{name}: no header line (qid, docid, score[, rank])")
        flush()
    return _RunFile(run, problems, picks[3] is not None, lambda rows: _line_texts(plain, rows), sink)


def _csv_frame(
    columns: Mapping[str, list[Any]], raw_rank: list[str | None], raw_score: list[str | None]
) -> pl.DataFrame:
    return pl.DataFrame(
        {
            "row": pl.Series(columns["row"], dtype=pl.Int64),
            "line": pl.Series(columns["line"], dtype=pl.Int64),
            "qid": pl.Series(columns["qid"], dtype=pl.String),
            "docid": pl.Series(columns["docid"], dtype=pl.String),
            "rank": pl.Series(raw_rank, dtype=pl.String).cast(pl.Int64, strict=False),
            "score": pl.Series(raw_score, dtype=pl.String).cast(pl.Float64, strict=False),
        }
    )


def _read_parquet_run(run: Run, plain: str, sink: _RowSink) -> _RunFile:
    name = shown_path(run.path)
    try:
        parquet = pq.ParquetFile(plain)
    except (OSError, pa.ArrowException) as exc:
        raise UsageError(f"cannot read {name} as Parquet: {shown(str(exc))}") from None
    names = parquet.schema_arrow.names
    check_unique_columns(names, name)
    if tuple(names) == ("query-id", "corpus-id", "score"):
        raise UsageError(f"{name} holds BEIR qrels columns (query-id, corpus-id, score), not a run: {_QRELS_HINT}")
    qid = _column(names, _QID_NAMES, "query id", name)
    docid = _column(names, _DOCID_NAMES, "document id", name)
    score = _column(names, ("score",), "score", name)
    rank = _column(names, ("rank",), "rank", name, required=False)
    assert qid is not None and docid is not None and score is not None
    schema = parquet.schema_arrow
    for column, kinds in ((qid, "id"), (docid, "id"), (score, "number"), (rank, "integer")):
        if column is None:
            continue
        kind = schema.field(column).type
        fits = (
            pa.types.is_string(kind) or pa.types.is_large_string(kind) or pa.types.is_integer(kind)
            if kinds == "id"
            else pa.types.is_integer(kind) or pa.types.is_floating(kind)
            if kinds == "number"
            else pa.types.is_integer(kind)
        )
        if not fits:
            want = {"id": "a string or an integer", "number": "a number", "integer": "an integer"}[kinds]
            raise UsageError(f"{name}: column {shown(column)} must be {want}, it is {kind}")
    problems: list[_Problem] = []
    start = 1
    picked = [c for c in (qid, docid, score, rank) if c is not None]
    for batch in parquet_batches(str(run.path), parquet, batch_size=1 << 16, columns=picked):
        part = pl.from_arrow(batch)
        assert isinstance(part, pl.DataFrame)
        rows = pl.int_range(start, start + part.height, dtype=pl.Int64, eager=True)
        start += part.height
        frame, more = _checked(
            pl.DataFrame(
                {
                    "row": rows,
                    "line": rows,
                    "qid": part[qid].cast(pl.String),
                    "docid": part[docid].cast(pl.String),
                    "rank": part[rank].cast(pl.Int64) if rank else pl.Series([None] * part.height, dtype=pl.Int64),
                    "score": part[score].cast(pl.Float64),
                }
            ),
            rank is not None,
        )
        sink.add(frame)
        problems += more

    def texts(wanted: set[int]) -> dict[int, str]:
        return {row + 1: text for row, text in _parquet_rows(plain, [row - 1 for row in wanted], picked).items()}

    return _RunFile(run, problems, rank is not None, texts, sink)


def _parquet_rows(plain: str, rows: Sequence[int], columns: Sequence[str] | None = None) -> dict[int, str]:
    """The errors file's text of Parquet rows (0-based): compact JSON without nulls, a row group
    read at a time."""
    parquet = pq.ParquetFile(plain)
    found: dict[int, str] = {}
    start = 0
    wanted = sorted(set(rows))
    for group in range(parquet.num_row_groups):
        size = parquet.metadata.row_group(group).num_rows
        inside = [row for row in wanted if start <= row < start + size]
        if inside:
            table = parquet.read_row_group(group, columns=list(columns) if columns else None)
            for row, value in zip(inside, table.take([row - start for row in inside]).to_pylist(), strict=True):
                found[row] = row_text({k: v for k, v in value.items() if v is not None})
        start += size
    return found


_WS = re.compile(r"[ \t\n\r]*")


def _finite(number: float) -> float | None:
    """A JSON run's score as a finite f64, or ``None`` (NaN, an infinity, an integer past an f64)."""
    try:
        value = float(number)
    except OverflowError:
        return None
    return value if math.isfinite(value) else None


class _JsonRun:
    """A two-level scanner for ``{qid: {docid: score}}``: every entry with its line, repeated keys
    kept (the general repeated-document rule judges them), bad entries reported one by one."""

    def __init__(self, name: str, text: str) -> None:
        self.name = name
        self.text = text
        self.decoder = json.JSONDecoder(parse_constant=float)
        self._line = 1
        self._seen = 0
        self.at = 0  # the cursor of :meth:`members`

    def line_at(self, position: int) -> int:
        self._line += self.text.count("\n", self._seen, position)
        self._seen = position
        return self._line

    def skip(self, position: int) -> int:
        match = _WS.match(self.text, position)
        assert match is not None
        return match.end()

    def fail(self, position: int, what: str) -> UsageError:
        return UsageError(f"{self.name}:{self.line_at(position)}: not a JSON run {{qid: {{docid: score}}}}: {what}")

    def key(self, position: int) -> tuple[str, int]:
        if self.text[position : position + 1] != '"':
            raise self.fail(position, "expected a string key")
        try:
            key, end = json.decoder.scanstring(self.text, position + 1)  # type: ignore[attr-defined]
        except (json.JSONDecodeError, ValueError):
            raise self.fail(position, "a key is not a valid JSON string") from None
        end = self.skip(end)
        if self.text[end : end + 1] != ":":
            raise self.fail(end, "expected ':' after a key")
        return key, self.skip(end + 1)

    def value(self, position: int) -> tuple[Any, int]:
        try:
            return self.decoder.raw_decode(self.text, position)
        except (ValueError, RecursionError):  # JSONDecodeError, or an integer of over 4,300 digits
            raise self.fail(position, "a value is not valid JSON") from None

    def members(self, after: str) -> Iterator[tuple[int, str]]:
        """``(line, key)`` of every member of the object whose ``{`` is at the cursor (``at``),
        which is left at the member's value: the caller moves it past the value before the next
        member is read. Both levels of the run are read by this one loop."""
        self.at = self.skip(self.at + 1)
        if self.text[self.at : self.at + 1] == "}":
            self.at += 1
            return
        while True:
            line = self.line_at(self.at)
            key, self.at = self.key(self.at)
            yield line, key
            self.at = self.skip(self.at)
            mark = self.text[self.at : self.at + 1]
            if mark == "}":
                self.at += 1
                return
            if mark != ",":
                raise self.fail(self.at, f"expected ',' or '}}' {after}")
            self.at = self.skip(self.at + 1)

    def entries(self) -> Iterator[tuple[int, str, str | None, Any, str]]:
        """``(line, qid, docid, score, record text)``; docid ``None`` for a query whose value is
        not an object (score then holds the rule)."""
        self.at = self.skip(0)
        if self.text[self.at : self.at + 1] != "{":
            raise self.fail(self.at, "the file must hold one JSON object")
        for _, qid in self.members("after a query"):
            start = self.at
            if self.text[start : start + 1] != "{":
                _, self.at = self.value(start)
                record = _entry_text(qid, None, self.text[start : self.at])
                yield self.line_at(start), qid, None, "must be an object {docid: score}", record
                continue
            for line, docid in self.members("in a query's object"):
                start = self.at
                score, self.at = self.value(start)
                yield line, qid, docid, score, _entry_text(qid, docid, self.text[start : self.at])
        self.at = self.skip(self.at)
        if self.at != len(self.text):
            raise self.fail(self.at, "text after the object (one JSON object per file, not JSON Lines)")


def _entry_text(qid: str, docid: str | None, value: str) -> str:
    """One entry of a JSON run as the errors file shows it: ``{qid: value}`` or ``{qid: {docid: value}}``."""
    inner = value if docid is None else f"{{{json.dumps(docid, ensure_ascii=False)}:{value}}}"
    return encodable(f"{{{json.dumps(qid, ensure_ascii=False)}:{inner}}}")


def _read_json_run(run: Run, plain: str, sink: _RowSink) -> _RunFile:
    name = shown_path(run.path)
    with open(plain, "rb") as handle:
        data = handle.read()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise UsageError(f"{name}:{line}: invalid UTF-8: a JSON run must be UTF-8 text") from None
    del data
    problems: list[_Problem] = []
    records: dict[int, str] = {}
    columns: dict[str, list[Any]] = {key: [] for key in ("row", "line", "qid", "docid", "score")}

    def flush() -> None:
        frame, more = _checked(
            pl.DataFrame(
                {
                    "row": pl.Series(columns["row"], dtype=pl.Int64),
                    "line": pl.Series(columns["line"], dtype=pl.Int64),
                    "qid": pl.Series(columns["qid"], dtype=pl.String),
                    "docid": pl.Series(columns["docid"], dtype=pl.String),
                    "rank": pl.Series([None] * len(columns["row"]), dtype=pl.Int64),
                    "score": pl.Series(columns["score"], dtype=pl.Float64),
                }
            ),
            has_rank=False,
        )
        sink.add(frame)
        problems.extend(more)
        for values in columns.values():
            values.clear()

    for row, (line, qid, docid, score, record) in enumerate(_JsonRun(name, text).entries(), start=1):
        if docid is None:
            records[row] = record
            problems.append(_Problem(row, line, qid, "", str(score)))
            continue
        if encodable(qid) != qid or encodable(docid) != docid:
            records[row] = record
            problems.append(_Problem(row, line, None, "", "holds a lone surrogate (not valid Unicode)"))
            continue
        number = _finite(score) if type(score) in (int, float) else None
        if number is None:
            records[row] = record  # kept as written (NaN, an integer past an f64, a string): no column holds it
        columns["row"].append(row)
        columns["line"].append(line)
        columns["qid"].append(qid)
        columns["docid"].append(docid)
        columns["score"].append(number)
        if len(columns["row"]) >= 1 << 16:
            flush()
    flush()
    del text

    def texts(rows: set[int]) -> dict[int, str]:
        found = {row: records[row] for row in rows if row in records}
        rest = list(rows - set(found))
        if rest and sink.blocks:
            kept = pl.scan_parquet(sink.pattern).filter(pl.col("row").is_in(rest)).collect()
            for row, qid, docid, score in kept.select("row", "qid", "docid", "score").iter_rows():
                found[row] = json.dumps({qid: {docid: score}}, ensure_ascii=False, separators=(",", ":"))
        return found

    return _RunFile(run, problems, False, texts, sink)


_READERS: dict[str, Callable[[Run, str, _RowSink], _RunFile]] = {
    "trec": _read_trec,
    "csv": _read_csv,
    "parquet": _read_parquet_run,
    "json": _read_json_run,
}


def _repeats(frame: pl.DataFrame, keys: list[str]) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The rows whose ``keys`` came before (with ``first``, the line of the first), and the rest;
    ``frame`` is in row order."""
    later = frame.select(~pl.struct(keys).is_first_distinct()).to_series()
    if not later.any():
        return frame.clear().with_columns(pl.lit(0, pl.Int64).alias("first")), frame
    repeated = frame.filter(later)
    kept = frame.filter(~later)
    firsts = kept.join(repeated.select(keys).unique(), on=keys).select([*keys, pl.col("line").alias("first")])
    return repeated.join(firsts, on=keys, how="left", maintain_order="left"), kept


def _ranked(rows: pl.DataFrame, has_rank: bool, ranks: RanksFrom) -> tuple[pl.DataFrame, list[_Problem]]:
    """One chunk of queries' rows (in file order): repeated documents (and repeated file ranks)
    refused, ranks from the file or by score (descending, ties by document id)."""
    repeated, frame = _repeats(rows, ["qorder", "docid"])
    problems = [
        _Problem(row, line, qid, "docid", f"{_quoted(docid)} is repeated for this query (first at line {at})")
        for row, line, qid, docid, at in repeated.select("row", "line", "qid", "docid", "first").iter_rows()
    ]
    if has_rank and ranks == "file":
        repeated, frame = _repeats(frame, ["qorder", "rank"])
        problems += [
            _Problem(
                row,
                line,
                qid,
                "rank",
                f"rank {rank} is repeated for this query (first at line {at}): rank by score instead",
            )
            for row, line, qid, rank, at in repeated.select("row", "line", "qid", "rank", "first").iter_rows()
        ]
    else:
        frame = frame.sort(["qorder", "score", "docid"], descending=[False, True, False]).with_columns(
            (pl.int_range(pl.len()).over("qorder") + 1).cast(pl.Int64).alias("rank")
        )
    return frame, problems


def _chunks(counts: npt.NDArray[np.int64]) -> list[tuple[int, int]]:
    """Consecutive query ranges of about 262,144 run rows each (at least one query; at most 2,048
    queries, the output's batch)."""
    rows = _CHUNK_ROWS
    out: list[tuple[int, int]] = []
    start, total = 0, 0
    for query, count in enumerate(counts.tolist()):
        if query > start and (total + count > rows or query - start >= _CHUNK_QUERIES):
            out.append((start, query))
            start, total = query, 0
        total += count
    out.append((start, len(counts)))
    return out


def _quoted(text: str) -> str:
    return f"'{shown(text)}'"


# ---------------------------------------------------------------- the corpus


@dataclass
class _Corpus:
    """The documents the runs name: ``doc, docid, source, paragraph, line, at`` (``at``: byte
    offset of the line, or the Parquet row) and a reader of their text."""

    docs: pl.DataFrame
    read: Callable[[Sequence[int]], dict[int, tuple[str | None, str]]]


def _field(value: Mapping[str, Any], name: str) -> Any:
    metadata = value.get("metadata")
    if isinstance(metadata, dict) and name in metadata:
        return metadata[name]
    return value.get(name)


class _Doc:
    """The rules of one corpus document (any format): id, text, title, and its locator."""

    def __init__(self, settings: FromRunsSettings, id_key: str, text_key: str) -> None:
        self.settings = settings
        self.id_key = id_key
        self.text_key = text_key

    def check(self, value: Mapping[str, Any]) -> tuple[str, str, int] | tuple[str | None, str, str]:
        """``(docid, source, paragraph)``, or ``(docid or None, field, rule)`` for a bad document."""
        docid = value.get(self.id_key)
        if type(docid) is int:
            docid = str(docid)
        if not isinstance(docid, str) or not docid.strip():
            return None, self.id_key, "must be a non-blank string or an integer"
        if encodable(docid) != docid:
            return None, self.id_key, "holds a lone surrogate (not valid Unicode)"
        text = value.get(self.text_key)
        if not isinstance(text, str):
            return docid, self.text_key, "must be a string"
        title = value.get("title")
        if title is not None and not isinstance(title, str):
            return docid, "title", "must be a string or null"
        metadata = value.get("metadata")
        if metadata is not None and not isinstance(metadata, dict):
            return docid, "metadata", "must be an object or null"
        source: Any = docid
        if self.settings.source_field is not None:
            source = _field(value, self.settings.source_field)
            if not isinstance(source, str) or not source.strip():
                return docid, self.settings.source_field, "must be a non-blank string (the source field)"
        paragraph: Any = 0
        if self.settings.paragraph_field is not None:
            paragraph = _field(value, self.settings.paragraph_field)
            if type(paragraph) is not int or not 0 <= paragraph <= MAX_U32:
                return (
                    docid,
                    self.settings.paragraph_field,
                    "must be an integer from 0 to 4294967295 (the paragraph field)",
                )
        return docid, source, paragraph


class _Kept:
    """Documents kept from the corpus stream, a block of columns at a time."""

    def __init__(self, referenced: pl.Series, fact_keys: set[tuple[str, int]]) -> None:
        self.referenced = referenced
        self.fact_keys = fact_keys
        self.columns: dict[str, list[Any]] = {key: [] for key in ("docid", "source", "paragraph", "line", "at")}
        self.frames: list[pl.DataFrame] = []

    def add(self, docid: str, source: str, paragraph: int, line: int, at: int) -> None:
        columns = self.columns
        columns["docid"].append(docid)
        columns["source"].append(source)
        columns["paragraph"].append(paragraph)
        columns["line"].append(line)
        columns["at"].append(at)
        if len(columns["docid"]) >= 1 << 16:
            self.flush()

    def flush(self) -> None:
        frame = pl.DataFrame(
            self.columns,
            schema={"docid": pl.String, "source": pl.String, "paragraph": pl.Int64, "line": pl.Int64, "at": pl.Int64},
        )
        wanted = pl.col("docid").is_in(self.referenced.implode())
        if self.fact_keys:
            keys = pl.DataFrame(
                {"source": [k[0] for k in self.fact_keys], "paragraph": [k[1] for k in self.fact_keys]},
                schema={"source": pl.String, "paragraph": pl.Int64},
            ).with_columns(pl.lit(True).alias("fact"))
            frame = frame.join(keys, on=["source", "paragraph"], how="left")
            wanted = wanted | pl.col("fact").fill_null(False)
            frame = frame.filter(wanted).drop("fact")
        else:
            frame = frame.filter(wanted)
        self.frames.append(frame)
        self.columns = {key: [] for key in self.columns}

    def frame(self) -> pl.DataFrame:
        self.flush()
        return pl.concat(self.frames)


def _first_keys(value: Mapping[str, Any], candidates: Sequence[str]) -> str | None:
    return next((key for key in candidates if key in value), None)


def _read_jsonl_corpus(
    path: Path, plain: str, settings: FromRunsSettings, kept: _Kept, refuse: Callable[[_Problem, str], None]
) -> tuple[pl.DataFrame, Callable[[Sequence[int]], dict[int, tuple[str | None, str]]], str]:
    name = shown_path(path)
    rules: _Doc | None = None
    chosen = settings.corpus_format
    for number, at, raw in _offset_lines(plain):
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            refuse(
                _Problem(number, number, None, "", f"invalid UTF-8 at byte {exc.start} of the line"),
                raw.decode("utf-8", "replace"),
            )
            continue
        try:
            value = read_json(text)  # the strict reader of every input: numbers, depth, repeated keys, surrogates
        except ShapeError as exc:
            refuse(_Problem(number, number, None, exc.path, exc.rule), text)
            continue
        if not isinstance(value, dict):
            refuse(_Problem(number, number, None, "", "must be a JSON object"), text)
            continue
        if rules is None:
            if chosen is None:
                chosen = "beir" if "_id" in value else "jsonl"
            id_key = _first_keys(value, _CORPUS_IDS[chosen]) or _CORPUS_IDS[chosen][0]
            text_key = _first_keys(value, _CORPUS_TEXTS[chosen]) or _CORPUS_TEXTS[chosen][0]
            rules = _Doc(settings, id_key, text_key)
        found = rules.check(value)
        if isinstance(found[2], str):
            docid, key, rule = found
            refuse(_Problem(number, number, docid, str(key), rule), text)
            continue
        docid, source, paragraph = found
        assert isinstance(docid, str) and isinstance(source, str) and isinstance(paragraph, int)
        kept.add(docid, source, paragraph, number, at)
    if rules is None:
        raise UsageError(f"{name}: no documents")
    text_key = rules.text_key

    def read(offsets: Sequence[int]) -> dict[int, tuple[str | None, str]]:
        found: dict[int, tuple[str | None, str]] = {}
        with open(plain, "rb") as handle:
            for at in sorted(set(offsets)):
                handle.seek(at)
                try:
                    value = json.loads(handle.readline())
                    found[at] = (value.get("title"), value[text_key])
                except (ValueError, KeyError, AttributeError):
                    raise UsageError(f"{name} changed while it was being read") from None
        return found

    return kept.frame(), read, chosen or "jsonl"


def _read_parquet_corpus(
    path: Path, plain: str, settings: FromRunsSettings, kept: _Kept, refuse: Callable[[_Problem, str], None]
) -> tuple[pl.DataFrame, Callable[[Sequence[int]], dict[int, tuple[str | None, str]]], str]:
    name = shown_path(path)
    try:
        parquet = pq.ParquetFile(plain)
    except (OSError, pa.ArrowException) as exc:
        raise UsageError(f"cannot read {name} as Parquet: {shown(str(exc))}") from None
    names = parquet.schema_arrow.names
    check_unique_columns(names, name)
    id_key = _column(names, _CORPUS_IDS["jsonl"], "document id", name)
    text_key = _column(names, _CORPUS_TEXTS["jsonl"], "text", name)
    assert id_key is not None and text_key is not None
    wanted = [id_key, text_key]
    for extra in ("title", "metadata", settings.source_field, settings.paragraph_field):
        if extra is not None and extra in names and extra not in wanted:
            wanted.append(extra)
    rules = _Doc(settings, id_key, text_key)
    row = 0
    for batch in parquet_batches(str(path), parquet, batch_size=1 << 14, columns=wanted):
        try:
            values = batch.to_pylist()
        except (UnicodeDecodeError, pa.ArrowException) as exc:
            raise UsageError(f"cannot read {name}: a value cannot be read ({type(exc).__name__})") from None
        for value in values:
            row += 1
            found = rules.check(value)
            if isinstance(found[2], str):
                docid, key, rule = found
                clean = {k: v for k, v in value.items() if v is not None}
                refuse(_Problem(row, row, docid, str(key), rule), row_text(clean))
                continue
            docid, source, paragraph = found
            assert isinstance(docid, str) and isinstance(source, str) and isinstance(paragraph, int)
            kept.add(docid, source, paragraph, row, row - 1)
    if row == 0:
        raise UsageError(f"{name}: no documents")
    columns = [text_key] + (["title"] if "title" in names else [])
    starts = []
    total = 0
    for index in range(parquet.num_row_groups):
        starts.append(total)
        total += parquet.metadata.row_group(index).num_rows

    def read(rows: Sequence[int]) -> dict[int, tuple[str | None, str]]:
        found: dict[int, tuple[str | None, str]] = {}
        by_group: dict[int, list[int]] = {}
        for at in sorted(set(rows)):
            group = max(i for i, start in enumerate(starts) if start <= at)
            by_group.setdefault(group, []).append(at)
        for group, ats in by_group.items():
            table = parquet.read_row_group(group, columns=columns)
            taken = table.take([at - starts[group] for at in ats]).to_pylist()
            for at, value in zip(ats, taken, strict=True):
                found[at] = (value.get("title"), value[text_key])
        return found

    return kept.frame(), read, "parquet"


def _read_corpus(
    path: Path,
    plain: str,
    settings: FromRunsSettings,
    referenced: pl.Series,
    fact_keys: set[tuple[str, int]],
    rejects: Rejects,
) -> _Corpus:
    name = shown_path(path)
    with open(plain, "rb") as handle:
        head = handle.read(SNIFF_BYTES)
    parquet = head.startswith(b"PAR1")
    if settings.corpus_format is not None:
        parquet = settings.corpus_format == "parquet"
    if not parquet:
        check_json_lines(head, name)  # as every JSON Lines input: not binary, not one JSON document

    def refuse(problem: _Problem, text: str) -> None:
        _reject(rejects, name, problem, text, id_name="doc_id")

    kept = _Kept(referenced, fact_keys)
    reader = _read_parquet_corpus if parquet else _read_jsonl_corpus
    frame, read, _ = reader(path, plain, settings, kept, refuse)
    frame = frame.sort("line")
    # the same id twice, or two ids at one locator: the later line is refused (only among the
    # documents the runs or facts name; the others are never compared)
    problems: list[_Problem] = []
    first = frame.group_by("docid").agg(pl.col("line").min().alias("first"))
    joined = frame.join(first, on="docid")
    for line, docid, at in (
        joined.filter(pl.col("line") != pl.col("first")).select("line", "docid", "first").iter_rows()
    ):
        problems.append(_Problem(line, line, docid, "", f"repeated document id (first at line {at})"))
    frame = joined.filter(pl.col("line") == pl.col("first")).drop("first")
    first = frame.group_by("source", "paragraph").agg(
        pl.col("line").min().alias("first"), pl.col("docid").sort_by("line").first().alias("owner")
    )
    joined = frame.join(first, on=["source", "paragraph"])
    clash = joined.filter(pl.col("line") != pl.col("first"))
    for line, docid, source, paragraph, owner, at in clash.select(
        "line", "docid", "source", "paragraph", "owner", "first"
    ).iter_rows():
        rule = (
            f"maps to source {_quoted(source)} paragraph {paragraph}, as document {_quoted(owner)} "
            f"(line {at}) does: give each document its own paragraph"
        )
        problems.append(_Problem(line, line, docid, "", rule))
    frame = joined.filter(pl.col("line") == pl.col("first")).drop("first", "owner")
    if problems:
        problems.sort(key=lambda p: p.line)
        texts = _corpus_texts(plain, parquet, {p.line for p in problems})
        for problem in problems:
            refuse(problem, texts.get(problem.line, ""))
    frame = frame.with_row_index("doc").with_columns(pl.col("doc").cast(pl.Int64))
    return _Corpus(frame, read)


def _corpus_texts(plain: str, parquet: bool, lines: set[int]) -> dict[int, str]:
    """The errors file's text of corpus lines (Parquet: 1-based rows)."""
    if not parquet:
        return _line_texts(plain, lines)
    return {row + 1: text for row, text in _parquet_rows(plain, [line - 1 for line in lines]).items()}


# ---------------------------------------------------------------- putting it together


class DocumentError(RecordError):
    """A bad corpus document, named by its document id (``doc_id`` in the errors file)."""

    id_name = "doc_id"


def _reject(rejects: Rejects, file: str, problem: _Problem, text: str, *, id_name: str = "query_id") -> None:
    error: RecordError
    if id_name == "doc_id":
        error = DocumentError(file, problem.line, problem.query_id, problem.field, problem.rule)
    else:
        error = RecordError(file, problem.line, problem.query_id, problem.field, problem.rule)
    rejects.reject(RawRecord(file, problem.line, None, text), error)


def _stop_at_first(rejects: Rejects, run: _RunFile, problems: list[_Problem]) -> None:
    """With ``stop``: the run file's first problem (by line) ends the run."""
    if problems and rejects.on_error == "stop":
        first = min(problems, key=lambda p: (p.line, p.row))
        raise InputError(RecordError(run.name, first.line, first.query_id, first.field, first.rule))


def _refuse_all(rejects: Rejects, run: _RunFile, problems: list[_Problem]) -> None:
    """Stop at the first problem of the run file (by line), or write every one to the errors
    file, by line whichever rule refused it."""
    if not problems:
        return
    _stop_at_first(rejects, run, problems)
    problems = sorted(problems, key=lambda p: (p.line, p.row))
    texts = run.texts({p.row for p in problems})
    for problem in problems:
        _reject(rejects, run.name, problem, texts.get(problem.row, ""))


def _facts(path: Path, context: str) -> list[Fact]:
    facts = read_facts(path, context)
    other = next((fact.context for fact in facts if fact.context != context), None)
    if other is not None:
        raise UsageError(
            f"{shown_path(path)}: a fact of context {_quoted(other)}: from-runs builds one context ({_quoted(context)})"
        )
    return facts


def from_runs(
    runs: Sequence[Run],
    corpus: str | os.PathLike[str],
    queries: str | os.PathLike[str],
    output: str | os.PathLike[str],
    *,
    triples: str | os.PathLike[str] | None = None,
    settings: FromRunsSettings | None = None,
    on_error: Literal["stop", "skip"] = "stop",
    errors_path: str | None = None,
    output_format: Literal["jsonl", "parquet"] | None = None,
) -> FromRunsSummary:
    """Write a lane dump (one record per query, in the queries file's order) from the runs.

    ``output`` is JSON Lines, or Parquet (``LANE_DUMP_SCHEMA``) by ``output_format`` or a
    ``.parquet``/``.pq`` name; both it and the errors file land only if the run finishes.
    """
    settings = settings or FromRunsSettings()
    if not runs:
        raise UsageError("from_runs needs at least one run")
    names = [run.name for run in runs]
    for name in names:
        if name not in RUN_NAMES:
            raise UsageError(f"a run names sub-lane bm25 or vector, not {shown(name)!r}")
    if len(set(names)) != len(names):
        raise UsageError(f"two runs for the {next(n for n in names if names.count(n) > 1)} sub-lane: fuse them first")
    output = os.fspath(output)
    refuse_same_files(
        {"runs": [run.path for run in runs], "corpus": corpus, "queries": queries, "triples": triples},
        {"output": output, "errors_path": errors_path if on_error == "skip" else None},
    )
    to_parquet = output_format == "parquet" if output_format is not None else is_parquet(output)
    summary = FromRunsSummary()
    with ExitStack() as stack:
        out, rejects = stack.enter_context(run_outputs(output, to_parquet, on_error, errors_path))
        query_list = read_queries(
            queries,
            format=settings.queries_format,
            reject=lambda error, text: rejects.reject(RawRecord(error.file, error.line, None, text), error),
        )
        order = pl.DataFrame(
            {"qid": [q for q, _ in query_list], "qorder": range(len(query_list))},
            schema={"qid": pl.String, "qorder": pl.Int64},
        )
        spill = stack.enter_context(tempfile.TemporaryDirectory(prefix="assembler-runs-"))
        # 1. every run, a block at a time: per-line rules; the rows of known queries spilled
        reads: list[_RunFile] = []
        for run in runs:
            plain = stack.enter_context(plain_path(run.path))
            read = _READERS[run.format or _detect_run_format(run, plain)](run, plain, _RowSink(spill, run.name, order))
            if not read.sink.rows and not read.problems:
                raise UsageError(f"{read.name}: no run lines")
            _stop_at_first(rejects, read, read.problems)
            if read.sink.rows and not read.sink.blocks and query_list:
                raise UsageError(
                    f"no query id of {read.name} is in {shown_path(queries)} (the run's first is "
                    f"{_quoted(read.sink.first_qid or '')}, the queries' first {_quoted(query_list[0][0])})"
                )
            summary.unknown_queries[run.name] = len(read.sink.unknown)
            reads.append(read)
        # 2. a chunk of queries at a time: repeated pairs and ranks, ranks, the pool depth
        chunks = _chunks(sum((read.sink.counts for read in reads), np.zeros(len(query_list), dtype=np.int64)))
        referenced: list[pl.Series] = []
        for lane, read in enumerate(reads):
            for index, (begin, end) in enumerate(chunks):
                frame, problems = _ranked(read.sink.scan(begin, end), read.has_rank, settings.ranks)
                _stop_at_first(rejects, read, problems)
                read.problems += problems
                if settings.pool_depth is not None:
                    frame = frame.filter(pl.col("rank") <= settings.pool_depth)
                frame.write_parquet(os.path.join(spill, f"used-{lane}-{index:07d}.parquet"))
                referenced.append(frame["docid"].unique())
                if len(referenced) > 64:
                    referenced = [pl.concat(referenced).unique()]
        # 3. the corpus: every document checked, the named ones kept
        facts = _facts(Path(triples), settings.context) if triples is not None else []
        fact_keys = {(f.source, f.paragraph) for f in facts if f.source is not None and f.paragraph is not None}
        names_used = pl.concat(referenced).unique() if referenced else pl.Series([], dtype=pl.String)
        del referenced
        corpus_plain = stack.enter_context(plain_path(corpus))
        docs = _read_corpus(Path(corpus), corpus_plain, settings, names_used, fact_keys, rejects)
        del names_used
        graph, by_key = _graph(facts, docs, settings)
        # 4. a chunk at a time again: documents missing from the corpus, fusion, the records
        writer = _Writer(out, to_parquet)
        try:
            for index, (begin, end) in enumerate(chunks):
                lanes: list[pl.DataFrame] = []
                for lane, read in enumerate(reads):
                    used = pl.read_parquet(os.path.join(spill, f"used-{lane}-{index:07d}.parquet"))
                    joined = used.join(docs.docs.select("docid", "doc"), on="docid", how="left")
                    missing = joined.filter(pl.col("doc").is_null())
                    problems = [
                        _Problem(row, line, qid, "docid", f"{_quoted(docid)} is not in the corpus")
                        for row, line, qid, docid in missing.select("row", "line", "qid", "docid").iter_rows()
                    ]
                    _stop_at_first(rejects, read, problems)
                    read.problems += problems
                    lanes.append(
                        joined.filter(pl.col("doc").is_not_null())
                        .select("qorder", "doc", "rank", "score")
                        .with_columns(pl.lit(RUN_NAMES.index(read.run.name)).alias("lane"))
                    )
                hits = _candidates(pl.concat(lanes), settings.search_limit)
                hits = hits.join(docs.docs.select("doc", "source", "paragraph"), on="doc", how="left")
                _write_records(
                    query_list,
                    begin,
                    end,
                    hits.sort("qorder", "lane", "rank"),
                    docs,
                    graph,
                    by_key,
                    settings,
                    writer,
                    summary,
                )
        finally:
            writer.close()
        for read in reads:
            _refuse_all(rejects, read, read.problems)
        summary.rejected = rejects.count
    return summary


def _candidates(hits: pl.DataFrame, limit: int) -> pl.DataFrame:
    """The hit rows of the documents that can be among a query's first ``limit`` passages.

    Only a filter: a document whose fused score (the RRF of its ranks, in f64) is below the
    ``limit``-th best of its query, by more than a millionth, cannot make the cut whatever the f32
    rounding and the ties. :func:`fuse_ranked` then orders the rest by the rule itself, so the
    Python loop sees a few rows per query instead of every line of the runs."""
    contribution = 1.0 / (pl.lit(RRF_K) + pl.col("rank").cast(pl.Float64))
    fused = hits.group_by("qorder", "doc").agg(contribution.sum().alias("fused"))
    kth = pl.col("fused").top_k(limit).min().over("qorder")
    keep = fused.filter(pl.col("fused") >= kth * (1.0 - 1e-6)).select("qorder", "doc")
    return hits.join(keep, on=["qorder", "doc"], how="semi")


def _graph(
    facts: Sequence[Fact], docs: _Corpus, settings: FromRunsSettings
) -> tuple[TripleGraph | None, dict[tuple[str, int], Paragraph]]:
    if not facts:
        return None, {}
    keys = {(f.source, f.paragraph) for f in facts if f.source is not None and f.paragraph is not None}
    rows = [
        (source, paragraph, at)
        for source, paragraph, at in docs.docs.select("source", "paragraph", "at").iter_rows()
        if (source, paragraph) in keys
    ]
    texts = docs.read([at for _, _, at in rows])
    by_key = {
        (source, paragraph): Paragraph(settings.context, source, paragraph, texts[at][1], title=texts[at][0] or None)
        for source, paragraph, at in rows
    }
    return TripleGraph(facts, by_key), by_key


class _Writer:
    """Lane-dump lines to JSON Lines, or rows to Parquet (``LANE_DUMP_SCHEMA``)."""

    def __init__(self, out: Any, parquet: bool) -> None:
        self.out = out
        self.parquet = pq.ParquetWriter(out.handle, LANE_DUMP_SCHEMA) if parquet else None
        self.rows: list[Json] = []

    def write(self, line: str) -> None:
        if self.parquet is None:
            self.out.handle.write(line + "\n")
            return
        self.rows.append(json.loads(line))
        if len(self.rows) >= 256:
            self.flush()

    def flush(self) -> None:
        if self.parquet is not None and self.rows:
            self.parquet.write_table(pa.Table.from_pylist(self.rows, schema=LANE_DUMP_SCHEMA))
            self.rows = []

    def close(self) -> None:
        if self.parquet is not None:
            self.flush()
            self.parquet.close()


def _write_records(
    query_list: Sequence[tuple[str, str]],
    begin: int,
    end: int,
    hits: pl.DataFrame,
    docs: _Corpus,
    graph: TripleGraph | None,
    by_key: Mapping[tuple[str, int], Paragraph],
    settings: FromRunsSettings,
    writer: _Writer,
    summary: FromRunsSummary,
) -> None:
    """The records of the queries ``begin <= qorder < end`` from their candidate hits (sorted by
    query, lane and rank)."""
    graph_settings = Settings(activate_limit=settings.activate_limit)
    ats = docs.docs["at"]
    by_query: dict[int, tuple[list[RankedEntry], list[RankedEntry]]] = {}
    keys: dict[int, tuple[str, int]] = {}
    for qorder, doc, rank, score, source, paragraph, lane in hits.select(
        "qorder", "doc", "rank", "score", "source", "paragraph", "lane"
    ).iter_rows():
        by_query.setdefault(qorder, ([], []))[lane].append((doc, rank, to_f32(score)))
        keys[doc] = (source, paragraph)
    fused: dict[int, list[FusedHit]] = {
        qorder: fuse_ranked(bm25, vector, keys)[: settings.search_limit] for qorder, (bm25, vector) in by_query.items()
    }
    texts = docs.read(sorted({ats[hit.doc] for found in fused.values() for hit in found}))
    for qorder in range(begin, end):
        query_id, query = query_list[qorder]
        found = fused.get(qorder, [])
        if not found:
            summary.without_hits += 1
            if not settings.keep_without_hits:
                continue
        passages = []
        for hit in found:
            source, paragraph = keys[hit.doc]
            title, text = texts[ats[hit.doc]]
            document = Paragraph(settings.context, source, paragraph, text, title=title or None)
            if settings.with_title:  # the title line + text, as both lanes of lanes build index it
                document = Paragraph(settings.context, source, paragraph, document.index_text)
            passages.append(passage_hit(document, hit))
        origins = [query]
        activations = triple_activations(graph, origins, None, graph_settings) if graph is not None else None
        request: Json = {"origins": origins, "text_fallback_query": query, "search_limit": settings.search_limit}
        lanes = {
            "graph_query": None,
            "graph_activate": activations,
            "passages": passages,
            "communities": None,
            "citations": citation_entries(activations or [], by_key),
        }
        writer.write(record_text(query_id, settings.context, request, lanes))
        summary.queries += 1
        summary.passages += len(passages)
