"""CPU per query of this tree against an older commit, in the same run, on the same inputs.

    python -m benchmarks.versus                      # against 3c8c4aa: typical 2,000 and worst 100 queries
    python -m benchmarks.versus --commit HEAD~5 --typical 500 --worst 20 --rounds 3
    python -m benchmarks.versus --commit 0ab012b --typical 200 --worst 0 --chunk-size 5   # fixed cost per chunk

The older commit is checked out into a git worktree on the scratch directory
(``/tmp/assembler-bench``, or ``ASSEMBLER_BENCH_DIR``); both trees run with this interpreter, each
with its own tree first on ``PYTHONPATH``. Two figures per input, rounds alternating between the
trees (A B A B ...) so that a drift of the machine's speed hits both:

* **steady**: CPU seconds (user + system, all threads) of one in-process ``run_assembly`` over the
  file, after a first run that warms imports and caches up, divided by the queries: what a query
  costs a running process;
* **whole**: CPU seconds of ``python -m assembler assemble IN -o OUT -q --workers 1`` as a child
  process, start-up included, divided by the queries.

Medians over the rounds; outputs are compared byte for byte (a difference is reported and fails
the run). Writes a markdown table (``--out``) headed by the command, the machine's load and the code.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import textwrap
from collections.abc import Sequence
from pathlib import Path

from benchmarks.harness import ROOT, SCRATCH, machine_info, same_bytes
from tests.oracle.pools import generate_records, write_jsonl

BASE_COMMIT = "3c8c4aa"

# Runs inside a child interpreter with one tree on PYTHONPATH; prints CPU seconds of the second run.
_STEADY = textwrap.dedent(
    """
    import importlib.util, sys, time
    import assembler
    # An editable install may supply a module the tree does not have: look in the tree only.
    if importlib.util.find_spec("assembler.run") and __import__("os").path.isdir(assembler.__path__[0] + "/run"):
        from assembler.run.local import run_assembly
        from assembler.run.options import RunOptions
        options = RunOptions(workers=1, **({"chunk_size": int(sys.argv[3])} if sys.argv[3:] else {}))
        def once(): run_assembly(sys.argv[1], sys.argv[2], options)
    else:  # the layout before assembler/run/
        from assembler.stream import run_assembly
        sized = {"chunk_size": int(sys.argv[3])} if sys.argv[3:] else {}
        def once(): run_assembly([sys.argv[1]], sys.argv[2], workers=1, **sized)
    once()
    start = time.process_time()
    once()
    print(time.process_time() - start)
    """
)


def _tree(commit: str) -> Path:
    """A worktree of ``commit`` on the scratch directory (made once, reused)."""
    resolved = subprocess.run(
        ["git", "rev-parse", "--short", commit], cwd=ROOT, check=True, capture_output=True, text=True
    ).stdout.strip()
    path = SCRATCH / f"tree-{resolved}"
    if not (path / "assembler").is_dir():
        path.parent.mkdir(parents=True, exist_ok=True)
        subprocess.run(["git", "worktree", "add", "--detach", str(path), resolved], cwd=ROOT, check=True)
    return path


def _environment(tree: Path) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(tree)}


def _child_cpu(command: Sequence[str], tree: Path) -> float:
    """CPU seconds (user + system) of a child process and its descendants."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(command, env=_environment(tree), cwd=tree, check=True, capture_output=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def _steady(tree: Path, source: Path, output: Path, chunk_size: int | None) -> float:
    sized = [] if chunk_size is None else [str(chunk_size)]
    result = subprocess.run(
        [sys.executable, "-c", _STEADY, str(source), str(output), *sized],
        env=_environment(tree),
        cwd=tree,  # "-c" and "-m" put the working folder first on the path
        check=True,
        capture_output=True,
        text=True,
    )
    return float(result.stdout.strip().splitlines()[-1])


def _whole(tree: Path, source: Path, output: Path, chunk_size: int | None) -> float:
    command = [sys.executable, "-m", "assembler", "assemble", str(source), "-o", str(output), "-q", "--workers", "1"]
    sized = [] if chunk_size is None else ["--chunk-size", str(chunk_size)]
    return _child_cpu([*command, *sized], tree)


def compare(
    name: str, source: Path, queries: int, trees: dict[str, Path], rounds: int, chunk_size: int | None = None
) -> list[str]:
    """Table rows for one input: per tree, steady and whole CPU ms per query, and the ratios."""
    figures: dict[str, dict[str, list[float]]] = {label: {"steady": [], "whole": []} for label in trees}
    outputs = {label: SCRATCH / f"versus-{name}-{label}.jsonl" for label in trees}
    for _ in range(rounds):
        for label, tree in trees.items():
            figures[label]["steady"].append(_steady(tree, source, outputs[label], chunk_size) / queries * 1000)
            figures[label]["whole"].append(_whole(tree, source, outputs[label], chunk_size) / queries * 1000)
    labels = list(trees)
    if not same_bytes(outputs[labels[0]], outputs[labels[1]]):
        raise SystemExit(f"{name}: the two trees' outputs differ")
    rows = []
    for kind in ("steady", "whole"):
        new, old = (statistics.median(figures[label][kind]) for label in labels)
        rows.append(f"| {name}, {queries:,} queries | {kind} | {new:.3f} | {old:.3f} | **{old / new:.2f}×** |")
    return rows


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--commit", default=BASE_COMMIT, help=f"the older commit (default {BASE_COMMIT})")
    parser.add_argument("--typical", type=int, default=2000, help="typical-profile queries (default 2000)")
    parser.add_argument("--worst", type=int, default=100, help="worst-case queries, 200 passages (default 100)")
    parser.add_argument("--rounds", type=int, default=3, help="alternating rounds per input (default 3)")
    parser.add_argument(
        "--chunk-size", type=int, help="queries per chunk in both trees (default: each tree's own default)"
    )
    parser.add_argument("--out", type=Path, help="write the table here (markdown)")
    args = parser.parse_args(argv)
    SCRATCH.mkdir(parents=True, exist_ok=True)
    trees = {"this tree": ROOT, args.commit: _tree(args.commit)}
    rows = []
    for name, count in (("typical", args.typical), ("worst", args.worst)):
        if count == 0:
            continue
        source = SCRATCH / f"versus-{name}-{count}.jsonl"
        if not source.exists():
            write_jsonl(generate_records(count, seed=7, profile=name), source)
        rows += compare(name, source, count, trees, args.rounds, args.chunk_size)
    command = "python -m benchmarks.versus" + "".join(f" {arg}" for arg in (argv if argv is not None else sys.argv[1:]))
    table = [
        "<!-- written by benchmarks/versus.py; do not edit by hand -->",
        f"Command: `{command}`  ",
        f"Machine: {machine_info()}",
        "",
        f"| input | CPU per query | this tree (ms) | {args.commit} (ms) | ratio |",
        "|---|---|---:|---:|---:|",
        *rows,
    ]
    print("\n".join(table))
    if args.out:
        args.out.write_text("\n".join(table) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
