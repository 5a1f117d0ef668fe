"""The local engine's process pool (``workers`` > 1): the one-process run's bytes, errors and counts.

Each run with a pool starts worker processes (about a second): the runs here are few and their
inputs span several small chunks.
"""

from __future__ import annotations

import concurrent.futures
import io
import json
import multiprocessing
import os
import sys
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import assembler.run.local as local
import assembler.run.pool as pool
import assembler.run.workers as pool_workers
from assembler.cli import main
from assembler.errors import InputError, UsageError, WorkerError
from assembler.run.local import convert, run_assembly
from assembler.run.options import RunOptions
from assembler.run.outputs import RunSummary
from assembler.selection import Selection, SelectionInputs, get_policy
from assembler.selection.contract import ContractPolicy
from tests.oracle.pools import generate_records

if TYPE_CHECKING:
    from tests.conftest import JsonlWriter, Line, RecordFactory

DATA = Path(__file__).resolve().parent.parent.parent / "data"
CONFORMANCE = DATA / "conformance" / "lanes.jsonl"
EXPECTED = DATA / "conformance" / "expected.jsonl"
SAMPLE = DATA / "sample" / "lanes.jsonl"


def counts(summary: RunSummary) -> tuple[object, ...]:
    return summary.queries, summary.items, summary.omitted, summary.search_limit_cuts, summary.rejected


def both(inputs: list[Path], out_dir: Path, suffix: str = "jsonl", **options: Any) -> list[tuple[bytes, bytes]]:
    """Run with 1 and 2 workers; assert equal counts and per-chunk progress; return (packages, errors) bytes."""
    files, summaries, progress = [], [], []
    for workers in (1, 2):
        output, errors = out_dir / f"w{workers}.{suffix}", out_dir / f"w{workers}.errors.jsonl"
        extra = {"errors_path": str(errors)} if options.get("on_error") == "skip" else {}
        steps: list[int] = []
        summary = run_assembly(
            [str(path) for path in inputs],
            str(output),
            RunOptions(workers=workers, **options, **extra),
            progress=steps.append,
        )
        files.append((output.read_bytes(), errors.read_bytes() if extra else b""))
        summaries.append(counts(summary))
        progress.append(steps)
    assert summaries[1] == summaries[0]
    assert progress[1] == progress[0]  # one call per chunk, the packages it wrote
    assert not multiprocessing.active_children()  # the pool is gone
    return files


@pytest.mark.parametrize(
    ("suffix", "options"),
    [
        ("parquet", {"output_format": "parquet"}),
        ("jsonl", {"assess": True}),
        ("jsonl", {"policy": get_policy("quality"), "overrides": {"max_items": 5}}),
    ],
    ids=["parquet", "assess", "quality"],
)
def test_committed_data_is_byte_identical(tmp_path: Path, suffix: str, options: dict[str, Any]) -> None:
    """JSON Lines (and for Parquet output, Parquet) lane dumps in chunks of 3 (plain JSON Lines
    output: the command-line test)."""
    sample = SAMPLE
    if suffix == "parquet":
        sample = tmp_path / "sample.parquet"
        convert([str(SAMPLE)], str(sample))
    (one, _), (two, _) = both([CONFORMANCE, sample], tmp_path, suffix, chunk_size=3, **options)
    assert two == one
    if suffix == "parquet":
        assert pq.read_table(tmp_path / "w2.parquet").num_rows == 35


def bad_inputs(tmp_path: Path, make_record: RecordFactory, write_jsonl: JsonlWriter) -> list[Path]:
    """Generated records, every kind of bad one, duplicates within a chunk and across chunks and files.

    With chunks of 3: ``a`` repeats in the next chunk (twice in it), ``bad`` is refused before its
    id comes back valid, ``d`` repeats in the third file (Parquet rows, whose errors-file text is
    made from the row).
    """
    generated = [{**record, "query_id": f"g{i}"} for i, record in enumerate(generate_records(7, seed=5))]
    wrong = make_record("bad")
    wrong["lanes"]["passages"][0]["score"] = "high"
    first = write_jsonl(
        "first.jsonl",
        [make_record("a"), generated[0], wrong, make_record("a"), b"{nope", make_record("a"), make_record("bad")],
    )
    second = write_jsonl("second.jsonl", [*generated[1:4], b"\xff\xfe", make_record("d"), generated[1], *generated[4:]])
    rows = [make_record("e"), {**make_record("f"), "context": None}, make_record("d"), make_record("g")]
    third = tmp_path / "third.parquet"
    pq.write_table(pa.Table.from_pylist(rows), third)
    return [first, second, third]


@pytest.mark.parametrize("output_format", ["jsonl", "parquet"])
def test_skip_writes_the_same_packages_and_errors_in_input_order(
    tmp_path: Path, make_record: RecordFactory, write_jsonl: JsonlWriter, output_format: str
) -> None:
    inputs = bad_inputs(tmp_path, make_record, write_jsonl)
    options: dict[str, Any] = {"on_error": "skip", "chunk_size": 3, "output_format": output_format}
    (one, one_errors), (two, two_errors) = both(inputs, tmp_path, output_format, **options)
    assert two == one
    assert two_errors == one_errors
    rejected = [json.loads(line) for line in two_errors.splitlines()]
    assert [(Path(entry["file"]).name, entry["line"], entry["query_id"]) for entry in rejected] == [
        ("first.jsonl", 3, "bad"),
        ("first.jsonl", 4, "a"),
        ("first.jsonl", 5, None),
        ("first.jsonl", 6, "a"),
        ("second.jsonl", 4, None),
        ("second.jsonl", 6, "g1"),
        ("third.parquet", 2, "f"),
        ("third.parquet", 3, "d"),
    ]
    assert json.loads(rejected[-1]["record"])["query_id"] == "d"
    if output_format == "parquet":
        written = pq.read_table(tmp_path / "w2.parquet")["query_id"].to_pylist()
    else:
        written = [json.loads(line)["query_id"] for line in two.decode().splitlines()]
    assert written == ["a", "g0", "bad", "g1", "g2", "g3", "d", "g4", "g5", "g6", "e", "g"]


@pytest.mark.parametrize(
    ("duplicate_at", "invalid_at"), [(5, 10), (10, 5), (5, 6)], ids=["duplicate", "invalid", "same-chunk"]
)
def test_stop_raises_the_first_bad_record_in_input_order_and_leaves_nothing(
    tmp_path: Path, make_record: RecordFactory, write_jsonl: JsonlWriter, duplicate_at: int, invalid_at: int
) -> None:
    """A repeated id (the parent finds it) and a broken line (a worker finds it), in chunks of 3,
    either first or both in one chunk; an unreadable file after them must not hide them."""
    records = [make_record(f"q{i}") for i in range(12)]
    lines: list[Line] = list(records)
    for at, line in sorted([(duplicate_at, records[0]), (invalid_at, b"{nope")], key=lambda pair: pair[0]):
        lines.insert(at - 1, line)
    source = write_jsonl("in.jsonl", lines)
    inputs = [str(source), str(tmp_path / "missing.jsonl")]
    errors = []
    for workers in (1, 2):
        with pytest.raises(InputError) as caught:
            run_assembly(inputs, str(tmp_path / f"w{workers}.jsonl"), RunOptions(chunk_size=3, workers=workers))
        errors.append(caught.value.error)
    assert errors[1] == errors[0]
    first = min(duplicate_at, invalid_at)
    assert (errors[1].line, errors[1].field) == (first, "query_id" if first == duplicate_at else "")
    assert os.listdir(tmp_path) == ["in.jsonl"]
    assert not multiprocessing.active_children()


@pytest.fixture
def parent_chunks(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Make the command take chunks as a worker (one chunk in flight per started worker, so the
    queue is full at once) and count them: ``pool.assemble_table`` runs here only for those (the
    started workers import their own; the command's own step is ``local.assemble_table``)."""
    monkeypatch.setattr(pool, "IN_FLIGHT_PER_WORKER", 1)
    taken: list[int] = []
    original = pool.assemble_table

    def counted(table: pa.Table, **options: Any) -> Any:
        taken.append(table.num_rows)
        return original(table, **options)

    monkeypatch.setattr(pool, "assemble_table", counted)
    return taken


@pytest.mark.parametrize("output_format", ["jsonl", "parquet"])
def test_chunks_the_command_assembles_as_a_worker_are_written_in_their_turn(
    tmp_path: Path, make_record: RecordFactory, write_jsonl: JsonlWriter, output_format: str, parent_chunks: list[int]
) -> None:
    """With two workers the command is one of them: it takes chunks while the started worker's
    queue is full, and those no worker started at the end of the input; packages, errors and
    counts are still those of one process, in input order."""
    inputs = [CONFORMANCE, SAMPLE, *bad_inputs(tmp_path, make_record, write_jsonl)]
    options: dict[str, Any] = {"on_error": "skip", "chunk_size": 2, "output_format": output_format}
    (one, one_errors), (two, two_errors) = both(inputs, tmp_path, output_format, **options)
    assert parent_chunks  # the command did take chunks
    assert two == one
    assert two_errors == one_errors


def test_stop_in_a_chunk_the_command_assembles_is_the_first_bad_record(
    tmp_path: Path, make_record: RecordFactory, write_jsonl: JsonlWriter, parent_chunks: list[int]
) -> None:
    records: list[Line] = [make_record(f"q{i}") for i in range(12)]
    records.insert(9, b"{nope")
    source = write_jsonl("in.jsonl", records)
    errors = []
    for workers in (1, 2):
        with pytest.raises(InputError) as caught:
            run_assembly([str(source)], str(tmp_path / f"w{workers}.jsonl"), RunOptions(chunk_size=2, workers=workers))
        errors.append(caught.value.error)
    assert errors[1] == errors[0]
    assert errors[1].line == 10
    assert os.listdir(tmp_path) == ["in.jsonl"]
    assert not multiprocessing.active_children()


def test_an_unreadable_later_file_is_the_same_usage_error(tmp_path: Path) -> None:
    missing = str(tmp_path / "missing.jsonl")
    with pytest.raises(UsageError, match=f"cannot read {missing}"):
        run_assembly([str(SAMPLE), missing], str(tmp_path / "out.jsonl"), RunOptions(chunk_size=4, workers=2))
    assert os.listdir(tmp_path) == []


def test_one_chunk_runs_in_process(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def no_pool(*_: object, **__: object) -> None:
        raise AssertionError("a pool was started for one chunk")

    monkeypatch.setattr(concurrent.futures, "ProcessPoolExecutor", no_pool)
    out = tmp_path / "out.jsonl"
    assert run_assembly([str(CONFORMANCE)], str(out), RunOptions(workers=2)).queries == 5
    assert out.read_bytes() == EXPECTED.read_bytes()


def test_command_line_workers_and_standard_input(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--workers 2`` and the default (one per usable CPU) on files and on standard input."""
    one, two, piped = tmp_path / "one.jsonl", tmp_path / "two.jsonl", tmp_path / "piped.jsonl"
    args = ["assemble", "--chunk-size", "4", "-q"]
    assert main([*args, str(CONFORMANCE), str(SAMPLE), "-o", str(one), "--workers", "1"]) == 0
    assert main([*args, str(CONFORMANCE), str(SAMPLE), "-o", str(two), "--workers", "2"]) == 0
    assert two.read_bytes() == one.read_bytes()
    assert two.read_bytes().startswith(EXPECTED.read_bytes())
    stdin = CONFORMANCE.read_bytes() + SAMPLE.read_bytes()
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(stdin), encoding="utf-8"))
    assert main([*args, "-", "-o", str(piped)]) == 0  # no --workers: one per usable CPU
    assert piped.read_bytes() == one.read_bytes()
    assert capsys.readouterr().err == ""


def test_usage_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = str(tmp_path / "out.jsonl")
    with pytest.raises(UsageError, match="at least 1"):
        run_assembly([str(CONFORMANCE)], out, RunOptions(workers=0))
    with pytest.raises(UsageError, match="reranker"):
        run_assembly([str(CONFORMANCE)], out, RunOptions(workers=2, reranker=object()))  # type: ignore[arg-type]
    with pytest.raises(SystemExit) as caught:
        main(["assemble", str(CONFORMANCE), "-o", out, "--workers", "0"])
    assert caught.value.code == 2
    assert "--workers: must be a positive integer, got 0" in capsys.readouterr().err
    assert main(["assemble", "--engine", "ray", str(CONFORMANCE), "-o", out, "--workers", "2"]) == 2
    assert "--workers is for --engine local" in capsys.readouterr().err
    rerank = ["--rerank-url", "http://127.0.0.1:9/rerank", "--rerank-model", "m"]
    assert main(["assemble", str(CONFORMANCE), "-o", out, "--workers", "2", *rerank]) == 2
    assert "cannot be combined with a reranker" in capsys.readouterr().err
    assert os.listdir(tmp_path) == []


def test_the_default_runs_a_small_input_in_one_process(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Many chunks, but far fewer bytes than two workers' worth: no pool, the bytes of ``workers=1``."""

    def no_pool(*_: object, **__: object) -> None:
        raise AssertionError("the default started a pool for a small input")

    inputs = [str(CONFORMANCE), str(SAMPLE)]
    size = pool_workers.input_size(inputs)
    assert size is not None and size < 2 * pool_workers.BYTES_PER_WORKER
    one = tmp_path / "one.jsonl"
    run_assembly(inputs, str(one), RunOptions(workers=1, chunk_size=4))
    monkeypatch.setattr(pool, "run_pooled", no_pool)
    monkeypatch.setattr(local, "usable_cpus", lambda: 64)
    default = tmp_path / "default.jsonl"
    summary = run_assembly(inputs, str(default), RunOptions(workers=None, chunk_size=4))
    assert summary.queries == 35
    assert default.read_bytes() == one.read_bytes()


def test_the_default_starts_a_pool_sized_by_the_input(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Above the threshold the default hands the chunks to the pool, with the rule's worker count
    (the pool itself is replaced by a stand-in that assembles in this process)."""
    inputs = [str(CONFORMANCE), str(SAMPLE)]
    size = pool_workers.input_size(inputs)
    assert size is not None
    asked: list[int] = []

    def stand_in(tables: Any, *, workers: int, in_process: Any, **_: object) -> None:
        asked.append(workers)
        for table in tables:
            in_process(table)

    monkeypatch.setattr(pool, "run_pooled", stand_in)
    monkeypatch.setattr(local, "usable_cpus", lambda: 64)
    monkeypatch.setattr(local, "default_workers", lambda s, c: pool_workers.default_workers(s, c, per_worker=size // 3))
    out = tmp_path / "out.jsonl"
    run_assembly(inputs, str(out), RunOptions(workers=None, chunk_size=4))
    assert asked == [3]
    assert out.read_bytes().startswith(EXPECTED.read_bytes())


def test_results_waiting_behind_a_slow_chunk_stop_the_reading(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Memory stays bounded by the chunk: while the oldest chunk is held up, the other workers'
    results wait behind it, and the command stops reading once the chunks it holds fill what the
    pool may hold (a thread stands in for the started worker that holds the first chunk sent for
    1 s; the other workers finish theirs at once)."""
    release = threading.Event()
    pulled: list[int] = []
    sent: list[int] = []

    class ThreadWorkers(ThreadPoolExecutor):
        def __init__(self, started: int, initargs: tuple[pool_workers.Claims], **_: object) -> None:
            super().__init__(started)
            self._processes = dict.fromkeys(range(started))  # started: none to spawn
            monkeypatch.setattr(pool_workers, "_WORKER_CLAIMS", initargs[0])  # what each worker keeps

        def submit(self, fn: Any, /, *args: Any, **kwargs: Any) -> Any:
            sent.append(len(sent))
            if len(sent) == 1:
                return super().submit(lambda: (release.wait(), fn(*args, **kwargs))[1])
            finished: Future[Any] = Future()  # the other workers: done at once
            finished.set_result(fn(*args, **kwargs))
            return finished

    reading = local.read_tables

    def counted(*args: Any, **kwargs: Any) -> Any:
        for table in reading(*args, **kwargs):
            pulled.append(release.is_set())
            yield table

    monkeypatch.setattr(concurrent.futures, "ProcessPoolExecutor", ThreadWorkers)
    monkeypatch.setattr(local, "read_tables", counted)
    threading.Timer(1.0, release.set).start()
    inputs = [str(CONFORMANCE), str(SAMPLE)]
    out, one = tmp_path / "pool.jsonl", tmp_path / "one.jsonl"
    run_assembly(inputs, str(out), RunOptions(workers=3, chunk_size=1))
    monkeypatch.setattr(local, "read_tables", reading)
    run_assembly(inputs, str(one), RunOptions(workers=1, chunk_size=1))
    assert out.read_bytes() == one.read_bytes()
    held = pool.IN_FLIGHT_PER_WORKER * 2 + pool.IN_FLIGHT_PER_WORKER  # the workers' queues, and as many more
    before = pulled.count(False)
    assert 2 < before <= 2 + held + 1, f"{before} chunks read while the first one sent was held"
    assert len(pulled) == 35


def wait_for(marker: Path) -> None:
    deadline = time.monotonic() + 60
    while not marker.exists() and time.monotonic() < deadline:
        time.sleep(0.01)


class DiesInAStartedWorker(ContractPolicy):
    """The contract's policy, except that a started worker dies (as if killed) on its first chunk,
    once the command has begun on the chunks it took back (marker files in ``folder``).

    With two workers, chunks of 4 and the 30-query sample (8 chunks), the command assembles chunk
    0 (waiting there until the worker has started on chunk 1), then chunks 5, 6 and 7 (the
    worker's queue of 4 is full), and at the end of the input takes back the chunks the worker
    has not started, newest first: its fifth chunk is the first taken back."""

    def __init__(self, folder: Path) -> None:
        self.command = os.getpid()
        self.folder = folder
        self.chunks = 0

    def select(self, fused: pl.DataFrame, inputs: SelectionInputs) -> Selection:
        if os.getpid() != self.command:
            (self.folder / "started").touch()
            wait_for(self.folder / "taken-back")
            os._exit(9)
        self.chunks += 1
        if self.chunks == 1:
            wait_for(self.folder / "started")
        elif self.chunks == 5:
            (self.folder / "taken-back").touch()
        return super().select(fused, inputs)


def test_a_worker_killed_after_the_command_took_back_queued_chunks_is_a_worker_error(
    tmp_path: Path, capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A worker killed after the command took back the chunks queued for it is the one-line
    WorkerError like any other (Python 3.11's pool failed in its own thread, with a traceback, on
    chunks cancelled in its queue)."""
    out, markers = tmp_path / "out.jsonl", tmp_path / "markers"
    markers.mkdir()
    options = RunOptions(workers=2, chunk_size=4, policy=DiesInAStartedWorker(markers))
    failed_threads: list[type[BaseException]] = []  # what would print "Exception in thread"
    monkeypatch.setattr(threading, "excepthook", lambda failure: failed_threads.append(failure.exc_type))
    with pytest.raises(WorkerError):
        run_assembly([str(SAMPLE)], str(out), options)
    assert failed_threads == []
    assert (markers / "taken-back").exists()
    assert not out.exists()
    assert "Traceback" not in capfd.readouterr().err
    assert not multiprocessing.active_children()


def test_budget_notes_are_counted_alike_with_a_pool_and_a_repeat_across_chunks_is_not(
    tmp_path: Path, make_record: RecordFactory, write_jsonl: JsonlWriter
) -> None:
    def noted(query_id: str) -> dict[str, Any]:
        record = make_record(query_id)
        record["request"]["budget"] = {"max_item": 1, "max_bytes": 10**9}
        return record

    # q2 again in a later chunk: rejected by the command, so its budget is not counted twice
    records = [noted(f"q{i}") for i in range(7)] + [noted("q2")]
    source = write_jsonl("in.jsonl", records)
    notes = []
    for workers in (1, 2):
        errors = tmp_path / f"w{workers}.errors.jsonl"
        options = RunOptions(workers=workers, chunk_size=2, on_error="skip", errors_path=str(errors))
        summary = run_assembly([str(source)], str(tmp_path / f"w{workers}.jsonl"), options)
        notes.append((summary.rejected, summary.ignored_budget_keys, summary.clamped_budgets))
    assert notes == [(1, {"max_item": 7}, {"max_bytes": 7})] * 2
