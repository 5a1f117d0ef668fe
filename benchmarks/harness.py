"""Shared helpers of the benchmarks: the reference run over files, subprocess runs with peak RSS.

The reference reads and writes JSON Lines itself (``python -m benchmarks.harness reference IN
-o OUT``), so a file-to-file comparison with ``assembler assemble IN -o OUT`` does the same work:
read, parse, assemble, write one ``{"query_id":...,"package":...}`` line per query.
"""

from __future__ import annotations

import argparse
import contextlib
import filecmp
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.oracle.reference import assemble_reference, to_json

ROOT = Path(__file__).resolve().parent.parent
TIME = shutil.which("time", path="/usr/bin:/bin")
SCRATCH = Path(os.environ.get("ASSEMBLER_BENCH_DIR", "/tmp/assembler-bench"))


def reference_file(inputs: Sequence[str], output: str) -> int:
    """Assemble every record of the JSON Lines ``inputs`` with the reference; returns the count."""
    count = 0
    with open(output, "w", encoding="utf-8", newline="\n") as out:
        for path in inputs:
            with open(path, encoding="utf-8") as handle:
                for line in handle:
                    if not line.strip():
                        continue
                    record = json.loads(line)
                    package = assemble_reference(record)
                    out.write('{"query_id":' + to_json(record["query_id"]) + ',"package":' + package + "}\n")
                    count += 1
    return count


@dataclass
class Measured:
    """A finished subprocess: wall seconds, peak RSS in bytes, exit status, stderr, RSS samples.

    ``peak_rss`` is the larger of the kernel's maximum RSS of the command (``/usr/bin/time``: the
    largest single process) and the largest sampled sum over the command and its descendants
    (psutil every ``sample_every`` seconds, so a worker pool counts in full).
    """

    seconds: float
    peak_rss: int
    returncode: int
    stderr: str
    samples: list[tuple[float, int]] = field(default_factory=list)
    cpu_seconds: float | None = None  # user + system CPU of the command (all its threads)


def _tree_rss(process: Any) -> int:
    import psutil

    total = 0
    for proc in [process, *process.children(recursive=True)]:
        with contextlib.suppress(psutil.Error):
            total += proc.memory_info().rss
    return int(total)


def run_measured(command: Sequence[str], *, sample_every: float = 0.1) -> Measured:
    """Run ``command`` (stdin closed, stderr captured) and measure its time and peak memory.

    The peak comes from ``/usr/bin/time -f %M`` around the command, not from our own ``wait4``:
    a child's ``ru_maxrss`` starts at its parent's RSS when it forks and execs, so a large
    benchmark process would inflate it; ``time`` is small.
    """
    import psutil

    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    samples: list[tuple[float, int]] = []
    with tempfile.TemporaryFile() as err, tempfile.NamedTemporaryFile("r") as timing, open(os.devnull, "rb") as stdin:
        wrapped = [TIME, "-q", "-o", timing.name, "-f", "%M %U %S", *command] if TIME else list(command)
        started = time.perf_counter()
        proc = subprocess.Popen(wrapped, stdin=stdin, stderr=err, cwd=ROOT, env=env)
        done = threading.Event()

        def sample() -> None:
            try:
                process = psutil.Process(proc.pid)
                while not done.wait(sample_every):
                    samples.append((time.perf_counter() - started, _tree_rss(process)))
            except psutil.Error:
                pass

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        proc.wait()
        seconds = time.perf_counter() - started
        done.set()
        sampler.join()
        err.seek(0)
        stderr = err.read().decode("utf-8", "replace")
        reported = timing.read().split()
    kernel_peak, cpu = 0, None
    if len(reported) >= 3 and reported[-3].isdigit():  # "Command exited with ..." may come first
        kernel_peak, cpu = int(reported[-3]) * 1024, round(float(reported[-2]) + float(reported[-1]), 2)
    peak = max(kernel_peak, max((rss for _, rss in samples), default=0))
    return Measured(seconds, peak, proc.returncode, stderr, samples, cpu)


def cli_command(
    inputs: Sequence[str], output: str, *, chunk_size: int | None = None, workers: int | None = None
) -> list[str]:
    """``assembler assemble INPUTS -o OUTPUT -q`` with this interpreter (``workers``: ``--workers``;
    without it the command's default, one process per usable CPU)."""
    command = [sys.executable, "-m", "assembler", "assemble", *inputs, "-o", output, "-q"]
    if chunk_size is not None:
        command += ["--chunk-size", str(chunk_size)]
    if workers is not None:
        command += ["--workers", str(workers)]
    return command


def reference_command(inputs: Sequence[str], output: str) -> list[str]:
    """The reference over files, in its own interpreter."""
    return [sys.executable, "-m", "benchmarks.harness", "reference", *inputs, "-o", output]


def same_bytes(a: str | Path, b: str | Path) -> bool:
    """Byte equality of two files."""
    return filecmp.cmp(a, b, shallow=False)


def code_state() -> str:
    """The commit and a digest of the working tree's ``assembler/*.py`` (it changes under edits)."""
    import hashlib

    digest = hashlib.sha256()
    for path in sorted((ROOT / "assembler").rglob("*.py")):
        digest.update(path.relative_to(ROOT).as_posix().encode() + b"\0" + path.read_bytes())
    try:
        head = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=True
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        head = "?"
    return f"{head}+tree:{digest.hexdigest()[:12]}"


def machine_info() -> dict[str, Any]:
    """CPU count, BLAS build and threads, and the OpenBLAS variables in force."""
    from threadpoolctl import threadpool_info

    blas = [
        {k: info.get(k) for k in ("internal_api", "version", "architecture", "num_threads")}
        for info in threadpool_info()
    ]
    return {
        "cpus": os.cpu_count(),
        "loadavg": [round(x, 2) for x in os.getloadavg()],
        "python": sys.version.split()[0],
        "blas": blas,
        "OPENBLAS_CORETYPE": os.environ.get("OPENBLAS_CORETYPE"),
        "OPENBLAS_L2_SIZE": os.environ.get("OPENBLAS_L2_SIZE"),
        "code": code_state(),
        "at": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.harness")
    commands = parser.add_subparsers(dest="command", required=True)
    ref = commands.add_parser("reference", help="assemble JSON Lines with the reference implementation")
    ref.add_argument("inputs", nargs="+")
    ref.add_argument("-o", "--output", required=True)
    args = parser.parse_args(argv)
    started = time.perf_counter()
    count = reference_file(args.inputs, args.output)
    seconds = time.perf_counter() - started
    rate = count / max(seconds, 1e-9)
    print(f"reference: {count} queries in {seconds:.2f} s ({rate:,.0f} queries/s)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())


def watched_child(command: list[str], timeout: float, max_rss_mib: float) -> tuple[dict[str, Any] | None, str, str]:
    """Run ``command`` (a child that prints one JSON line last) watching its RSS with psutil;
    stop it above ``max_rss_mib`` or after ``timeout`` seconds, so a quadratic run cannot take a
    shared machine down. Returns ``(its JSON, "", "")`` or ``(None, why it has none, "≥ peak MiB")``.
    """
    import psutil

    proc = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
    watched = psutil.Process(proc.pid)
    start, seen = time.monotonic(), 0.0
    while proc.poll() is None:
        try:
            seen = max(seen, watched.memory_info().rss / 2**20)
        except psutil.NoSuchProcess:
            break
        if seen > max_rss_mib or time.monotonic() - start > timeout:
            proc.kill()
            proc.wait()
            why = f"> {max_rss_mib:.0f} MiB" if seen > max_rss_mib else f"> {timeout:.0f} s"
            return None, f"stopped at {time.monotonic() - start:.0f} s ({why})", f"≥ {seen:.0f}"
        time.sleep(0.05)
    out = proc.stdout.read() if proc.stdout is not None else ""
    if proc.returncode != 0:
        return None, f"failed (exit {proc.returncode})", f"≥ {seen:.0f}"
    result: dict[str, Any] = json.loads(out.splitlines()[-1])
    return result, "", ""
