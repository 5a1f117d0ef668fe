"""Equal-budget evaluation of the selection policies on every committed data set.

Runs ``assembler evaluate`` (baseline, ``--assembly --policy contract``, ``--assembly --policy
quality`` and each quality ablation) for every set under ``data/eval/`` at three budgets, and
writes the tables to ``docs/policy-results.md``. The numbers in docs/policies.md and
docs/evaluation.md come from that file. Regenerate with::

    python scripts/policy_matrix.py            # all sets, about a few minutes on 2 cores
    python scripts/policy_matrix.py --sets brewery --out /tmp/results.md

The fact lag (``assembler.selection.quality.FACT_LAG``, swept with the statement test and the source guard
off, as it was chosen) and the statement share (``STATEMENT_SHARE``, swept with the guard off) were
chosen on the even-numbered cases only and checked on the odd-numbered ones::

    python scripts/policy_matrix.py --split even --no-ablations --lags=-1,0,1,2,3,4,6,8 --out docs/policy-lag-even.md
    python scripts/policy_matrix.py --split odd --no-ablations --lags=-1,0,1,2,3,4,6,8 --out docs/policy-lag-odd.md
    python scripts/policy_matrix.py --split even --no-ablations --shares=.1,.2,.3,.4,.5,.7 \
        --out docs/policy-share-even.md
    python scripts/policy_matrix.py --split odd --no-ablations --shares=.1,.2,.3,.4,.5,.7 \
        --out docs/policy-share-odd.md
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
    "quality-facts-last",
    "quality-no-statement-test",
    "quality-no-source-guard",
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


def evaluate(data: Path, mode: str, budget: list[str], out: Path, cases: Path | None = None) -> dict[str, float | None]:
    """One evaluate run; the aggregate values of METRICS (None where the artifact has none)."""
    cases = cases or data / "eval.jsonl"
    args = ["evaluate", "--eval", str(cases), "--lanes", str(data / "lanes.jsonl"), *budget]
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


def split_cases(data: Path, split: str, out: Path) -> Path:
    """The set's eval file with only its even- or odd-numbered cases (0-based, file order)."""
    header, *cases = data.joinpath("eval.jsonl").read_text(encoding="utf-8").splitlines()
    keep = [case for index, case in enumerate(cases) if index % 2 == (0 if split == "even" else 1)]
    out.write_text("\n".join([header, *keep]) + "\n", encoding="utf-8")
    return out


def register_sweep(lags: list[int], shares: list[float]) -> list[str]:
    """Add ``quality-lag-N`` (fact lag N, statement test and source guard off) and
    ``quality-share-X`` (statement share X, guard off) policies for a tuning run."""
    import dataclasses

    from assembler.selection import quality

    base = quality.QualityPolicy(guard=False)
    extra = [dataclasses.replace(base, name=f"quality-lag-{lag}", fact_lag=lag, statement_share=None) for lag in lags]
    extra += [dataclasses.replace(base, name=f"quality-share-{share:g}", statement_share=share) for share in shares]
    quality.QUALITY_POLICIES = (*quality.QUALITY_POLICIES, *extra)
    return [policy.name for policy in extra]


def run(
    sets: list[str],
    out_path: Path,
    ablations: bool,
    split: str = "all",
    lags: list[int] | None = None,
    shares: list[float] | None = None,
) -> None:
    extra = register_sweep(lags or [], shares or [])
    lines = [
        "# Policy results (generated)",
        "",
        "Written by `python scripts/policy_matrix.py`; do not edit by hand. Each cell is the aggregate",
        "of `assembler evaluate` over the set's cases at the same budget for every mode: `baseline` is",
        "the fixed-limit passage lane truncated client-side, the others assemble with that policy.",
        "▼ marks a value below the baseline's.",
        "",
    ]
    if split != "all":
        lines[-1:-1] = [f"Only the {split}-numbered cases of each set (0-based, in file order).", ""]
    with tempfile.TemporaryDirectory() as tmp:
        for name in sets:
            data = ROOT / "data" / "eval" / name
            cases = None if split == "all" else split_cases(data, split, Path(tmp) / f"{name}-{split}.jsonl")
            lines += [f"## {name}", ""]
            for label, budget in BUDGETS.items():
                modes = MODES + (ABLATIONS if ablations else []) + extra
                rows = {mode: evaluate(data, mode, budget, Path(tmp) / f"{name}-{mode}.json", cases) for mode in modes}
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
    parser.add_argument("--split", choices=("all", "even", "odd"), default="all", help="which cases of each set")
    parser.add_argument("--lags", default="", help="comma-separated fact lags to add as quality-lag-N modes")
    parser.add_argument("--shares", default="", help="comma-separated statement shares to add as quality-share-X modes")
    args = parser.parse_args()
    lags = [int(lag) for lag in args.lags.split(",") if lag]
    shares = [float(share) for share in args.shares.split(",") if share]
    run(args.sets.split(","), args.out, not args.no_ablations, args.split, lags, shares)


if __name__ == "__main__":
    _cli()
