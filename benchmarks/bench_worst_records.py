"""Worst case per record: one hostile record per shape at growing sizes, under both policies.

Shapes (``SHAPES``; each record built deterministically, no data set):

* ``passages``: N distinct English-like passages of about 1,000 characters. The request asks
  for ``search_limit`` 200, the contract's ceiling, so the record keeps its first 200 (the
  passages and communities lanes are cut there): what grows is the parsing.
* ``passages-long``: 200 distinct English-like passages of N characters each (a narrow pool: a
  few hundred distinct bigrams, the bitset kernel's case).
* ``passages-wide``: 200 distinct passages of N random CJK characters each (thousands to
  millions of distinct bigrams: past the kernel's 4,096-bigram width, the general path).
* ``near-identical``: N passages of one 600-character text, each with one character changed
  (every pair a near-duplicate by the contract's rule; cut to 200 like ``passages``).
* ``citations``: N graph facts, each citing its own paragraph, N citation entries, and 200
  passages at half of those paragraphs (the citation joins and the quality policy's identity rule).
* ``activations``: N ``graph_activate`` entries, distinct subjects and labels, no citations.
* ``one-locator``: N graph facts all citing one paragraph, one citation entry and one passage
  there (every fact cites the same locator).
* ``huge-passage``: one passage of N characters of text beside 199 ordinary ones.

The budget is the contract's ceiling (1,000 items, 1 MiB, 10^9 tokens), the most any request
can ask to admit.

* ``pytest benchmarks/bench_worst_records.py --benchmark-only``: ``assemble_batch`` on the one
  record, one round per shape, size and policy (the package is checked before timing).
* ``python -m benchmarks.bench_worst_records [--shapes ...] [--sizes-scale 1.0] [--timeout 300]
  [--max-rss 6144]``: each (shape, size, policy) in a fresh subprocess (record building not
  timed), printing the wall seconds of ``assemble_batch`` and the subprocess's peak RSS (its own
  ``ru_maxrss``) as a markdown table; a run past ``--timeout`` seconds or ``--max-rss`` MiB
  (watched with psutil) is stopped and reported as such.
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import sys
import time
from typing import Any

import pytest

from assembler import assemble_batch
from benchmarks.harness import watched_child

SHAPES: dict[str, tuple[int, ...]] = {
    "passages": (200, 5_000, 20_000),
    "passages-long": (2_000, 20_000, 100_000),
    "passages-wide": (400, 4_000, 20_000),
    "near-identical": (200, 5_000, 20_000),
    "citations": (200, 5_000, 20_000),
    "activations": (200, 5_000, 20_000),
    "one-locator": (200, 5_000, 20_000),
    "huge-passage": (10_000, 100_000, 1_000_000),
}
POLICIES = ("contract", "quality")
MAX_BUDGET = {"max_items": 1000, "max_bytes": 1_048_576, "max_tokens": 1_000_000_000}
_WORDS = [
    "".join(random.Random(seed).choice("abcdefghijklmnopqrstuvwxyz") for _ in range(3 + seed % 7))
    for seed in range(5_000)
]


def _english(rng: random.Random, chars: int) -> str:
    words: list[str] = []
    length = 0
    while length < chars:
        word = rng.choice(_WORDS)
        words.append(word)
        length += len(word) + 1
    return " ".join(words)


def _cjk(rng: random.Random, chars: int) -> str:
    return "".join(chr(0x4E00 + rng.randrange(3_000)) for _ in range(chars))


def _passage(source: str, paragraph: int, text: str, rank: int) -> dict[str, Any]:
    score = 1.0 / rank
    return {
        "source": source,
        "paragraph": paragraph,
        "score": score,
        "text": text,
        "lanes": {"bm25": {"rank": rank, "score": score}},
    }


def _fact(i: int, source: str | None, paragraph: int = 0) -> dict[str, Any]:
    attributions = (
        []
        if source is None
        else [{"source": source, "weight": 1.0, "count": 1, "paragraph": paragraph, "section": None, "locator": None}]
    )
    return {
        "subject": f"s{i}",
        "label": f"l{i}",
        "object": f"object number {i} with a statement long enough to count as one",
        "weight": 1.0,
        "count": 1,
        "attributions": attributions,
    }


def _citation(source: str, paragraph: int, text: str) -> dict[str, Any]:
    return {
        "source": source,
        "paragraph": paragraph,
        "citation": {"text": text, "source": source, "section": None, "locator": None},
    }


def worst_record(shape: str, size: int) -> dict[str, Any]:
    """The one hostile record of ``shape`` at ``size`` (see the module docstring)."""
    rng = random.Random(f"{shape}-{size}")
    passages: list[dict[str, Any]] = []
    facts: list[dict[str, Any]] = []
    activations: list[dict[str, Any]] = []
    citations: list[dict[str, Any]] = []
    if shape == "passages":
        passages = [_passage(f"d{i}.md", 0, _english(rng, 1_000), i + 1) for i in range(size)]
    elif shape == "passages-long":
        passages = [_passage(f"d{i}.md", 0, _english(rng, size), i + 1) for i in range(200)]
    elif shape == "passages-wide":
        passages = [_passage(f"d{i}.md", 0, _cjk(rng, size), i + 1) for i in range(200)]
    elif shape == "near-identical":
        base = _english(rng, 600)
        for i in range(size):
            at = rng.randrange(len(base))
            passages.append(_passage(f"d{i}.md", 0, base[:at] + chr(0x41 + i % 26) + base[at + 1 :], i + 1))
    elif shape == "citations":
        facts = [_fact(i, f"d{i}.md") for i in range(size)]
        citations = [_citation(f"d{i}.md", 0, _english(rng, 200)) for i in range(size)]
        passages = [_passage(f"d{2 * i}.md", 0, _english(rng, 200), i + 1) for i in range(min(200, size // 2))]
    elif shape == "activations":
        activations = [{"strength": 0.5, "path": [f"s{i}"], "association": _fact(i, None)} for i in range(size)]
    elif shape == "one-locator":
        facts = [_fact(i, "a.md") for i in range(size)]
        citations = [_citation("a.md", 0, _english(rng, 200))]
        passages = [_passage("a.md", 0, _english(rng, 200), 1)]
    elif shape == "huge-passage":
        passages = [_passage("huge.md", 0, _english(rng, size), 1)]
        passages += [_passage(f"d{i}.md", 0, _english(rng, 500), i + 2) for i in range(199)]
    else:
        raise ValueError(f"unknown shape {shape!r}")
    return {
        "query_id": f"{shape}-{size}",
        "context": "ctx",
        "request": {"origins": ["s0"], "budget": MAX_BUDGET, "search_limit": 200, "text_fallback_query": "q"},
        "lanes": {
            "graph_query": facts,
            "graph_activate": activations,
            "passages": passages,
            "communities": None,
            "citations": citations,
        },
    }


def assemble_one(record: dict[str, Any], policy: str) -> dict[str, Any]:
    """The package of the one record under ``policy``, parsed."""
    package: dict[str, Any] = json.loads(assemble_batch([record], policy=policy).packages[0])
    return package


def check(package: dict[str, Any], record: dict[str, Any]) -> None:
    """Every entry is accounted for: admitted, or omitted (exact dedup aside), within the budget."""
    lanes = record["lanes"]
    entries = len(lanes["graph_query"]) + len(lanes["graph_activate"]) + min(200, len(lanes["passages"]))
    assert 0 < len(package["items"]) <= MAX_BUDGET["max_items"]
    assert len(package["items"]) + package["omitted_total"] <= entries


CASES = [(shape, size) for shape, sizes in SHAPES.items() for size in sizes[:2]]


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize(("shape", "size"), CASES)
def test_one_record(benchmark: Any, shape: str, size: int, policy: str) -> None:
    record = worst_record(shape, size)
    check(assemble_one(record, policy), record)
    benchmark.group = f"worst record: {shape}, {size}"
    benchmark.extra_info["impl"] = policy
    benchmark.pedantic(assemble_one, args=(record, policy), rounds=1, iterations=1)


def _child(shape: str, size: int, policy: str) -> None:
    record = worst_record(shape, size)
    start = time.perf_counter()
    package = assemble_one(record, policy)
    elapsed = time.perf_counter() - start
    check(package, record)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux
    print(json.dumps({"seconds": elapsed, "peak_rss_MiB": peak, "json_MiB": len(json.dumps(record)) / 2**20}))


def _measure(shape: str, size: int, policy: str, timeout: float, max_rss_mib: float) -> tuple[str, str, str]:
    """(wall seconds, peak RSS MiB, record MiB) of one fresh subprocess, or why there is none."""
    command = [sys.executable, "-m", "benchmarks.bench_worst_records", "--child", shape, str(size), policy]
    result, why, peak = watched_child(command, timeout, max_rss_mib)
    if result is None:
        return why, peak, ""
    return f"{result['seconds']:.2f}", f"{result['peak_rss_MiB']:.0f}", f"{result['json_MiB']:.1f}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--shapes", default=",".join(SHAPES), help="comma-separated shapes (default: all)")
    parser.add_argument("--sizes", help="comma-separated sizes for every shape (default: each shape's own)")
    parser.add_argument("--policies", default=",".join(POLICIES))
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds per run before it is stopped")
    parser.add_argument("--max-rss", type=float, default=6144.0, help="MiB of RSS per run before it is stopped")
    parser.add_argument("--child", nargs=3, metavar=("SHAPE", "SIZE", "POLICY"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        _child(args.child[0], int(args.child[1]), args.child[2])
        return 0
    print("| shape | size | record MiB | policy | seconds | peak RSS (MiB) |")
    print("|---|---:|---:|---|---:|---:|")
    for shape in args.shapes.split(","):
        sizes = [int(n) for n in args.sizes.split(",")] if args.sizes else SHAPES[shape]
        for size in sizes:
            for policy in args.policies.split(","):
                seconds, peak, mib = _measure(shape, size, policy, args.timeout, args.max_rss)
                print(f"| {shape} | {size:,} | {mib} | {policy} | {seconds} | {peak} |", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
