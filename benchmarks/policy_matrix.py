"""Equal-budget evaluation of the selection policies on every committed data set.

Runs ``assembler evaluate`` (baseline, ``--assembly --policy contract``, ``--assembly --policy
quality`` and each quality ablation) for every set under ``data/eval/`` at three budgets, and
writes the tables to ``docs/policy-results.md``. The numbers in docs/policies.md and
docs/evaluation.md come from that file. Regenerate with::

    python benchmarks/policy_matrix.py            # all sets, about a few minutes on 2 cores
    python benchmarks/policy_matrix.py --sets brewery --out /tmp/results.md
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import tempfile
from pathlib import Path
from typing import Any

from assembler.cli import main

ROOT = Path(__file__).resolve().parent.parent
BUDGETS = {
    "tight (5 items, 1,500 tokens)": ["--max-items", "5", "--max-tokens", "1500"],
    "medium (10 items, 3,000 tokens)": ["--max-items", "10", "--max-tokens", "3000"],
    "default (40 items, 65,536 bytes, 4,000 tokens)": [
        "--max-items",
        "40",
        "--max-bytes",
        "65536",
        "--max-tokens",
        "4000",
    ],
}
MODES = ["baseline", "contract", "quality"]
ABLATIONS = [
    "quality-no-identity",
    "quality-no-passages-first",
    "quality-no-signs",
    "quality-no-words",
    "quality-with-tiers",
]
METRICS = [
    ("recall.recall_at_k", "recall@k"),
    ("recall.ndcg", "nDCG"),
    ("recall.mrr", "MRR"),
    ("citations.recall", "citation recall"),
    ("diversity.sources", "sources"),
    ("budget.omitted_rate", "omitted rate"),
]


def evaluate(data: Path, mode: str, budget: list[str], out: Path) -> dict[str, float | None]:
    """One evaluate run; the aggregate values of METRICS (None where the artifact has none)."""
    args = ["evaluate", "--eval", str(data / "eval.jsonl"), "--lanes", str(data / "lanes.jsonl"), *budget]
    if mode != "baseline":
        args += ["--assembly", "--policy", mode]
    with contextlib.redirect_stderr(io.StringIO()), contextlib.redirect_stdout(io.StringIO()):
        status = main([*args, "--out", str(out)])
    if status != 0:
        raise SystemExit(f"evaluate {data.name} {mode} exited {status}")
    metrics: dict[str, Any] = json.loads(out.read_text(encoding="utf-8"))["metrics"]
    values: dict[str, float | None] = {}
    for key, _ in METRICS:
        value = metrics.get(key)
        if isinstance(value, dict):
            value = value.get("mean", value.get("value"))
        values[key] = value if isinstance(value, (int, float)) else None
    return values


def table(rows: dict[str, dict[str, float | None]], baseline: dict[str, float | None]) -> list[str]:
    """A markdown table, one row per mode; a mark where a value is below the baseline's."""
    lines = ["| mode | " + " | ".join(name for _, name in METRICS) + " |", "|---" * (len(METRICS) + 1) + "|"]
    for mode, values in rows.items():
        cells = []
        for key, _ in METRICS:
            value, base = values[key], baseline[key]
            if value is None:
                cells.append("absent")
                continue
            lower_is_better = key == "budget.omitted_rate"
            below = mode != "baseline" and base is not None and value < base - 1e-9 and not lower_is_better
            cells.append(f"{value:.4f}" + (" ▼" if below else ""))
        lines.append(f"| {mode} | " + " | ".join(cells) + " |")
    return lines


def run(sets: list[str], out_path: Path, ablations: bool) -> None:
    lines = [
        "# Policy results (generated)",
        "",
        "Written by `python benchmarks/policy_matrix.py`; do not edit by hand. Each cell is the aggregate",
        "of `assembler evaluate` over the set's cases at the same budget for every mode: `baseline` is",
        "the fixed-limit passage lane truncated client-side, the others assemble with that policy.",
        "▼ marks a value below the baseline's.",
        "",
    ]
    with tempfile.TemporaryDirectory() as tmp:
        for name in sets:
            data = ROOT / "data" / "eval" / name
            lines += [f"## {name}", ""]
            for label, budget in BUDGETS.items():
                modes = MODES + (ABLATIONS if ablations else [])
                rows = {mode: evaluate(data, mode, budget, Path(tmp) / f"{name}-{mode}.json") for mode in modes}
                lines += [f"### {label}", "", *table(rows, rows["baseline"]), ""]
                print(f"{name} {label}: done", flush=True)
    out_path.write_text("\n".join(lines), encoding="utf-8")


def _cli() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument(
        "--sets", default=",".join(sorted(p.name for p in (ROOT / "data" / "eval").iterdir() if p.is_dir()))
    )
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "policy-results.md")
    parser.add_argument("--no-ablations", action="store_true")
    args = parser.parse_args()
    run(args.sets.split(","), args.out, not args.no_ablations)


if __name__ == "__main__":
    _cli()
