"""Where the vectorized path spends its time: pyinstrument over ``run_assembly``, summarized.

    python -m benchmarks.profile                  # typical 2,000 and worst 200 queries
    python -m benchmarks.profile --typical 500 --worst 20 --out /tmp/profile.md

For each input it prints (and writes as markdown): wall and CPU seconds, the time under each
pipeline stage (the functions called directly by ``run_assembly`` and ``assemble_records``, and by
the selection policy), and the functions with the most self time (time in the function's own
code, not in what it calls), library internals grouped by package. The full pyinstrument trees
go to the scratch directory as text.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import defaultdict
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from benchmarks.harness import SCRATCH, machine_info
from tests.oracle.pools import generate_records, iter_records, write_jsonl

STAGE_PARENTS = ("run_assembly", "assemble_table", "assemble_lanes", "select", "suppress", "duplicate_positions")

# The pipeline's stages by the functions that do them: a frame's time goes to the nearest
# enclosing (or own) stage function, so each second is counted once ("other" rows: a caller's
# own code and the calls not listed).
STAGES: tuple[tuple[str, tuple[tuple[str, str], ...]], ...] = (
    ("run: opening and closing outputs, other", (("run_assembly", "run/local.py"),)),
    ("reading input chunks (`read_tables`)", (("read_tables", "run/batch.py"),)),
    ("chunk bookkeeping (`assemble_table`, other)", (("assemble_table", "run/batch.py"),)),
    (
        "columnar reading: parse, checks, candidate frames (`read_lane_lines`)",
        (("read_lane_lines", "stages/lanes_columnar.py"),),
    ),
    ("record path: lines the columnar reader left (`iter_records`)", (("iter_records", "run/records.py"),)),
    (
        "candidate frames of the record path (`build_batch`, `concat_batches`)",
        (("build_batch", "stages/lanes.py"), ("concat_batches", "stages/lanes.py")),
    ),
    ("fusion (`fuse`)", (("fuse", "stages/fuse.py"),)),
    ("near-duplicates (`suppress`)", (("suppress", "stages/neardup.py"),)),
    (
        "selection: contradiction groups (`group_contradictions`, `survivor_positions`)",
        (("group_contradictions", "stages/groups.py"), ("survivor_positions", "selection/base.py")),
    ),
    ("selection: item texts and sizes (`build_items`)", (("build_items", "stages/package.py"),)),
    (
        "selection: diversity tiers and the decision frame (`admit_units`: a lazy query each)",
        (("admit_units", "selection/base.py"), ("tier_units", "stages/diversity.py")),
    ),
    ("selection: admission walk (`admit`)", (("admit", "stages/admission.py"),)),
    ("selection: other (marking, survivors, group texts)", (("select", "selection/contract.py"),)),
    (
        "package texts: omissions and the query's parts (`_query_frame`, `omitted_entries`, `admitted_items`,"
        " `cited_entries`, `package_texts`, `_summaries`)",
        (
            ("_query_frame", "pipeline.py"),
            ("omitted_entries", "stages/package.py"),
            ("admitted_items", "stages/package.py"),
            ("cited_entries", "stages/package.py"),
            ("package_texts", "stages/package.py"),
            ("_summaries", "pipeline.py"),
        ),
    ),
    (
        "package texts: the query run (`assemble_lanes`, other)",
        (("assemble_lanes", "pipeline.py"),),
    ),
    ("output lines and writing (`PackageSink.write`: `output_lines`, the file)", (("write", "run/outputs.py"),)),
)


def _walk(frame: Any, parent: Any = None) -> Iterator[tuple[Any, Any]]:
    yield frame, parent
    for child in frame.children:
        yield from _walk(child, frame)


def _self_time(frame: Any) -> float:
    return float(frame.total_self_time)  # own time, including its synthetic [self] children


def _label(frame: Any) -> str:
    path = frame.file_path or ""
    if "/assembler/" in path or "/benchmarks/" in path:
        marker = "/assembler/" if "/assembler/" in path else "/benchmarks/"
        short = path[path.rfind(marker) + 1 :]
        return f"{frame.function} ({short}:{frame.line_no})"
    if "site-packages/" in path:
        package = path.split("site-packages/", 1)[1].split("/", 1)[0]
        return f"{frame.function} [{package}]"
    return f"{frame.function} [{path.rsplit('/', 1)[-1] or 'builtin'}]"


def summarize(root: Any, top: int) -> tuple[list[tuple[str, float]], list[tuple[str, float]]]:
    self_times: dict[str, float] = defaultdict(float)
    stages: dict[str, float] = defaultdict(float)
    for frame, parent in _walk(root):
        if frame.is_synthetic:
            continue
        label = _label(frame)
        if parent is not None and (not frame.file_path or "<built-in>" in frame.file_path):
            label = f"{frame.function} [built-in] in {_label(parent)}"
        self_times[label] += _self_time(frame)
        if frame.function in STAGE_PARENTS and "assembler/" in (frame.file_path or ""):
            for child in frame.children:
                if not child.is_synthetic:
                    stages[f"{frame.function} > {_label(child)}"] += child.time
    hot = sorted(self_times.items(), key=lambda kv: -kv[1])[:top]
    staged = sorted(stages.items(), key=lambda kv: -kv[1])
    return hot, [s for s in staged if s[1] >= 0.01 * root.time]


def _stage_of(frame: Any) -> str | None:
    path = frame.file_path or ""
    for label, functions in STAGES:
        if any(frame.function == name and path.endswith(suffix) for name, suffix in functions):
            return label
    return None


def stage_times(root: Any) -> dict[str, float]:
    """Seconds per pipeline stage (:data:`STAGES`), each sample counted once: in its nearest stage."""
    times: dict[str, float] = defaultdict(float)
    pending: list[tuple[Any, str | None]] = [(root, None)]
    while pending:
        frame, enclosing = pending.pop()
        own = None if frame.is_synthetic else _stage_of(frame)
        if own is not None:
            times[own] += frame.time
            if enclosing is not None:
                times[enclosing] -= frame.time
        pending.extend((child, own or enclosing) for child in frame.children)
    return times


def profile_file(source: Path, scratch: Path, name: str, top: int) -> list[str]:
    from pyinstrument import Profiler

    from assembler import run_assembly

    out = scratch / f"{name}.out.jsonl"
    profiler = Profiler(interval=0.001)
    cpu = time.process_time()
    profiler.start()
    run_assembly([str(source)], str(out))
    profiler.stop()
    cpu = time.process_time() - cpu
    out.unlink()
    session = profiler.last_session
    assert session is not None, "pyinstrument recorded no session"
    (scratch / f"{name}.pyinstrument.txt").write_text(profiler.output_text(unicode=True, show_all=True))
    root = session.root_frame()
    assert root is not None, "pyinstrument recorded no samples"
    hot, stages = summarize(root, top)
    total = root.time
    by_stage = stage_times(root)
    lines = [
        f"### {name}",
        "",
        f"Wall {session.duration:.2f} s, CPU {cpu:.2f} s (process time, all threads), {session.sample_count} samples.",
        "",
        "| pipeline stage (each sample counted once) | seconds | share |",
        "|---|---:|---:|",
        *[
            f"| {label} | {by_stage.get(label, 0.0):.2f} | {100 * by_stage.get(label, 0.0) / total:.1f} % |"
            for label, _ in STAGES
        ],
        "",
        "| stage (caller > callee) | seconds | share |",
        "|---|---:|---:|",
        *[f"| `{label}` | {t:.2f} | {100 * t / total:.0f} % |" for label, t in stages],
        "",
        "| function (self time) | seconds | share |",
        "|---|---:|---:|",
        *[f"| `{label}` | {t:.2f} | {100 * t / total:.0f} % |" for label, t in hot],
        "",
    ]
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.profile", description=__doc__.split("\n")[0])
    parser.add_argument("--typical", type=int, default=2000, help="typical-profile queries (default 2000)")
    parser.add_argument("--worst", type=int, default=200, help="worst-profile queries (default 200)")
    parser.add_argument("--top", type=int, default=15)
    parser.add_argument("--out", type=Path, help="also write the summary here (markdown)")
    parser.add_argument("--scratch", type=Path, default=SCRATCH)
    args = parser.parse_args(argv)
    args.scratch.mkdir(parents=True, exist_ok=True)
    command = ("python -m benchmarks.profile " + " ".join(argv if argv is not None else sys.argv[1:])).strip()
    lines = [
        "<!-- written by benchmarks/profile.py; do not edit by hand -->",
        f"Command: `{command}`  ",
        f"Machine: {machine_info()}",
        "",
    ]
    for profile, n, seed in (("typical", args.typical, 7001), ("worst", args.worst, 7003)):
        if n <= 0:
            continue
        source = args.scratch / f"profile-{profile}-{seed}-{n}.jsonl"
        if not source.exists():
            records = (
                iter_records(n, seed=seed, profile=profile)
                if profile == "typical"
                else generate_records(n, seed=seed, profile=profile)
            )
            write_jsonl(records, str(source))
        lines += profile_file(source, args.scratch, f"{profile}, {n} queries", args.top)
    text = "\n".join(lines)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
