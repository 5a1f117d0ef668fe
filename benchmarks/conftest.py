"""pytest configuration of the benchmark suite (``pytest benchmarks/ --benchmark-only``).

The benchmark files are named ``bench_*.py``: pytest's default pattern (``test_*.py``) never
collects them, and the CI run (``python -m pytest``, testpaths ``tests`` and ``assembler``) never
comes here. This file collects them only when ``--benchmark-only`` is given (or a file is named
on the command line), and prints a table of speed ratios against the reference at the end.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from benchmarks.harness import machine_info


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("assembler benchmarks")
    group.addoption(
        "--lanes",
        action="append",
        default=[],
        metavar="FILE",
        help="a lane dump (JSON Lines) to benchmark besides the committed ones; repeatable",
    )
    group.addoption(
        "--typical-queries", type=int, default=10_000, help="queries of the typical end-to-end run (default 10000)"
    )
    group.addoption(
        "--worst-queries", type=int, default=1_000, help="queries of the worst-case end-to-end run (default 1000)"
    )
    group.addoption(
        "--ratios", metavar="PREFIX", help="also write the ratio table as PREFIX.json and PREFIX.md (markdown)"
    )


def pytest_collect_file(file_path: Path, parent: pytest.Collector) -> pytest.Module | None:
    if file_path.suffix != ".py" or not file_path.name.startswith("bench_"):
        return None
    if parent.session.isinitpath(file_path):
        return None  # named on the command line: pytest's own collector takes it
    if not parent.config.getoption("benchmark_only", default=False):
        return None
    module: pytest.Module = pytest.Module.from_parent(parent, path=file_path)
    return module


def pytest_report_header(config: pytest.Config) -> str:
    return "assembler benchmarks on " + json.dumps(machine_info())


def _ratio_rows(config: pytest.Config) -> list[dict[str, Any]]:
    session = getattr(config, "_benchmarksession", None)
    if session is None:
        return []
    groups: dict[str, list[Any]] = {}
    for bench in session.benchmarks:
        groups.setdefault(bench.group or "", []).append(bench)
    rows: list[dict[str, Any]] = []
    for group, benches in groups.items():
        baseline = [b for b in benches if b.extra_info.get("impl") == "reference"]
        if not baseline:
            continue
        base = baseline[0].stats.min
        base_cpu = baseline[0].extra_info.get("cpu_s")
        for bench in benches:
            impl = bench.extra_info.get("impl", bench.name)
            fastest = bench.stats.min
            row = {
                "group": group,
                "impl": impl,
                "min_s": fastest,
                "median_s": bench.stats.median,
                "rounds": bench.stats.rounds,
                "speedup": base / fastest if fastest else math.inf,
            }
            row.update({k: v for k, v in bench.extra_info.items() if k not in ("impl",)})
            cpu = bench.extra_info.get("cpu_s")
            if base_cpu and cpu:
                row["cpu_speedup"] = round(base_cpu / cpu, 2)
            rows.append(row)
    return rows


_SHOWN = ("group", "impl", "min_s", "median_s", "rounds", "speedup")


def _secs(seconds: float) -> str:
    return f"{seconds * 1e3:.3f} ms" if seconds < 1 else f"{seconds:.2f} s"


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    rows = _ratio_rows(config)
    if not rows:
        return
    write = terminalreporter.write_line
    terminalreporter.section("speed against the reference (speedup = reference's fastest round / this one's)")
    write(f"{'group':<44} {'implementation':<26} {'min':>12} {'median':>12} {'speedup':>9}  extra")
    for row in rows:
        extra = ", ".join(f"{k}={v}" for k, v in row.items() if k not in _SHOWN)
        write(
            f"{row['group']:<44} {row['impl']:<26} {_secs(row['min_s']):>12} {_secs(row['median_s']):>12} "
            f"{row['speedup']:>8.1f}x  {extra}"
        )
    prefix = config.getoption("ratios")
    if prefix:
        info = machine_info()
        Path(f"{prefix}.json").write_text(json.dumps({"machine": info, "rows": rows}, indent=1) + "\n")
        Path(f"{prefix}.md").write_text(_markdown(rows, info))


def _markdown(rows: list[dict[str, Any]], info: dict[str, Any]) -> str:
    lines = [
        "<!-- written by pytest benchmarks/ --benchmark-only --ratios PREFIX; do not edit by hand -->",
        f"Machine at the end of the run: {info}",
        "",
        "| group | implementation | min | median | rounds | speedup vs reference (min) | details |",
        "|---|---|---:|---:|---:|---:|---|",
    ]
    for row in rows:
        extra = ", ".join(f"{k}={v}" for k, v in row.items() if k not in _SHOWN)
        lines.append(
            f"| {' '.join(row['group'].split())} | {row['impl']} | {_secs(row['min_s'])} | {_secs(row['median_s'])} "
            f"| {row['rounds']} | {row['speedup']:.1f}× | {extra} |"
        )
    return "\n".join(lines) + "\n"
