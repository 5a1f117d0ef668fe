"""Failure behaviour of every command (README "Failure behaviour"): an output that is an input or
another output is refused, environment failures give one line and the documented exit status,
Ctrl-C and SIGTERM end the workers and leave no temporary file."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Literal

import pyarrow.parquet as pq
import pytest

from assembler.cli import main
from assembler.errors import UsageError
from assembler.run.local import convert, run_assembly
from assembler.run.options import RunOptions
from assembler.run.outputs import RunSummary

DATA = Path(__file__).resolve().parent.parent.parent / "data"
SAMPLE = DATA / "sample" / "lanes.jsonl"
EVAL_DATA = Path(__file__).resolve().parent.parent / "evaluate" / "data"
ASSESS_SAMPLE = DATA / "assess" / "sample.jsonl"
ROOT = Path(__file__).resolve().parent.parent.parent


def run_cli(capsys: pytest.CaptureFixture[str], *args: str | Path) -> tuple[int, str, str]:
    status = main([str(arg) for arg in args])
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def one_error_line(err: str) -> str:
    assert "Traceback" not in err
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("assembler: error: "), err
    return lines[0]


def copy(source: Path, target: Path) -> Path:
    target.write_bytes(source.read_bytes())
    return target


# --- the same file as an input or as another output: exit 2, nothing touched ------------------------


@pytest.mark.parametrize("workers", ["1", "2"])
def test_assemble_refuses_to_write_over_its_input(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, workers: str
) -> None:
    lanes = copy(SAMPLE, tmp_path / "in.jsonl")
    status, _, err = run_cli(capsys, "assemble", lanes, "-o", lanes, "--workers", workers, "-q")
    assert status == 2
    expected = f"assembler: error: -o {lanes} is the same file as input {lanes}: refusing to overwrite it"
    assert one_error_line(err) == expected
    assert lanes.read_bytes() == SAMPLE.read_bytes()


@pytest.mark.parametrize(
    ("spelling", "flags"),
    [
        ("dot-slash", lambda: ["-o", "./in.jsonl"]),
        ("symlink", lambda: ["-o", "link.jsonl"]),
        ("hard link", lambda: ["-o", "hard.jsonl"]),
        ("errors file", lambda: ["-o", "out.jsonl", "--on-error", "skip", "--errors", "in.jsonl"]),
    ],
)
def test_assemble_refuses_an_output_that_is_its_input_under_another_name(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, spelling: str, flags: object
) -> None:
    monkeypatch.chdir(tmp_path)
    lanes = copy(SAMPLE, tmp_path / "in.jsonl")
    Path("link.jsonl").symlink_to(lanes)
    os.link(lanes, "hard.jsonl")
    status, _, err = run_cli(capsys, "assemble", "in.jsonl", *flags(), "-q")  # type: ignore[operator]
    assert status == 2, spelling
    assert "is the same file as input in.jsonl" in one_error_line(err)
    assert lanes.read_bytes() == SAMPLE.read_bytes()
    assert not Path("out.jsonl").exists()


def test_assemble_refuses_an_errors_file_on_the_output(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    out.write_text("keep\n")
    status, _, err = run_cli(capsys, "assemble", SAMPLE, "-o", out, "--on-error", "skip", "--errors", out, "-q")
    assert status == 2
    expected = f"assembler: error: --errors {out} is the same file as -o {out}: refusing to overwrite it"
    assert one_error_line(err) == expected
    assert out.read_text() == "keep\n"


def test_assemble_refuses_metrics_on_the_output(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    out.write_text("keep\n")
    flags = ["--rerank-url", "http://127.0.0.1:9/rerank", "--rerank-model", "m", "--metrics-out", str(out)]
    status, _, err = run_cli(capsys, "assemble", SAMPLE, "-o", out, *flags, "-q")
    assert status == 2
    assert "--metrics-out" in one_error_line(err) and f"-o {out}" in err
    assert out.read_text() == "keep\n"


def test_convert_refuses_to_write_over_its_input(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    lanes = copy(SAMPLE, tmp_path / "in.jsonl")
    status, _, err = run_cli(capsys, "convert", lanes, "-o", lanes)
    assert status == 2
    assert "-o" in one_error_line(err) and "input" in err
    assert lanes.read_bytes() == SAMPLE.read_bytes()


def test_assess_refuses_to_write_over_its_input(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    contexts = copy(ASSESS_SAMPLE, tmp_path / "runs.jsonl")
    status, _, err = run_cli(capsys, "assess", contexts, "-o", tmp_path / "out.jsonl", "--on-error", "skip",
                             "--errors", contexts)  # fmt: skip
    assert status == 2
    assert "--errors" in one_error_line(err) and "input" in err
    assert contexts.read_bytes() == ASSESS_SAMPLE.read_bytes()


def test_evaluate_refuses_an_artifact_over_an_input(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    evalfile = copy(EVAL_DATA / "eval.jsonl", tmp_path / "eval.jsonl")
    status, _, err = run_cli(
        capsys, "evaluate", "--eval", evalfile, "--lanes", EVAL_DATA / "lanes.jsonl", "--out", evalfile
    )
    assert status == 2
    assert one_error_line(err).startswith(f"assembler: error: --out {evalfile} is the same file as --eval {evalfile}")
    assert evalfile.read_bytes() == (EVAL_DATA / "eval.jsonl").read_bytes()


def test_evaluate_compare_refuses_its_changes_over_an_artifact(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    base = tmp_path / "base.json"
    base.write_text("{}\n")
    status, _, err = run_cli(capsys, "evaluate", "compare", base, base, "--out", base)
    assert status == 2
    assert one_error_line(err).startswith(f"assembler: error: --out {base} is the same file as BASE {base}")
    assert base.read_text() == "{}\n"


def test_evaluate_sweep_refuses_a_table_over_an_input(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    (tmp_path / "sweep").mkdir()
    evalfile = copy(EVAL_DATA / "eval.jsonl", tmp_path / "sweep" / "sweep.json")
    argv: list[str | Path] = ["evaluate", "sweep", "--eval", evalfile, "--lanes", EVAL_DATA / "lanes.jsonl"]
    argv += ["--budgets", "items=2"]
    status, _, err = run_cli(capsys, *argv, "--out-dir", tmp_path / "sweep", "--no-plot")
    assert status == 2
    assert one_error_line(err).startswith(f"assembler: error: --out-dir {evalfile} is the same file as --eval")
    assert evalfile.read_bytes() == (EVAL_DATA / "eval.jsonl").read_bytes()


def test_lanes_build_refuses_to_write_over_its_corpus(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text('{"source":"s","paragraph":1,"text":"t"}\n')
    evalfile = copy(EVAL_DATA / "eval.jsonl", tmp_path / "eval.jsonl")
    status, _, err = run_cli(capsys, "lanes", "build", "--corpus", corpus, "--eval", evalfile, "-o", corpus, "-q")
    assert status == 2
    assert one_error_line(err).startswith(f"assembler: error: -o {corpus} is the same file as --corpus {corpus}")
    assert corpus.read_text() == '{"source":"s","paragraph":1,"text":"t"}\n'


def test_the_python_api_names_its_arguments(tmp_path: Path) -> None:
    lanes = copy(SAMPLE, tmp_path / "in.jsonl")
    with pytest.raises(UsageError, match=r"^output .* is the same file as inputs "):
        run_assembly(lanes, lanes)
    options = RunOptions(on_error="skip", errors_path=str(lanes))
    with pytest.raises(UsageError, match=r"^errors_path .* is the same file as inputs "):
        run_assembly(lanes, tmp_path / "out.jsonl", options)
    with pytest.raises(UsageError, match=r"^output .* is the same file as inputs "):
        convert([lanes], lanes)
    assert lanes.read_bytes() == SAMPLE.read_bytes()


def test_standard_output_is_never_the_same_file(capsys: pytest.CaptureFixture[str]) -> None:
    status, out, _ = run_cli(capsys, "assemble", SAMPLE, "-o", "-", "-q", "--workers", "1")
    assert status == 0 and out.count("\n") == 30


# --- environment failures: one line, documented status -------------------------------------------------


def test_a_full_disk_is_exit_1_naming_the_output(capsys: pytest.CaptureFixture[str]) -> None:
    if not Path("/dev/full").exists():
        pytest.skip("no /dev/full here")
    status, _, err = run_cli(capsys, "assemble", SAMPLE, "-o", "/dev/full", "-q", "--workers", "1")
    assert status == 1
    assert one_error_line(err) == "assembler: error: cannot write /dev/full: No space left on device"


def test_a_full_disk_on_standard_output_is_exit_1() -> None:
    if not Path("/dev/full").exists():
        pytest.skip("no /dev/full here")
    with open("/dev/full", "wb") as full:
        done = subprocess.run(
            [sys.executable, "-m", "assembler", "assemble", str(SAMPLE), "-q", "--workers", "1"],
            stdout=full,
            stderr=subprocess.PIPE,
            text=True,
            cwd=ROOT,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
            timeout=300,
            check=False,
        )
    assert done.returncode == 1
    assert one_error_line(done.stderr) == "assembler: error: cannot write standard output: No space left on device"


def test_a_folder_that_refuses_writes_is_exit_1(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    if os.geteuid() == 0:
        folder = Path("/sys")  # root may write anywhere else; sysfs refuses new files with EACCES
        if not folder.is_dir():
            pytest.skip("no /sys here")
    else:
        folder = tmp_path / "ro"
        folder.mkdir()
        folder.chmod(0o555)
    out = folder / "out.jsonl"
    status, _, err = run_cli(capsys, "assemble", SAMPLE, "-o", out, "-q", "--workers", "1")
    if status == 0:
        pytest.skip(f"{folder} accepted a new file here")
    assert status == 1
    assert one_error_line(err) == f"assembler: error: cannot write {out}: Permission denied"


def test_an_output_in_a_missing_folder_is_exit_2(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    status, _, err = run_cli(capsys, "assemble", SAMPLE, "-o", tmp_path / "nope" / "out.jsonl", "-q")
    assert status == 2
    assert "does not exist" in one_error_line(err)


def test_running_out_of_memory_is_exit_1_in_one_line(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    def exhausted(*args: object, **kwargs: object) -> None:
        raise MemoryError

    monkeypatch.setattr("assembler.cli.assemble.run_assembly", exhausted)
    status, _, err = run_cli(capsys, "assemble", SAMPLE, "-o", tmp_path / "out.jsonl", "-q")
    assert status == 1
    assert one_error_line(err) == "assembler: error: out of memory"


def corrupt_parquet(tmp_path: Path) -> Path:
    """A valid lane-dump Parquet file whose second row group's first page header is overwritten."""
    good = tmp_path / "good.parquet"
    assert main(["convert", str(SAMPLE), "-o", str(good)]) == 0
    table = pq.read_table(good)
    pq.write_table(table, good, row_group_size=10, compression="none")
    column = pq.ParquetFile(good).metadata.row_group(1).column(0)
    data = bytearray(good.read_bytes())
    start = column.data_page_offset
    data[start : start + 16] = b"\xff" * 16
    bad = tmp_path / "bad.parquet"
    bad.write_bytes(bytes(data))
    return bad


@pytest.mark.parametrize("command", ["assemble", "convert"])
def test_a_corrupt_parquet_page_is_bad_input_naming_the_file(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, command: str
) -> None:
    bad = corrupt_parquet(tmp_path)
    capsys.readouterr()
    flags = ["--workers", "1"] if command == "assemble" else []
    status, _, err = run_cli(capsys, command, bad, "-o", tmp_path / "out.jsonl", *flags)
    assert status == 2
    assert one_error_line(err).startswith(f"assembler: error: cannot read {bad} as Parquet")
    assert not (tmp_path / "out.jsonl").exists()


@pytest.mark.parametrize("command", [["assemble", "-q", "--workers", "1"], ["convert"]])
def test_a_non_utf8_file_name_is_shown_escaped(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, command: list[str]
) -> None:
    name = os.fsdecode(bytes(tmp_path) + b"/in\xff.jsonl")
    Path(name).write_text('{"query_id":"q1"}\n')
    status, _, err = run_cli(capsys, command[0], name, "-o", tmp_path / "out.jsonl", *command[1:])
    assert status == 2
    assert one_error_line(err).startswith(f"assembler: error: {tmp_path}/in\\xff.jsonl:1:")


def test_a_non_utf8_file_name_goes_into_the_errors_file_as_utf8(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    name = os.fsdecode(bytes(tmp_path) + b"/in\xff.jsonl")
    Path(name).write_text('{"query_id":"q1"}\n')
    errors = tmp_path / "errors.jsonl"
    for command in (["assemble", "-q", "--workers", "1"], ["convert"]):
        argv: list[str | Path] = [command[0], name, "-o", tmp_path / "out.jsonl", *command[1:], "--on-error", "skip"]
        argv += ["--errors", errors]
        status, _, _ = run_cli(capsys, *argv)
        assert status == 0
        entry = json.loads(errors.read_bytes().decode("utf-8"))
        assert entry["file"] == f"{tmp_path}/in\\xff.jsonl"


# --- signals: Ctrl-C and SIGTERM, with the process pool -------------------------------------------------


@pytest.fixture(scope="module")
def big_input(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """3,000 queries (the sample, 100 times with new ids): long enough to be interrupted."""
    path = tmp_path_factory.mktemp("big") / "in.jsonl"
    lines = SAMPLE.read_text().splitlines()
    with path.open("w") as handle:
        for copy_number in range(100):
            for line in lines:
                record = json.loads(line)
                record["query_id"] = f"{record['query_id']}-{copy_number}"
                handle.write(json.dumps(record) + "\n")
    return path


def children(pid: int) -> set[int]:
    """The live child processes of ``pid`` (from /proc)."""
    found = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid and fields[0] != "Z":
            found.add(int(entry.name))
    return found


def running_worker(pid: int) -> bool:
    """A worker past its start-up: its parent-watch thread runs (Ctrl-C is left to the parent)."""
    try:
        return len(list((Path("/proc") / str(pid) / "task").iterdir())) >= 2
    except OSError:
        return False


def alive(pid: int) -> bool:
    try:
        state = (Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def interrupt_run(
    big_input: Path, tmp_path: Path, send: signal.Signals, *, to: Literal["group", "command", "worker"]
) -> tuple[int, str, set[int]]:
    """Start ``assemble --workers 2`` (the command and one started worker), wait for the worker to
    run, send ``send`` (to the whole process group, as a terminal's Ctrl-C does, to the command
    only, or to the worker); return status, stderr, workers."""
    if not Path("/proc/self/stat").exists():
        pytest.skip("needs /proc")
    out = tmp_path / "out.jsonl"
    flags = ["--workers", "2", "--chunk-size", "20", "--on-error", "skip", "-q"]
    process = subprocess.Popen(
        [sys.executable, "-m", "assembler", "assemble", str(big_input), "-o", str(out), *flags],
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        start_new_session=True,
    )
    try:
        workers: set[int] = set()
        running: list[int] = []
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and process.poll() is None:
            workers = children(process.pid)
            running = [pid for pid in workers if running_worker(pid)]  # not the resource tracker
            if running:
                break
            time.sleep(0.05)
        assert process.poll() is None, "the run ended before it could be interrupted"
        assert running, "no worker started"
        if to == "group":
            os.killpg(process.pid, send)
        elif to == "command":
            process.send_signal(send)
        else:
            os.kill(running[0], send)
        _, err = process.communicate(timeout=120)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
    return process.returncode, err, workers


def assert_cleaned_up(tmp_path: Path, workers: set[int]) -> None:
    assert list(tmp_path.iterdir()) == [], "a temporary or partial file was left"
    deadline = time.monotonic() + 30
    while any(alive(pid) for pid in workers) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(alive(pid) for pid in workers), "a worker outlived the command"


def test_ctrl_c_exits_130_with_one_line_and_leaves_nothing(big_input: Path, tmp_path: Path) -> None:
    status, err, workers = interrupt_run(big_input, tmp_path, signal.SIGINT, to="group")
    assert err == "assembler: interrupted\n"
    assert status == 130
    assert_cleaned_up(tmp_path, workers)


def test_sigterm_exits_143_with_one_line_and_leaves_nothing(big_input: Path, tmp_path: Path) -> None:
    status, err, workers = interrupt_run(big_input, tmp_path, signal.SIGTERM, to="command")
    assert err == "assembler: terminated\n"
    assert status == 143
    assert_cleaned_up(tmp_path, workers)


def test_a_killed_worker_exits_1_with_one_line_and_leaves_nothing(big_input: Path, tmp_path: Path) -> None:
    """The kernel's out-of-memory killer, say: the pool breaks, and the command says so in one line."""
    status, err, workers = interrupt_run(big_input, tmp_path, signal.SIGKILL, to="worker")
    assert err == "assembler: error: a worker process ended abruptly (killed, or out of memory)\n"
    assert status == 1
    assert_cleaned_up(tmp_path, workers)


# A Ctrl-C as Polars starts to load, in the first half second of a run: the command's own interruption.
INTERRUPT_AT_POLARS = """
import importlib.abc, os, runpy, signal, sys

class CtrlCAtPolars(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == "polars":
            os.kill(os.getpid(), signal.SIGINT)
        return None

sys.meta_path.insert(0, CtrlCAtPolars())
sys.argv = ["assembler", "assemble", {input!r}, "-o", {output!r}, "-q"]
if {entry!r} == "module":
    runpy.run_module("assembler", run_name="__main__")
else:
    from assembler.cli import main
    sys.exit(main())
"""


def run_script(script: str) -> subprocess.CompletedProcess[str]:
    """A Python script in a process of its own, with this checkout first on its path."""
    return subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        timeout=120,
    )


@pytest.mark.parametrize("entry", ["module", "script"])
def test_ctrl_c_while_the_package_loads_is_one_line_not_a_traceback(entry: str, tmp_path: Path) -> None:
    """``python -m assembler`` and the ``assembler`` script alike (the script calls ``main`` of
    ``assembler.cli``): importing the package loads neither Polars nor Arrow, so the interruption
    lands where the command handles it."""
    script = INTERRUPT_AT_POLARS.format(entry=entry, input=str(SAMPLE), output=str(tmp_path / "out.jsonl"))
    done = run_script(script)
    assert done.stderr == "assembler: interrupted\n"
    assert done.returncode == 130
    assert done.stdout == ""
    assert list(tmp_path.iterdir()) == []


# A SIGTERM that lands inside a library's import, which makes an ImportError of it (as NumPy's does
# when the signal's exception surfaces in a callback of its native module).
TERMINATED_INSIDE_NUMPY = """
import importlib.abc, os, signal, sys, time

class TerminatedInsideNumpy(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == "numpy":
            sys.meta_path.remove(self)
            try:
                os.kill(os.getpid(), signal.SIGTERM)
                time.sleep(0.2)
            except BaseException:
                raise ImportError("numpy: a signal landed in the wrong place")
        return None

sys.meta_path.insert(0, TerminatedInsideNumpy())
sys.argv = ["assembler", "assemble", {input!r}, "-o", {output!r}, "-q"]
from assembler.cli import main
sys.exit(main())
"""


def test_a_sigterm_while_numpy_loads_is_the_termination_not_a_broken_installation(tmp_path: Path) -> None:
    """Signals are held while the libraries load: raised inside an import, a library may report
    the interruption as its own failure to load ("cannot load NumPy", exit 1)."""
    script = TERMINATED_INSIDE_NUMPY.format(input=str(SAMPLE), output=str(tmp_path / "out.jsonl"))
    done = run_script(script)
    assert (done.returncode, done.stderr) == (143, "assembler: terminated\n")
    assert list(tmp_path.iterdir()) == []


# --- standard streams that are an input or an output file (as `cat` refuses) ------------------------


def run_command(
    *args: str | Path, stdin: object = subprocess.DEVNULL, stdout: object = subprocess.DEVNULL
) -> tuple[int, str]:
    """The ``assembler`` command in a process of its own, with the standard streams given; its
    status and standard error."""
    done = subprocess.run(
        [sys.executable, "-m", "assembler", *map(str, args)],
        stdin=stdin,  # type: ignore[arg-type]
        stdout=stdout,  # type: ignore[arg-type]
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        timeout=300,
        check=False,
    )
    return done.returncode, done.stderr


def test_stdin_that_is_the_output_file_is_refused(tmp_path: Path) -> None:
    """``assembler assemble - -o in.jsonl < in.jsonl`` would replace the lanes by packages."""
    lanes = copy(SAMPLE, tmp_path / "in.jsonl")
    with lanes.open("rb") as stdin:
        status, err = run_command("assemble", "-", "-o", lanes, "-q", stdin=stdin)
    assert status == 2
    expected = f"assembler: error: -o {lanes} is the same file as input - (standard input): refusing to overwrite it"
    assert one_error_line(err) == expected
    assert lanes.read_bytes() == SAMPLE.read_bytes()


@pytest.mark.parametrize("mode", ["r+b", "ab"], ids=["1<>in.jsonl", ">>in.jsonl"])
def test_stdout_that_is_the_input_file_is_refused(tmp_path: Path, mode: str) -> None:
    lanes = copy(SAMPLE, tmp_path / "in.jsonl")
    with lanes.open(mode) as stdout:
        status, err = run_command("assemble", lanes, "-o", "-", "-q", stdout=stdout)
    assert status == 2
    expected = f"assembler: error: -o - (standard output) is the same file as input {lanes}: refusing to overwrite it"
    assert one_error_line(err) == expected
    assert lanes.read_bytes() == SAMPLE.read_bytes()


def _stdio_cases(tmp_path: Path) -> dict[str, tuple[list[str | Path], Path, str]]:
    """Per command: its arguments, the input file standard output is opened on, and the label."""
    lanes = copy(SAMPLE, tmp_path / "in.jsonl")
    contexts = copy(ASSESS_SAMPLE, tmp_path / "runs.jsonl")
    evalfile = copy(EVAL_DATA / "eval.jsonl", tmp_path / "eval.jsonl")
    base = tmp_path / "base.json"
    base.write_text("{}\n")
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text('{"source":"s","paragraph":1,"text":"t"}\n')
    lanes_flag = ["--lanes", EVAL_DATA / "lanes.jsonl"]
    return {
        "convert": (["convert", lanes, "-o", "-"], lanes, "input"),
        "assess": (["assess", contexts, "-o", "-"], contexts, "input"),
        "evaluate": (["evaluate", "--eval", evalfile, *lanes_flag, "--out", "-"], evalfile, "--eval"),
        "evaluate compare": (["evaluate", "compare", base, base, "--out", "-"], base, "BASE"),
        "lanes build": (
            ["lanes", "build", "--corpus", corpus, "--eval", evalfile, "-o", "-", "-q"],
            corpus,
            "--corpus",
        ),
    }


@pytest.mark.parametrize("command", ["convert", "assess", "evaluate", "evaluate compare", "lanes build"])
def test_every_command_refuses_stdout_appending_to_an_input(tmp_path: Path, command: str) -> None:
    argv, victim, label = _stdio_cases(tmp_path)[command]
    before = victim.read_bytes()
    with victim.open("ab") as stdout:
        status, err = run_command(*argv, stdout=stdout)
    assert status == 2, err
    assert f"is the same file as {label} {victim}: refusing to overwrite it" in one_error_line(err)
    assert victim.read_bytes() == before


def test_convert_refuses_stdin_that_is_its_output(tmp_path: Path) -> None:
    lanes = copy(SAMPLE, tmp_path / "in.jsonl")
    with lanes.open("rb") as stdin:
        status, err = run_command("convert", "-", "-o", lanes, stdin=stdin)
    assert status == 2
    assert "is the same file as input - (standard input)" in one_error_line(err)
    assert lanes.read_bytes() == SAMPLE.read_bytes()


def test_standard_streams_on_pipes_dev_null_or_other_files_are_fine(tmp_path: Path) -> None:
    lanes = copy(SAMPLE, tmp_path / "in.jsonl")
    with lanes.open("rb") as stdin, open(os.devnull, "wb") as devnull:
        assert run_command("assemble", "-", "-o", "-", "-q", stdin=stdin, stdout=devnull)[0] == 0
    with lanes.open("rb") as stdin:
        assert run_command("assemble", "-", "-o", "-", "-q", stdin=stdin, stdout=subprocess.PIPE)[0] == 0
    out = tmp_path / "out.jsonl"
    with lanes.open("rb") as stdin, out.open("wb") as stdout:
        assert run_command("assemble", "-", "-o", "-", "-q", stdin=stdin, stdout=stdout)[0] == 0
    assert out.read_bytes().count(b"\n") == 30


# --- every output is checked before any work; outputs land together ------------------------------------

RERANK = ["--rerank-url", "http://127.0.0.1:9/rerank", "--rerank-model", "m"]


def test_metrics_in_a_missing_folder_is_refused_before_the_run(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    out = tmp_path / "out.jsonl"
    out.write_text("keep\n")
    metrics = tmp_path / "nope" / "metrics.prom"
    status, _, err = run_cli(capsys, "assemble", SAMPLE, "-o", out, *RERANK, "--metrics-out", metrics, "-q")
    assert status == 2
    assert one_error_line(err) == f"assembler: error: cannot write {metrics}: folder {metrics.parent} does not exist"
    assert out.read_text() == "keep\n"


def test_an_errors_file_that_cannot_land_leaves_the_output_as_it_was(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    out, errors = tmp_path / "out.jsonl", tmp_path / "errors.jsonl"
    out.write_text("keep\n")
    real_replace = os.replace

    def replace(source: str, destination: str) -> None:
        if Path(destination) == errors:
            raise OSError(28, "No space left on device")
        real_replace(source, destination)

    monkeypatch.setattr(os, "replace", replace)
    argv = ["assemble", SAMPLE, "-o", out, "--on-error", "skip", "--errors", errors, "-q", "--workers", "1"]
    status, _, err = run_cli(capsys, *argv)
    assert status == 1
    assert one_error_line(err) == f"assembler: error: cannot write {errors}: No space left on device"
    assert out.read_text() == "keep\n"
    assert sorted(path.name for path in tmp_path.iterdir()) == ["out.jsonl"]


def test_metrics_that_cannot_land_leave_the_packages_as_they_were(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    out, metrics = tmp_path / "out.jsonl", tmp_path / "metrics.prom"
    out.write_text("keep\n")
    real_replace = os.replace

    def replace(source: str, destination: str) -> None:
        if Path(destination) == metrics:
            raise OSError(13, "Permission denied")
        real_replace(source, destination)

    monkeypatch.setattr(os, "replace", replace)
    status, _, err = run_cli(capsys, "assemble", SAMPLE, "-o", out, *RERANK, "--metrics-out", metrics, "-q")
    assert status == 1
    assert one_error_line(err) == f"assembler: error: cannot write {metrics}: Permission denied"
    assert out.read_text() == "keep\n"
    assert sorted(path.name for path in tmp_path.iterdir()) == ["out.jsonl"]


def run_as_nobody(argv: list[str | Path]) -> tuple[int, str]:
    """The command, in-process, as a user without root's override of file modes: as root, in a
    forked child that became ``nobody`` (os.access, and the kernel, then refuse as for anyone);
    as another user, as that user. Its status and standard error."""
    if os.geteuid() != 0:
        import io

        err = io.StringIO()
        real, sys.stderr = sys.stderr, err
        try:
            return main([str(arg) for arg in argv]), err.getvalue()
        finally:
            sys.stderr = real
    import pwd
    import select

    try:
        nobody = pwd.getpwnam("nobody")
    except KeyError:
        pytest.skip("no user nobody here")
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns into pytest
        status = 99
        try:
            os.close(read_end)
            sys.stderr = open(write_end, "w", encoding="utf-8")  # noqa: SIM115
            os.setgroups([])
            os.setgid(nobody.pw_gid)
            os.setuid(nobody.pw_uid)
            status = main([str(arg) for arg in argv])
        except BaseException:  # shown in the test's failure
            import traceback

            traceback.print_exc()
        finally:
            with contextlib.suppress(Exception):
                sys.stderr.flush()
            os._exit(status)
    os.close(write_end)
    chunks: list[bytes] = []
    deadline = time.monotonic() + 120
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([read_end], [], [], 1)
            if ready:
                chunk = os.read(read_end, 65536)
                if not chunk:
                    break
                chunks.append(chunk)
        else:
            os.kill(pid, signal.SIGKILL)
    finally:
        os.close(read_end)
    _, wait_status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(wait_status), b"".join(chunks).decode("utf-8")


@pytest.fixture
def nobodys_folder() -> Iterator[Path]:
    """A folder ``nobody`` may write (outside pytest's own, which only root may enter)."""
    folder = Path(tempfile.mkdtemp(prefix="assembler-nobody-"))
    try:
        if os.geteuid() == 0:
            import pwd

            try:
                nobody = pwd.getpwnam("nobody")
            except KeyError:
                pytest.skip("no user nobody here")
            os.chown(folder, nobody.pw_uid, nobody.pw_gid)
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def test_a_write_protected_output_is_refused_and_kept(nobodys_folder: Path) -> None:
    lanes = copy(SAMPLE, nobodys_folder / "in.jsonl")
    out = nobodys_folder / "out.jsonl"
    out.write_text("keep\n")
    out.chmod(0o444)
    if os.geteuid() == 0:
        os.chown(out, *(lambda entry: (entry.pw_uid, entry.pw_gid))(__import__("pwd").getpwnam("nobody")))
    status, err = run_as_nobody(["assemble", lanes, "-o", out, "-q", "--workers", "1"])
    assert status == 2, err
    expected = f"assembler: error: refusing to replace {out}: this user may not write to it (mode 0444)"
    assert one_error_line(err) == expected
    assert out.read_text() == "keep\n"
    assert sorted(path.name for path in nobodys_folder.iterdir()) == ["in.jsonl", "out.jsonl"]


def test_a_metrics_folder_that_refuses_writes_is_found_before_the_run(nobodys_folder: Path) -> None:
    lanes = copy(SAMPLE, nobodys_folder / "in.jsonl")
    out = nobodys_folder / "out.jsonl"
    out.write_text("keep\n")
    if os.geteuid() == 0:
        os.chown(out, *(lambda entry: (entry.pw_uid, entry.pw_gid))(__import__("pwd").getpwnam("nobody")))
    locked = nobodys_folder / "locked"
    locked.mkdir()
    if os.geteuid() == 0:
        os.chown(locked, 0, 0)
    locked.chmod(0o555)
    metrics = locked / "metrics.prom"
    status, err = run_as_nobody(["assemble", lanes, "-o", out, *RERANK, "--metrics-out", metrics, "-q"])
    assert status == 1, err
    assert one_error_line(err) == f"assembler: error: cannot write {metrics}: Permission denied"
    assert out.read_text() == "keep\n"


def test_a_sweep_with_a_file_named_runs_in_its_folder_is_a_usage_error(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    (tmp_path / "sweep").mkdir()
    runs = tmp_path / "sweep" / "runs"
    runs.write_text("mine\n")
    argv: list[str | Path] = [
        "evaluate",
        "sweep",
        "--eval",
        EVAL_DATA / "eval.jsonl",
        "--lanes",
        EVAL_DATA / "lanes.jsonl",
    ]
    status, _, err = run_cli(capsys, *argv, "--budgets", "items=2", "--out-dir", tmp_path / "sweep", "--no-plot")
    assert status == 2
    assert one_error_line(err).startswith(f"assembler: error: cannot write under {runs}: it is not a folder")
    assert runs.read_text() == "mine\n" and sorted(p.name for p in (tmp_path / "sweep").iterdir()) == ["runs"]


def test_a_symlink_loop_as_output_is_refused_and_stays_a_link(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    loop = tmp_path / "out.jsonl"
    loop.symlink_to(loop)
    status, _, err = run_cli(capsys, "assemble", SAMPLE, "-o", loop, "-q", "--workers", "1")
    assert status == 2
    assert one_error_line(err) == f"assembler: error: cannot write {loop}: too many levels of symbolic links"
    assert loop.is_symlink() and os.readlink(loop) == str(loop)
    assert [path.name for path in tmp_path.iterdir()] == ["out.jsonl"]


def test_more_workers_than_cpus_are_capped_with_a_warning(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    asked: list[int | None] = []

    def run(inputs: object, output: object, options: RunOptions, **kwargs: object) -> RunSummary:
        asked.append(options.workers)
        return RunSummary(queries=30)  # (no records would be a warning of its own)

    monkeypatch.setattr("assembler.cli.assemble.usable_cpus", lambda: 2)
    monkeypatch.setattr("assembler.cli.assemble.run_assembly", run)
    status, _, err = run_cli(capsys, "assemble", SAMPLE, "-o", tmp_path / "out.jsonl", "--workers", "16", "-q")
    assert status == 0
    assert err == "assembler: warning: --workers 16 is more than the 2 CPU(s) this process may use: using 2\n"
    assert asked == [2]


@pytest.mark.parametrize("command", ["assemble", "assess"])
def test_skipping_errors_with_packages_on_stdout_needs_an_errors_file(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path, command: str
) -> None:
    monkeypatch.chdir(tmp_path)
    source = SAMPLE if command == "assemble" else ASSESS_SAMPLE
    status, out, err = run_cli(capsys, command, source, "-o", "-", "--on-error", "skip")
    assert (status, out) == (2, "")
    assert one_error_line(err) == (
        "assembler: error: --on-error skip with -o - (standard output) needs --errors FILE: the default "
        "errors file is OUT.errors.jsonl, and standard output has no name"
    )
    assert list(tmp_path.iterdir()) == []


# --- SIGTERM, SIGHUP and SIGQUIT: handled from the start, temporaries removed ---------------------------

SIGNAL_AT_POLARS = """
import importlib.abc, os, signal, sys

class SignalAtPolars(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == "polars":
            os.kill(os.getpid(), signal.{signal})
        return None

sys.meta_path.insert(0, SignalAtPolars())
sys.argv = ["assembler", "assemble", "{input}", "-o", "{output}", "-q"]
from assembler.cli import main
sys.exit(main())
"""


@pytest.mark.parametrize(
    ("name", "status", "line"),
    [("SIGTERM", 143, "terminated"), ("SIGHUP", 129, "hung up"), ("SIGQUIT", 131, "quit")],
)
def test_a_signal_while_the_command_loads_is_one_line_and_its_status(
    tmp_path: Path, name: str, status: int, line: str
) -> None:
    script = SIGNAL_AT_POLARS.format(signal=name, input=SAMPLE, output=tmp_path / "out.jsonl")
    done = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        timeout=120,
        check=False,
    )
    assert (done.returncode, done.stderr, done.stdout) == (status, f"assembler: {line}\n", "")
    assert list(tmp_path.iterdir()) == []


def test_a_hang_up_to_the_group_exits_129_and_leaves_nothing(big_input: Path, tmp_path: Path) -> None:
    """A terminal that hangs up signals the whole group: the workers leave it to the command."""
    status, err, workers = interrupt_run(big_input, tmp_path, signal.SIGHUP, to="group")
    assert err == "assembler: hung up\n"
    assert status == 129
    assert_cleaned_up(tmp_path, workers)


def test_sigquit_exits_131_and_leaves_nothing(big_input: Path, tmp_path: Path) -> None:
    status, err, workers = interrupt_run(big_input, tmp_path, signal.SIGQUIT, to="command")
    assert err == "assembler: quit\n"
    assert status == 131
    assert_cleaned_up(tmp_path, workers)
