"""Hostile environments, in real processes: closed standard streams, a narrow terminal encoding,
a bad POLARS_MAX_THREADS, too few file descriptors, too little address space. Each is one line
on stderr (when there is one) and a meaningful exit status, never a traceback."""

from __future__ import annotations

import os
import resource
import subprocess
import sys
from collections.abc import Callable, Mapping
from pathlib import Path

import pytest

from assembler.cli import main
from assembler.cli.startup import MAX_POLARS_THREADS, polars_threads_problem

DATA = Path(__file__).resolve().parent.parent.parent / "data"
CONFORMANCE = DATA / "conformance" / "lanes.jsonl"
EXPECTED = DATA / "conformance" / "expected.jsonl"
SAMPLE = DATA / "sample" / "lanes.jsonl"
BREWERY = DATA / "eval" / "brewery"
ASSEMBLER = Path(sys.executable).parent / "assembler"


def run(
    args: list[str | Path],
    *,
    close: str = "",
    env: Mapping[str, str] | None = None,
    limits: Callable[[], None] | None = None,
) -> subprocess.CompletedProcess[bytes]:
    """``assembler ARGS`` in a process of its own; ``close`` names the standard streams closed
    before it starts (``"0"``, ``"1"``, ``"2"``, as the shell's ``<&-``, ``>&-``, ``2>&-``)."""
    redirects = " ".join(f"{fd}>&-" if fd != "0" else "0<&-" for fd in close)
    command = ["sh", "-c", f'exec "$@" {redirects}', "sh", str(ASSEMBLER), *map(str, args)]
    environment = {**os.environ, **(env or {})}
    return subprocess.run(command, capture_output=True, env=environment, preexec_fn=limits, timeout=300)


def one_error_line(stderr: bytes) -> str:
    text = stderr.decode("utf-8")
    assert "Traceback" not in text and "panicked" not in text
    [line] = text.splitlines()
    assert line.startswith("assembler: error: ")
    return line


@pytest.mark.parametrize("value", ["0", "abc", "-1", "2.0", "", str(MAX_POLARS_THREADS + 1), "99999999999999999999"])
def test_a_bad_polars_max_threads_is_a_usage_error_naming_the_variable(tmp_path: Path, value: str) -> None:
    out = tmp_path / "out.jsonl"
    done = run(["assemble", CONFORMANCE, "-o", out], env={"POLARS_MAX_THREADS": value})
    assert done.returncode == 2
    line = one_error_line(done.stderr)
    assert "POLARS_MAX_THREADS must be a whole number of threads from 1 to 1024" in line
    assert not out.exists()


@pytest.mark.parametrize("value", ["1", "2", "+2", " 2 "])
def test_a_readable_polars_max_threads_is_accepted(value: str) -> None:
    assert polars_threads_problem({"POLARS_MAX_THREADS": value}) is None


def test_a_closed_stderr_does_not_change_the_work_or_the_status(tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    done = run(["assemble", CONFORMANCE, "-o", out], close="2")
    assert done.returncode == 0
    assert out.read_bytes() == EXPECTED.read_bytes()
    missing = run(["assemble", tmp_path / "missing.jsonl", "-o", tmp_path / "other.jsonl"], close="2")
    assert missing.returncode == 2


def test_a_closed_stdout_with_a_file_output_writes_the_file_and_nothing_else_into_it(tmp_path: Path) -> None:
    # The output file must not be opened on descriptor 1, where printed text would land in it.
    out = tmp_path / "out.jsonl"
    done = run(["assemble", CONFORMANCE, "-o", out], close="1")
    assert done.returncode == 0, done.stderr
    assert out.read_bytes() == EXPECTED.read_bytes()
    assert b"Traceback" not in done.stderr


def test_a_closed_stdout_as_the_output_is_one_line_and_exit_1() -> None:
    done = run(["assemble", CONFORMANCE, "-o", "-"], close="1")
    assert done.returncode == 1
    assert one_error_line(done.stderr) == "assembler: error: cannot write standard output: Bad file descriptor"


def test_a_closed_stdout_for_a_summary_is_reported_after_the_artifact_is_written(tmp_path: Path) -> None:
    out = tmp_path / "run.json"
    args = ["evaluate", "--eval", BREWERY / "eval.jsonl", "--lanes", BREWERY / "lanes.jsonl", "--out", out]
    done = run(args, close="1")
    assert done.returncode == 1 and out.is_file()
    lines = done.stderr.decode().splitlines()
    assert lines[-1] == "assembler: error: cannot write standard output: Bad file descriptor"
    assert "Traceback" not in done.stderr.decode()


def test_a_closed_stdin_read_as_input_fails_in_one_line(tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    done = run(["assemble", "-", "-o", out], close="0")
    assert done.returncode == 2  # an input that cannot be read, as for a file
    assert "Bad file descriptor" in one_error_line(done.stderr)
    assert not out.exists()


def test_a_closed_stdin_with_an_input_file_assembles_it(tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    done = run(["assemble", CONFORMANCE, "-o", out], close="0")
    assert done.returncode == 0
    assert out.read_bytes() == EXPECTED.read_bytes()


def test_all_three_streams_closed_still_writes_the_output(tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    done = run(["assemble", CONFORMANCE, "-o", out], close="012")
    assert done.returncode == 0
    assert out.read_bytes() == EXPECTED.read_bytes()


ASCII = {"PYTHONIOENCODING": "ascii"}


def test_explain_under_an_ascii_terminal_escapes_what_it_cannot_encode() -> None:
    done = run(["explain", SAMPLE, "--query-id", "ja-005"], env=ASCII)
    assert done.returncode == 0, done.stderr
    done.stdout.decode("ascii")  # nothing but ASCII
    assert "\\u9ad8\\u702c" in done.stdout.decode()  # 高瀬
    assert done.stderr == b""


def test_packages_on_stdout_under_an_ascii_terminal_are_utf8_bytes() -> None:
    done = run(["assemble", CONFORMANCE, "-o", "-", "-q"], env=ASCII)
    assert done.returncode == 0
    assert done.stdout == EXPECTED.read_bytes()


def test_the_evaluate_summary_under_an_ascii_terminal_does_not_fail(tmp_path: Path) -> None:
    args = [
        "evaluate",
        "--eval",
        BREWERY / "eval.jsonl",
        "--lanes",
        BREWERY / "lanes.jsonl",
        "--out",
        tmp_path / "r.json",
    ]
    done = run(args, env=ASCII)
    assert done.returncode == 0, done.stderr
    assert "\\u2014" in done.stdout.decode("ascii")


def _file_descriptors(soft: int, hard: int) -> Callable[[], None]:
    return lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def test_too_few_file_descriptors_is_one_line_and_exit_1(tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    done = run(["assemble", CONFORMANCE, "-o", out], limits=_file_descriptors(8, 8))
    assert done.returncode == 1
    line = one_error_line(done.stderr)
    assert (
        line == "assembler: error: too few file descriptors: the limit (ulimit -n) is 8; the command needs at least 32"
    )
    assert not out.exists()


def test_a_low_soft_file_descriptor_limit_is_raised_when_the_hard_one_allows(tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    done = run(["assemble", CONFORMANCE, "-o", out], limits=_file_descriptors(8, hard))
    assert done.returncode == 0, done.stderr
    assert out.read_bytes() == EXPECTED.read_bytes()


@pytest.mark.parametrize("mib", [100, 200, 400, 800])
def test_too_little_address_space_to_load_polars_is_one_line_and_exit_1(tmp_path: Path, mib: int) -> None:
    out = tmp_path / "out.jsonl"
    limit = mib * 2**20
    done = run(
        ["assemble", CONFORMANCE, "-o", out],
        limits=lambda: resource.setrlimit(resource.RLIMIT_AS, (limit, resource.RLIM_INFINITY)),
    )
    assert done.returncode == 1
    line = one_error_line(done.stderr)
    assert line.startswith(
        "assembler: error: cannot load Polars: out of memory: the address-space limit (ulimit -v) is"
    )
    assert not out.exists()


class FakePanic(BaseException):
    """Stands for ``pyo3_runtime.PanicException`` (a BaseException, like the real one)."""


FakePanic.__name__ = "PanicException"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            'called `Result::unwrap()` on an `Err` value: Os { code: 24, kind: TooManyOpenFiles, message: "x" }',
            "assembler: error: Polars failed: Too many open files\n",
        ),
        ("index out of bounds: SECRET-VALUE", "assembler: error: Polars failed: an internal error (a panic)\n"),
    ],
)
def test_a_polars_panic_during_a_command_is_one_line_and_exit_1(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path, text: str, expected: str
) -> None:
    def panic(*args: object, **kwargs: object) -> None:
        raise FakePanic(text)

    monkeypatch.setattr("assembler.cli.assemble.run_assembly", panic)
    assert main(["assemble", str(CONFORMANCE), "-o", str(tmp_path / "out.jsonl")]) == 1
    assert capsys.readouterr().err == expected
