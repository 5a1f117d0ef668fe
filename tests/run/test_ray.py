"""The Ray engine on a local 2-CPU Ray instance: byte-identical to the local engine, same errors, retries."""

from __future__ import annotations

import json
import logging
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from assembler.cli import main
from assembler.errors import InputError, UsageError
from assembler.run.local import convert, run_assembly
from assembler.run.options import RunOptions
from tests.oracle.pools import generate_records

os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")  # a local Ray on 127.0.0.1 only
ray = pytest.importorskip("ray")
pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")  # Ray Data's own, on context copies

from assembler.run.ray import list_inputs, run_ray_assembly  # noqa: E402 - after the skip

if TYPE_CHECKING:
    from tests.conftest import JsonlWriter, RecordFactory

DATA = Path(__file__).resolve().parent.parent.parent / "data"
CONFORMANCE = DATA / "conformance" / "lanes.jsonl"
EXPECTED = DATA / "conformance" / "expected.jsonl"
SAMPLE = DATA / "sample" / "lanes.jsonl"


@pytest.fixture(scope="module", autouse=True)
def local_ray() -> Iterator[None]:
    """One local Ray instance with 2 CPUs for the module (runs reuse it instead of starting one)."""
    ray.init(address="local", num_cpus=2, include_dashboard=False, logging_level=logging.WARNING)
    assert ray.util.get_node_ip_address() == "127.0.0.1"
    yield
    ray.shutdown()


def both(inputs: list[Path], out_dir: Path, suffix: str = "jsonl", **options: Any) -> tuple[Path, Path]:
    """Run the local and the Ray engine on ``inputs``; return both output paths."""
    outputs = []
    for engine, run in (("local", run_assembly), ("ray", run_ray_assembly)):
        output = out_dir / f"{engine}.{suffix}"
        extra = {"errors_path": str(out_dir / f"{engine}.errors.jsonl")} if options.get("on_error") == "skip" else {}
        run([str(path) for path in inputs], str(output), RunOptions(**options, **extra))
        outputs.append(output)
    return outputs[0], outputs[1]


def write_pool(path: Path, records: list[dict[str, Any]], prefix: str) -> Path:
    """Generated records with ids made unique by ``prefix``, as JSON Lines or (by suffix) Parquet."""
    lines = path.with_suffix(".jsonl")
    lines.write_text(
        "".join(
            json.dumps({**record, "query_id": f"{prefix}-{record['query_id']}"}, ensure_ascii=False) + "\n"
            for record in records
        ),
        encoding="utf-8",
    )
    if path.suffix == ".parquet":
        convert([str(lines)], str(path))
        lines.unlink()
    return path


def test_committed_data_is_byte_identical(tmp_path: Path) -> None:
    local, remote = both([CONFORMANCE, SAMPLE], tmp_path, chunk_size=8)
    assert remote.read_bytes() == local.read_bytes()
    assert remote.read_bytes().startswith(EXPECTED.read_bytes())


def test_parquet_output_equals_the_local_engines(tmp_path: Path) -> None:
    local, remote = both([SAMPLE, CONFORMANCE], tmp_path, suffix="parquet", output_format="parquet", chunk_size=7)
    assert pq.read_table(remote).equals(pq.read_table(local))


def test_generated_pools_in_many_files_keep_input_order(tmp_path: Path) -> None:
    """Parquet and JSON Lines, a folder, small blocks; the first block is slowed so later ones finish first."""
    folder = tmp_path / "pools"
    (folder / "part").mkdir(parents=True)
    write_pool(folder / "part" / "a.jsonl", generate_records(120, seed=1), "a")
    write_pool(folder / "part" / "b.parquet", generate_records(25, seed=2, profile="worst"), "b")
    (folder / "_SUCCESS").write_text("")
    single = write_pool(tmp_path / "c.jsonl", generate_records(80, seed=3), "c")
    inputs = [single, folder]
    assert [file.name for file in list_inputs([str(path) for path in inputs])] == [
        str(single),
        str(folder / "part" / "a.jsonl"),
        str(folder / "part" / "b.parquet"),
    ]

    def slow_first(block: pa.Table) -> None:
        if block.column("file_index")[0].as_py() == 0 and block.column("source_line")[0].as_py() == 1:
            time.sleep(1.0)

    local = tmp_path / "local.jsonl"
    run_assembly([str(single), str(folder / "part" / "a.jsonl"), str(folder / "part" / "b.parquet")], str(local))
    remote = tmp_path / "ray.jsonl"
    summary = run_ray_assembly(
        [str(path) for path in inputs], str(remote), RunOptions(chunk_size=16), batch_hook=slow_first
    )
    assert summary.queries == 225
    assert remote.read_bytes() == local.read_bytes()


def bad_inputs(tmp_path: Path, make_record: RecordFactory, write_jsonl: JsonlWriter) -> list[Path]:
    """Every kind of bad record, duplicates within a block, across blocks and across files (one Parquet)."""
    wrong = make_record("wrong")
    wrong["lanes"]["passages"][0]["score"] = "high"
    first = write_jsonl("first.jsonl", [make_record("a"), b"{nope", make_record("b"), make_record("a"), wrong])
    second = write_jsonl("second.jsonl", [make_record("c"), b"\xff\xfe", make_record("b"), make_record("d")])
    rows = [make_record("e"), {**make_record("f"), "context": None}, make_record("c"), make_record("g")]
    third = tmp_path / "third.parquet"
    pq.write_table(pa.Table.from_pylist(rows), third)
    return [first, second, third]


@pytest.mark.parametrize("chunk_size", [2, 2048])
def test_skip_sets_aside_the_same_records_with_the_same_reasons(
    tmp_path: Path, make_record: RecordFactory, write_jsonl: JsonlWriter, chunk_size: int
) -> None:
    inputs = bad_inputs(tmp_path, make_record, write_jsonl)
    local, remote = both(inputs, tmp_path, on_error="skip", chunk_size=chunk_size)
    assert remote.read_bytes() == local.read_bytes()
    errors = (tmp_path / "ray.errors.jsonl").read_bytes()
    assert errors == (tmp_path / "local.errors.jsonl").read_bytes()
    rejected = [json.loads(line) for line in errors.splitlines()]
    assert [(Path(entry["file"]).name, entry["line"]) for entry in rejected] == [
        ("first.jsonl", 2),
        ("first.jsonl", 4),
        ("first.jsonl", 5),
        ("second.jsonl", 2),
        ("second.jsonl", 3),
        ("third.parquet", 2),
        ("third.parquet", 3),
    ]
    assert [json.loads(line)["query_id"] for line in remote.read_text().splitlines()] == list("abcdeg")


def test_stop_exits_2_with_the_local_message_and_no_output(
    tmp_path: Path, make_record: RecordFactory, write_jsonl: JsonlWriter, capsys: pytest.CaptureFixture[str]
) -> None:
    inputs = [str(path) for path in bad_inputs(tmp_path, make_record, write_jsonl)]
    before = sorted(os.listdir(tmp_path))
    messages = []
    for engine in ("local", "ray"):
        assert main(["assemble", "--engine", engine, *inputs, "-o", str(tmp_path / "out.jsonl"), "-q"]) == 2
        messages.append(capsys.readouterr().err)
    assert messages[0] == messages[1]
    assert "first.jsonl:2: invalid JSON" in messages[1]
    assert sorted(os.listdir(tmp_path)) == before


def test_cross_file_duplicate_stops_like_the_local_engine(tmp_path: Path, write_jsonl: JsonlWriter) -> None:
    again = write_jsonl("again.jsonl", [CONFORMANCE.read_text().splitlines()[2]])
    errors = []
    for run in (run_assembly, run_ray_assembly):
        with pytest.raises(InputError) as caught:
            run([str(CONFORMANCE), str(again)], str(tmp_path / "out.jsonl"))
        errors.append(caught.value.error)
    assert errors[0] == errors[1]
    assert (errors[1].file, errors[1].line, errors[1].field) == (str(again), 1, "query_id")


def test_a_killed_worker_is_retried_without_losing_or_repeating_rows(tmp_path: Path) -> None:
    marker, calls = tmp_path / "killed", tmp_path / "calls"

    def kill_once(block: pa.Table) -> None:
        """Log each call; kill this worker process the first time a block that is not a file's first arrives."""
        first = f"{block.column('file_index')[0].as_py()}:{block.column('source_line')[0].as_py()}"
        with calls.open("a") as log:
            log.write(f"{os.getpid()} {first}\n")
        if first.endswith(":1"):
            return
        try:
            os.close(os.open(marker, os.O_CREAT | os.O_EXCL))
        except FileExistsError:
            return
        marker.write_text(first)
        os.kill(os.getpid(), signal.SIGKILL)

    local, remote = tmp_path / "local.jsonl", tmp_path / "ray.jsonl"
    run_assembly([str(SAMPLE), str(CONFORMANCE)], str(local))
    summary = run_ray_assembly(
        [str(SAMPLE), str(CONFORMANCE)], str(remote), RunOptions(chunk_size=4), batch_hook=kill_once
    )
    killed = marker.read_text()
    runs = [line.split() for line in calls.read_text().splitlines() if line.endswith(f" {killed}")]
    assert len(runs) == 2 and runs[0][0] != runs[1][0]  # the killed block ran again, in another process
    assert summary.queries == 35
    assert remote.read_bytes() == local.read_bytes()


def test_command_line_engine_ray_writes_the_conformance_bytes(tmp_path: Path) -> None:
    out = tmp_path / "packages.jsonl"
    assert main(["assemble", "--engine", "ray", str(CONFORMANCE), "-o", str(out), "-q"]) == 0
    assert out.read_bytes() == EXPECTED.read_bytes()


def test_usage_errors_match_the_local_engine(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    missing = str(tmp_path / "missing.jsonl")
    for engine in ("local", "ray"):
        assert main(["assemble", "--engine", engine, missing, "-o", str(tmp_path / "out.jsonl")]) == 2
    local, remote = capsys.readouterr().err.splitlines()
    assert local == remote == f"assembler: error: cannot read {missing}: No such file or directory"
    with pytest.raises(UsageError, match="standard input"):
        run_ray_assembly(["-"], str(tmp_path / "out.jsonl"))
    assert main(["assemble", "--ray-address", "auto", str(CONFORMANCE)]) == 2
    assert "--ray-address needs --engine ray" in capsys.readouterr().err
    assert os.listdir(tmp_path) == []


def test_blocks_out_of_input_order_are_refused(tmp_path: Path) -> None:
    """The driver checks the carried (file, line) key: a reordered or repeated block is an error."""
    from assembler.run.batch import file_tables
    from assembler.run.outputs import PackageSink, RunSummary, run_outputs
    from assembler.run.ray import FILE_INDEX, _assemble_block, _drain
    from assembler.selection import CONTRACT

    with CONFORMANCE.open("rb") as stream:
        tables = list(file_tables(str(CONFORMANCE), stream, parquet=False, rows=2))
    blocks = [
        _assemble_block(
            table.append_column(FILE_INDEX, pa.array([0] * table.num_rows)), overrides=None, policy=CONTRACT, hook=None
        )
        for table in tables
    ]

    class Replayed:
        def __init__(self, order: list[int]) -> None:
            self.order = order

        def iter_batches(self, **_: object) -> Iterator[pa.Table]:
            return iter([blocks[i] for i in self.order])

    files = list_inputs([str(CONFORMANCE)])

    def replay(order: list[int], out: Path) -> int:
        with run_outputs(str(out), False, "stop", None) as (sink_file, rejects):
            sink = PackageSink(sink_file, False)
            try:
                return _drain(Replayed(order), files, sink, rejects, RunSummary(), None)  # type: ignore[arg-type]
            finally:
                sink.close()

    assert replay([0, 1, 2], tmp_path / "out.jsonl") == 5  # the count run_ray_assembly checks against the plan
    for order in ([1, 0, 2], [0, 0, 1, 2]):
        with pytest.raises(RuntimeError, match="out of input order"):
            replay(order, tmp_path / "bad.jsonl")
    assert sorted(os.listdir(tmp_path)) == ["out.jsonl"]
    assert (tmp_path / "out.jsonl").read_bytes() == EXPECTED.read_bytes()


def test_budget_notes_are_counted_as_the_local_engine_counts_them(tmp_path: Path, write_jsonl: JsonlWriter) -> None:
    records = [json.loads(line) for line in CONFORMANCE.read_text(encoding="utf-8").splitlines()]
    for record in records[:3]:
        record["request"]["budget"] = {"max_item": 1, "max_bytes": 10**9}
    source = write_jsonl("in.jsonl", records)
    local = run_assembly([str(source)], str(tmp_path / "local.jsonl"), RunOptions(chunk_size=2))
    remote = run_ray_assembly([str(source)], str(tmp_path / "ray.jsonl"), RunOptions(chunk_size=2))
    assert (remote.ignored_budget_keys, remote.clamped_budgets) == ({"max_item": 3}, {"max_bytes": 3})
    assert remote.warnings() == local.warnings()
    assert (tmp_path / "ray.jsonl").read_bytes() == (tmp_path / "local.jsonl").read_bytes()


def test_an_output_named_parquet_is_written_as_parquet(tmp_path: Path) -> None:
    run_ray_assembly([str(CONFORMANCE)], str(tmp_path / "out.PARQUET"))
    assert pq.read_table(tmp_path / "out.PARQUET").num_rows == 5
