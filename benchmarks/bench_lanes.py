"""The committed real lane dumps (and any given with ``--lanes FILE``), file in, file out.

Dumps: ``data/sample/lanes.jsonl``, ``data/conformance/lanes.jsonl``, every
``data/eval/*/lanes.jsonl`` present, and each ``--lanes FILE``. For each: ``run_assembly`` (the
CLI's engine, in this process) against the reference reading and writing the files itself,
both in this process so that tiny dumps are not measured by interpreter start; then the CLI as a
subprocess once, for its wall time and peak RSS. Outputs are asserted byte-identical.

A user's own dump: ``pytest benchmarks/bench_lanes.py --benchmark-only --lanes my.jsonl``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from assembler import run_assembly
from benchmarks.harness import ROOT, cli_command, reference_file, run_measured, same_bytes

COMMITTED = [ROOT / "data" / "sample" / "lanes.jsonl", ROOT / "data" / "conformance" / "lanes.jsonl"]


def dumps(config: pytest.Config) -> list[Path]:
    found = [p for p in COMMITTED if p.exists()]
    found += sorted((ROOT / "data" / "eval").glob("*/lanes.jsonl"))
    found += [Path(p).resolve() for p in config.getoption("lanes")]
    return found


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "dump" in metafunc.fixturenames:
        paths = dumps(metafunc.config)
        ids = [str(p.relative_to(ROOT)) if p.is_relative_to(ROOT) else str(p) for p in paths]
        metafunc.parametrize("dump", paths, ids=ids)


def _queries(path: Path) -> int:
    with open(path, "rb") as handle:
        return sum(1 for line in handle if line.strip())


@pytest.mark.parametrize("impl", ["reference", "run_assembly"])
def test_dump(benchmark: Any, tmp_path: Path, dump: Path, impl: str) -> None:
    out = tmp_path / f"{impl}.jsonl"
    queries = _queries(dump)
    benchmark.group = f"lane dump {dump.parent.name}/{dump.name} ({queries} queries)"
    benchmark.extra_info.update({"impl": impl, "queries": queries})
    expected = tmp_path / "reference.jsonl"
    if impl == "reference":
        benchmark.pedantic(reference_file, args=([str(dump)], str(out)), rounds=5, warmup_rounds=1)
    else:
        reference_file([str(dump)], str(expected))
        benchmark.pedantic(run_assembly, args=([str(dump)], str(out)), rounds=5, warmup_rounds=1)
        assert same_bytes(out, expected)
        measured = run_measured(cli_command([str(dump)], str(tmp_path / "cli.jsonl")))
        assert measured.returncode == 0, measured.stderr
        assert same_bytes(tmp_path / "cli.jsonl", expected)
        benchmark.extra_info.update(
            {"cli_wall_s": round(measured.seconds, 3), "cli_peak_rss_MiB": round(measured.peak_rss / 2**20)}
        )
