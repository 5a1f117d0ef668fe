"""End to end: whole batches through ``assemble_batch`` and through the CLI, against the reference.

* typical pools: 10,000 queries (``--typical-queries``) of ``generate_records(profile="typical")``
  (about 20 activations, a few query matches, 5 passages, citations);
* worst-case pools: 1,000 queries (``--worst-queries``) of 200 passages each (``profile="worst"``).

Two ways in, the same work on both sides:

* ``parsed``: the records as parsed dicts; ``assemble_batch(records)`` against
  ``[assemble_reference(r) for r in records]``.
* ``file``: a JSON Lines file in, a JSON Lines file out; ``assembler assemble IN -o OUT`` (a
  subprocess, interpreter start included) with its default of a worker process per usable CPU
  (``cli``) and with ``--workers 1`` (``cli-1-worker``), ``run_assembly`` in this process (one
  worker, its default), and the reference
  reading and writing the files itself (``python -m benchmarks.harness reference IN -o OUT``).

One round each (a run is seconds to minutes). Outputs are asserted byte-identical to the
reference's. Peak RSS of the subprocesses is reported as ``peak_rss_MiB``, CPU seconds (user + system, all
threads) as ``cpu_s``, and the ratio of CPU seconds as ``cpu_speedup`` in the summary table.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from assembler import assemble_batch, run_assembly
from benchmarks.harness import cli_command, reference_command, run_measured, same_bytes
from tests.oracle.pools import generate_records, write_jsonl
from tests.oracle.reference import assemble_reference

SEEDS = {"typical": 20240501, "worst": 20240502}
_RECORDS: dict[str, list[dict[str, Any]]] = {}
_FILES: dict[str, Path] = {}
_OUTPUTS: dict[tuple[str, str], Any] = {}


def _count(config: pytest.Config, profile: str) -> int:
    value: int = config.getoption("typical_queries" if profile == "typical" else "worst_queries")
    return value


def records_for(config: pytest.Config, profile: str) -> list[dict[str, Any]]:
    if profile not in _RECORDS:
        _RECORDS[profile] = generate_records(_count(config, profile), seed=SEEDS[profile], profile=profile)
    return _RECORDS[profile]


@pytest.fixture(scope="module")
def scratch(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("batch")


def file_for(config: pytest.Config, profile: str, scratch: Path) -> Path:
    if profile not in _FILES:
        path = scratch / f"{profile}-{_count(config, profile)}.jsonl"
        write_jsonl(records_for(config, profile), str(path))
        _FILES[profile] = path
    return _FILES[profile]


def _cpu_timed(benchmark: Any, fn: Any) -> Any:
    """Run ``fn`` once under the benchmark; record its CPU seconds (all threads) as ``cpu_s``."""
    cpu = time.process_time()
    result = benchmark.pedantic(fn, rounds=1, iterations=1)
    benchmark.extra_info["cpu_s"] = round(time.process_time() - cpu, 3)
    return result


def _setup(benchmark: Any, group: str, impl: str, **info: Any) -> None:
    benchmark.group = group
    benchmark.extra_info.update({"impl": impl, **info})


def _compare(way: str, profile: str, impl: str, output: Any) -> None:
    """Keep each output; assert it equals the reference's whenever both have run."""
    _OUTPUTS[(way, profile, impl)] = output  # type: ignore[index]
    reference = _OUTPUTS.get((way, profile, "reference"))  # type: ignore[call-overload]
    if reference is None or impl == "reference":
        return
    if way == "parsed":
        assert output == reference, f"{impl} packages differ from the reference's"
    else:
        assert same_bytes(output, reference), f"{impl} output file differs from the reference's"


PROFILES = [pytest.param("typical", id="typical"), pytest.param("worst", id="worst")]


@pytest.mark.parametrize("impl", ["reference", "assemble_batch"])
@pytest.mark.parametrize("profile", PROFILES)
def test_parsed(benchmark: Any, request: pytest.FixtureRequest, profile: str, impl: str) -> None:
    records = records_for(request.config, profile)
    _setup(benchmark, f"end to end, parsed dicts, {profile} x{len(records)}", impl, queries=len(records))
    if impl == "reference":
        packages = _cpu_timed(benchmark, lambda: [assemble_reference(r) for r in records])
    else:
        packages = _cpu_timed(benchmark, lambda: assemble_batch(records).packages)
    assert len(packages) == len(records)
    _compare("parsed", profile, impl, packages)


@pytest.mark.parametrize("impl", ["reference", "cli", "cli-1-worker", "run_assembly"])
@pytest.mark.parametrize("profile", PROFILES)
def test_file(benchmark: Any, request: pytest.FixtureRequest, scratch: Path, profile: str, impl: str) -> None:
    source = file_for(request.config, profile, scratch)
    queries = _count(request.config, profile)
    output = scratch / f"{profile}-{impl}.out.jsonl"
    info: dict[str, Any] = {"queries": queries, "input_MiB": round(source.stat().st_size / 2**20, 1)}
    if impl == "run_assembly":

        def run() -> None:
            run_assembly([str(source)], str(output))

    else:
        if impl == "reference":
            command = reference_command([str(source)], str(output))
        else:  # the command's default (a worker per usable CPU) or one process
            command = cli_command([str(source)], str(output), workers=1 if impl == "cli-1-worker" else None)

        def run() -> None:
            measured = run_measured(command)
            assert measured.returncode == 0, measured.stderr
            info["peak_rss_MiB"] = round(measured.peak_rss / 2**20)
            info["child_cpu_s"] = measured.cpu_seconds

    _setup(benchmark, f"end to end, file in/out, {profile} x{queries}", impl)
    started = time.perf_counter()
    _cpu_timed(benchmark, run)
    info["queries_per_s"] = round(queries / (time.perf_counter() - started))
    if "child_cpu_s" in info:  # a subprocess: its own CPU, not this process's
        info["cpu_s"] = info.pop("child_cpu_s")
    benchmark.extra_info.update(info)
    _compare("file", profile, impl, output)
