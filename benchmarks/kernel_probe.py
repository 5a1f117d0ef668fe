"""Where the near-duplicate kernel's CPU time goes at 200 passages (the pools of bench_neardup).

    python -m benchmarks.kernel_probe [--rounds 200]

For each 200-passage pool: CPU time (fastest round, ``time.process_time``) of the steps that the
benchmark's ``from texts`` and ``pairwise`` groups add up, the reference's pairwise loop for
scale, and the minor page faults per kernel call (fresh pages cost as much as the arithmetic at
this size; the kernel keeps its buffers for that reason). Prints a Markdown table to stdout.
"""

from __future__ import annotations

import argparse
import os
import resource
from collections.abc import Callable

import numpy as np

from assembler.contract.text import normalize_entry
from assembler.stages import neardup
from assembler.stages.neardup import bigram_codes, dice_matches, survivor_walk
from benchmarks.bench_neardup import DUP_RATES, LANGS, get_pool
from benchmarks.bounds import fastest
from tests.oracle.reference import reference_walk


def faults_per_call(fn: Callable[[], object], calls: int) -> float:
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(calls):
        fn()
    return (resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before) / calls


def pool_row(lang: str, dup_rate: float, rounds: int) -> str:
    """One table row: the pool's step times, the reference's, the kernel's page faults."""
    pool = get_pool(lang, 200, dup_rate)
    texts, codes, sets = pool.texts, pool.codes, pool.sets
    normalized = [normalize_entry(t) for t in texts]
    layout = neardup._pair_layout(np.concatenate(codes))
    assert layout is not None
    matrix = dice_matches(codes)
    runs: list[Callable[[], object]] = [
        lambda: [normalize_entry(t) for t in texts],
        lambda: [bigram_codes(t) for t in normalized],
        lambda: neardup._columns(layout, layout.size, 0, 0),
        lambda: dice_matches(codes),
        lambda: survivor_walk(matrix),
        lambda: survivor_walk(dice_matches(codes)),
        lambda: survivor_walk(dice_matches([bigram_codes(normalize_entry(t)) for t in texts])),
    ]
    cells = [f"{fastest(run, rounds) * 1e3:.3f}" for run in runs]
    cells.append(f"{fastest(lambda: reference_walk(sets), max(3, rounds // 20)) * 1e3:.2f}")
    cells.append(f"{faults_per_call(lambda: dice_matches(codes), 50):.1f}")
    return f"| {pool.label} | " + " | ".join(cells) + " |"


COLUMNS = (
    "normalize",
    "bigram_codes",
    "columns (hash join)",
    "dice_matches",
    "survivor_walk",
    "pairwise (dice+walk)",
    "from texts",
    "reference pairwise",
    "faults/call",
)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rounds", type=int, default=200)
    args = parser.parse_args()
    rounds: int = args.rounds
    print(f"load average {os.getloadavg()}, {rounds} rounds, CPU ms (fastest round)\n")
    print("| pool | " + " | ".join(COLUMNS) + " |")
    print("|---|" + "---:|" * len(COLUMNS))
    for lang in LANGS:
        for dup_rate in DUP_RATES:
            print(pool_row(lang, dup_rate, rounds))


if __name__ == "__main__":
    main()
