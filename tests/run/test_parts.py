"""Workers that read and write their own parts (assembler/run/parts.py, with the pool of
assembler/run/pool.py): chunks read back from where they lie are the command's chunks, and runs on
two or three processes write the bytes, errors and counts of one process, leaving no part file.

The property test reads files in this process only; the runs with workers start processes (about
a second each), so they are few, each over inputs holding many cases at once.
"""

from __future__ import annotations

import gzip
import io
import json
import multiprocessing
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import assembler.run.pool as pool
from assembler.cli import main
from assembler.errors import InputError, OutputError, UsageError
from assembler.run.atomic import AtomicFile, host_tag, temp_pattern
from assembler.run.batch import JSON_LINE, SOURCE_FILE, SOURCE_LINE, read_tables
from assembler.run.local import convert, run_assembly
from assembler.run.options import RunOptions
from assembler.run.parts import FILE_COLUMN, Parts, Splitter, read_spans, write_bytes
from assembler.selection import Selection, SelectionInputs
from assembler.selection.contract import ContractPolicy
from tests.oracle.pools import generate_records

if TYPE_CHECKING:
    from tests.conftest import JsonlWriter, Line, RecordFactory

ROWS = [JSON_LINE, SOURCE_FILE, SOURCE_LINE]


def chunks_and_spans(paths: list[str], rows: int, max_bytes: int | None, max_record_bytes: int) -> list[Any]:
    splitter = Splitter(paths)
    read = read_tables(paths, rows, max_bytes, max_record_bytes, opener=splitter.open, file_column=FILE_COLUMN)
    return [(table, splitter.spans(table)) for table in read]


# A line of a generated file: text of the alphabet below, whitespace only (blank), or long.
_TEXT = st.text(st.sampled_from('abc{}":,0123456789 \té語\r'), max_size=40)
_LINE = st.one_of(_TEXT, st.sampled_from(["", " ", "\t \r", "\r"]), st.integers(60, 300).map(lambda n: "x" * n))


@given(
    files=st.lists(st.lists(_LINE, max_size=30), min_size=1, max_size=3),
    final_newline=st.lists(st.booleans(), min_size=3, max_size=3),
    rows=st.integers(1, 7),
    max_bytes=st.none() | st.integers(1, 400),
)
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_every_chunk_read_back_from_where_it_lies_is_the_chunk(
    files: list[list[str]], final_newline: list[bool], rows: int, max_bytes: int | None
) -> None:
    """Random files of records, blank lines, CRLF endings, lines over the record limit (100 bytes
    here) and last lines without a newline, cut into chunks by rows and by bytes: each chunk read
    by a worker from its spans holds the command's rows (bytes, file, line); the chunks are those
    of the reader without a splitter; only the refused records' chunks have no spans."""
    with tempfile.TemporaryDirectory() as folder:
        paths = []
        for index, lines in enumerate(files):
            path = Path(folder) / f"in{index}.jsonl"
            text = "\n".join(lines) + ("\n" if final_newline[index] and lines else "")
            path.write_bytes(b"a" + text.encode("utf-8"))  # not a format's magic bytes
            paths.append(str(path))
        split = chunks_and_spans(paths, rows, max_bytes, 100)
        plain = list(read_tables(paths, rows, max_bytes, 100))
        assert [table.drop_columns([FILE_COLUMN]) for table, _ in split] == plain
        for table, spans in split:
            assert (spans is None) == (JSON_LINE not in table.column_names)
            if spans is not None:
                assert read_spans(spans, 100).select(ROWS) == table.select(ROWS)


def test_standard_input_compressed_and_parquet_inputs_have_no_spans(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Their chunks go to the workers through the pipes."""
    plain = tmp_path / "plain.jsonl"
    plain.write_bytes(b'{"a":1}\n' * 3)
    packed = tmp_path / "packed.jsonl.gz"
    packed.write_bytes(gzip.compress(plain.read_bytes()))
    parquet = tmp_path / "in.parquet"
    pq.write_table(pa.table({"query_id": ["q"]}), parquet)
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(plain.read_bytes()), encoding="utf-8"))
    split = chunks_and_spans([str(plain), str(packed), str(parquet), "-"], 3, None, 1000)
    assert [spans is not None for _, spans in split] == [True, False, False, False]


@pytest.mark.parametrize(
    "change",
    [b"one\n\ntwo\nthree\n", b"one\ntwo!\nthree\n", b"one\n"],
    ids=["lines-moved", "longer-line", "cut-short"],
)
def test_an_input_changed_in_place_after_it_was_read_is_a_usage_error(tmp_path: Path, change: bytes) -> None:
    path = tmp_path / "in.jsonl"
    path.write_bytes(b"one\ntwo\nthree\n")
    (_, spans), *_ = chunks_and_spans([str(path)], 2, None, 1000)
    with path.open("r+b") as handle:
        handle.truncate(0)
        handle.write(change)
    with pytest.raises(UsageError, match=r"in\.jsonl changed while it was read \(lines 1 to 2\)"):
        read_spans(spans, 1000)


def test_an_input_replaced_after_it_was_read_is_a_usage_error(tmp_path: Path) -> None:
    """Another file renamed over the input, with the same lines: not the file the command read."""
    path = tmp_path / "in.jsonl"
    path.write_bytes(b"one\ntwo\nthree\n")
    (_, spans), *_ = chunks_and_spans([str(path)], 2, None, 1000)
    other = tmp_path / "other.jsonl"
    other.write_bytes(path.read_bytes())
    other.replace(path)
    with pytest.raises(UsageError, match="changed while it was read"):
        read_spans(spans, 1000)


def test_parts_are_named_as_the_outputs_temporary_and_all_removed(tmp_path: Path) -> None:
    """A killed run's parts match the output's temporary files (host tag, the command's pid), which
    the next run writing that output removes once the pid is dead (test_atomic.py)."""
    with AtomicFile(tmp_path / "out.jsonl") as out:
        parts = Parts.beside(out)
        assert parts is not None
        names = [parts.new() for _ in range(3)]
        for name in names:
            write_bytes(name.packages, b"x", name.output)
        pattern = temp_pattern("out.jsonl")
        for name in names:
            match = pattern.fullmatch(os.path.basename(name.packages))
            assert match is not None and match["host"] == host_tag() and int(match["pid"]) == os.getpid()
        assert len(os.listdir(tmp_path)) == 4  # the output's temporary and three parts
        parts.remove(names[0])
        parts.remove_all()
        assert os.listdir(tmp_path) == [os.path.basename(out.write_path)]
    with AtomicFile("-") as streamed:
        assert Parts.beside(streamed) is None  # standard output: chunks go through the pipes


def test_a_part_that_cannot_be_written_names_the_output(tmp_path: Path) -> None:
    with pytest.raises(OutputError, match=r"cannot write out\.jsonl: No such file or directory"):
        write_bytes(str(tmp_path / "gone" / "part"), b"x", "out.jsonl")


# --- runs with workers ----------------------------------------------------------------------------------


@pytest.fixture
def stored(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The packages of each chunk the command read back from part files (so that a parity test
    cannot pass with every chunk sent through the pipes)."""
    taken: list[int] = []
    original = pool._load

    def counted(chunk: pool.StoredChunk, parts: Parts) -> pool.ChunkResult:
        result = original(chunk, parts)
        taken.append(len(result.query_ids))
        return result

    monkeypatch.setattr(pool, "_load", counted)
    return taken


class WaitsForAPart(ContractPolicy):
    """The contract's policy, except that with a pool the command (not a started worker) waits on
    its first chunk until a worker has written a part beside the output ``folder/name``: else, on
    inputs this small, the command takes back every chunk before a worker has started."""

    def __init__(self, output: Path) -> None:
        self.command = os.getpid()
        self.output = output
        self.seen: list[str] = []

    def select(self, fused: pl.DataFrame, inputs: SelectionInputs) -> Selection:
        if os.getpid() == self.command and not self.seen and multiprocessing.active_children():
            pattern = temp_pattern(self.output.name)
            deadline = time.monotonic() + 60
            while len(self.seen) < 2 and time.monotonic() < deadline:  # the output's temporary and a part
                self.seen = [name for name in os.listdir(self.output.parent) if pattern.fullmatch(name)]
                time.sleep(0.01)
            assert len(self.seen) >= 2, "no worker wrote a part"
        return super().select(fused, inputs)


class InterruptedOnceAPartIsWritten(WaitsForAPart):
    """Then interrupted there (as a Ctrl-C that reached Python would be)."""

    def select(self, fused: pl.DataFrame, inputs: SelectionInputs) -> Selection:
        selection = super().select(fused, inputs)
        if os.getpid() == self.command:
            raise KeyboardInterrupt
        return selection


def mixed_inputs(tmp_path: Path, make_record: RecordFactory, write_jsonl: JsonlWriter) -> list[Path]:
    """Two JSON Lines files: generated records with bad ones, blank lines, CRLF endings, a record
    over the record limit, duplicates of earlier ids in later chunks (so in other parts), one
    long record across the middle byte of the first file, and a second file without a final
    newline whose first chunk starts in the first file."""
    generated = [{**record, "query_id": f"g{i}"} for i, record in enumerate(generate_records(14, seed=11))]
    wrong = make_record("bad")
    wrong["lanes"]["passages"][0]["score"] = "high"
    long = make_record("long")
    long["context"] = "長" * 12000
    lines: list[Line] = [*generated[:4], b"", wrong, generated[4], b"{nope", make_record("g1"), b"   ", generated[5]]
    lines += [long, b"o" * 45000, (json.dumps(generated[6]) + "\r").encode(), make_record("g0")]
    lines += [*generated[7:10], b"\xff\xfe", make_record("bad")]
    first = write_jsonl("first.jsonl", lines)
    middle = first.stat().st_size // 2
    start = first.read_bytes().index(b'"long"')
    assert start < middle < start + 36000  # the long record straddles the middle byte
    second = tmp_path / "second.jsonl"
    tail = [*generated[10:], make_record("g8"), make_record("tail")]
    second.write_bytes(b"\n".join(json.dumps(record).encode() for record in tail))  # no final newline
    return [first, second]


def run_with(
    inputs: list[Path], out: Path, workers: int, **options: Any
) -> tuple[bytes, bytes, tuple[object, ...], list[int]]:
    errors = out.with_suffix(".errors.jsonl")
    steps: list[int] = []
    options = {"errors_path": str(errors), "on_error": "skip", "policy": WaitsForAPart(out), **options}
    summary = run_assembly(
        [str(path) for path in inputs], str(out), RunOptions(workers=workers, **options), progress=steps.append
    )
    counted = (summary.queries, summary.items, summary.omitted, summary.search_limit_cuts, summary.rejected)
    return out.read_bytes(), errors.read_bytes(), counted, steps


@pytest.mark.parametrize(
    ("suffix", "options", "workers"),
    [
        ("jsonl", {}, (2, 3)),
        ("parquet", {"output_format": "parquet"}, (2,)),
        ("jsonl", {"assess": True, "chunk_size": 2}, (2,)),
    ],
    ids=["jsonl", "parquet", "assess"],
)
def test_workers_writing_parts_give_the_bytes_errors_and_counts_of_one_process(
    tmp_path: Path,
    make_record: RecordFactory,
    write_jsonl: JsonlWriter,
    stored: list[int],
    suffix: str,
    options: dict[str, Any],
    workers: tuple[int, ...],
) -> None:
    inputs = mixed_inputs(tmp_path, make_record, write_jsonl)
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    settings: dict[str, Any] = {"chunk_size": 3, "chunk_bytes": 50_000, "max_record_bytes": 40_000, **options}
    one = run_with(inputs, out_dir / f"w1.{suffix}", 1, **settings)
    for count in workers:
        stored.clear()
        assert run_with(inputs, out_dir / f"w{count}.{suffix}", count, **settings) == one
        assert stored, "no chunk came back in part files"
    rejected = [(entry["line"], entry["query_id"]) for entry in map(json.loads, one[1].splitlines())]
    assert rejected == [
        (6, "bad"),
        (8, None),
        (9, "g1"),
        (13, None),  # over the record limit
        (15, "g0"),
        (19, None),
        (4, None),  # the second file: over the record limit
        (5, "g8"),
    ]
    assert not multiprocessing.active_children()
    assert sorted(os.listdir(out_dir)) == sorted(
        f"w{count}.{suffix}" if kind == "" else f"w{count}.errors.jsonl"
        for count in (1, *workers)
        for kind in ("", "e")
    )


def test_chunks_sent_whole_come_back_in_part_files(
    tmp_path: Path, make_record: RecordFactory, write_jsonl: JsonlWriter, stored: list[int]
) -> None:
    """A Parquet input has no spans: its chunks go to the workers through the pipes, and what they
    assembled comes back in part files, the bytes of one process."""
    source = tmp_path / "in.parquet"
    convert([str(write_jsonl("in.jsonl", [make_record(f"q{index}") for index in range(12)]))], str(source))
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    one = run_with([source], out_dir / "w1.jsonl", 1, chunk_size=3)
    stored.clear()
    assert run_with([source], out_dir / "w2.jsonl", 2, chunk_size=3) == one
    assert stored, "no chunk came back in part files"
    assert sorted(os.listdir(out_dir)) == ["w1.errors.jsonl", "w1.jsonl", "w2.errors.jsonl", "w2.jsonl"]


_HELD_UP: list[bool] = []  # in a started worker: whether it was held up already


class HeldUpWorker(ContractPolicy):
    """The contract's policy, except that a started worker is held up on its first chunk (2 s)."""

    def __init__(self) -> None:
        self.command = os.getpid()

    def select(self, fused: pl.DataFrame, inputs: SelectionInputs) -> Selection:
        if os.getpid() != self.command and not _HELD_UP:
            _HELD_UP.append(True)
            time.sleep(2)
        return super().select(fused, inputs)


def test_chunks_the_command_assembles_behind_a_held_up_worker_wait_in_part_files(
    tmp_path: Path, make_record: RecordFactory, write_jsonl: JsonlWriter, monkeypatch: pytest.MonkeyPatch
) -> None:
    """While the worker is held up the command goes on, its results in part files rather than in
    memory; a repeated id in such a chunk is found by reading the chunk again from its spans, and
    the output, errors and counts are still those of one process."""
    inputs = mixed_inputs(tmp_path, make_record, write_jsonl)
    monkeypatch.setattr(pool, "IN_FLIGHT_PER_WORKER", 1)
    parked: list[int] = []
    read_again: list[int] = []
    store, read = pool._store, pool.read_spans

    def counted_store(result: pool.ChunkResult, names: Any) -> pool.StoredChunk:
        parked.append(len(result.query_ids))
        return store(result, names)

    def counted_read(spans: Any, max_record_bytes: int) -> pa.Table:
        read_again.append(len(spans))
        return read(spans, max_record_bytes)

    monkeypatch.setattr(pool, "_store", counted_store)
    monkeypatch.setattr(pool, "read_spans", counted_read)
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    settings: dict[str, Any] = {"chunk_size": 2, "chunk_bytes": 50_000, "max_record_bytes": 40_000}
    one = run_with(inputs, out_dir / "w1.jsonl", 1, **settings)
    assert run_with(inputs, out_dir / "w2.jsonl", 2, policy=HeldUpWorker(), **settings) == one
    assert len(parked) >= 3 and read_again, (parked, read_again)
    assert sorted(os.listdir(out_dir)) == ["w1.errors.jsonl", "w1.jsonl", "w2.errors.jsonl", "w2.jsonl"]
    records: list[Line] = [make_record(f"q{i}") for i in range(12)]
    records.insert(9, b"{nope")  # in a chunk the command assembles while the worker is held up
    source = write_jsonl("stop.jsonl", records)
    errors = []
    for workers, policy in ((1, ContractPolicy()), (2, HeldUpWorker())):
        with pytest.raises(InputError) as caught:
            options = RunOptions(chunk_size=2, workers=workers, policy=policy)
            run_assembly([str(source)], str(out_dir / "stop.jsonl"), options)
        errors.append(caught.value.error)
    assert errors[1] == errors[0] and errors[0].line == 10
    assert not multiprocessing.active_children()


def test_stop_is_the_first_bad_record_in_input_order_with_workers_writing_parts(
    tmp_path: Path, make_record: RecordFactory, write_jsonl: JsonlWriter, capsys: pytest.CaptureFixture[str]
) -> None:
    """A duplicate of an id of an earlier part comes before a broken line that a worker finds
    first: the duplicate stops the run, with the message of one process; nothing is left."""
    records: list[Line] = [make_record(f"q{i}") for i in range(24)]
    records.insert(14, make_record("q2"))
    records.insert(20, b"{nope")
    source = write_jsonl("in.jsonl", records)
    out = tmp_path / "out" / "packages.jsonl"
    out.parent.mkdir()
    errors = []
    for workers in (1, 2):
        with pytest.raises(InputError) as caught:
            run_assembly([str(source)], str(out), RunOptions(chunk_size=3, workers=workers, policy=WaitsForAPart(out)))
        errors.append(caught.value.error)
    assert errors[1] == errors[0]
    assert (errors[0].line, errors[0].query_id, errors[0].field) == (15, "q2", "query_id")
    lines = []
    for workers in ("1", "2"):
        status = main(["assemble", str(source), "-o", str(out), "-q", "--chunk-size", "3", "--workers", workers])
        assert status == 2
        lines.append(capsys.readouterr().err)
    assert lines[1] == lines[0]
    assert lines[0].startswith("assembler: error: ") and ":15:" in lines[0]
    assert os.listdir(out.parent) == []
    assert not multiprocessing.active_children()


def test_an_interrupted_run_leaves_no_part_file(tmp_path: Path, write_jsonl: JsonlWriter) -> None:
    records: list[Line] = [{**record, "query_id": f"g{i}"} for i, record in enumerate(generate_records(24, seed=3))]
    source = write_jsonl("in.jsonl", records)
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    policy = InterruptedOnceAPartIsWritten(out_dir / "out.jsonl")
    with pytest.raises(KeyboardInterrupt):
        run_assembly([str(source)], str(out_dir / "out.jsonl"), RunOptions(chunk_size=2, workers=2, policy=policy))
    assert len(policy.seen) >= 2, "no part was written before the interruption"
    assert os.listdir(out_dir) == []
    assert not multiprocessing.active_children()
