"""Near-duplicate kernel: the vectorized verdicts against the reference pairwise loop.

Pools of 10, 50, 100 and 200 passages, English and Japanese texts of 150 to 600 characters
(``tests.oracle.pools.generate_texts``), without and with 20 % planted near-duplicates.

Three groups:

* ``from texts``: normalization, bigrams, verdicts and the survivor walk included (what one
  query's passages cost): ``near_duplicate_reference(texts)`` against ``duplicate_positions``,
  the pipeline's own entry point (``normalize_entries``, ``pair_codes``, the bitset kernel, the
  walk over matching pairs).
* ``pairwise``: bigram sets prepared beforehand, only the verdicts and the walk: the reference
  loop (Python sets, the size-bound shortcut, first kept match wins) against ``dice_matches``
  (``auto``, ``dense``, ``sparse``) + ``survivor_walk``.
* ``small pools from texts``: 1,000 queries of 5 passages each (English, Japanese), the typical
  pool: the reference per query against one ``duplicate_positions`` call over all of them (the
  pipeline decides small pools together).

``python -m benchmarks.bench_neardup`` prints where a 200-passage pool's time goes instead (each
step of ``duplicate_positions`` timed alone, the reference, page faults a call).

A rapidfuzz alternative runs in the first two groups, made exact: each text's sorted, distinct
bigram codes become a string of strictly increasing symbols, so the longest common subsequence
of two such strings is the size of the intersection, ``rapidfuzz.distance.Indel.distance`` is
``|A| + |B| - 2 |A ∩ B|``, and the contract's Dice rule follows from it in exact integers.
For contrast ``rapidfuzz.fuzz.ratio`` on the normalized texts (a character-sequence similarity,
not the contract's bigram-set Dice) also runs: its verdicts differ, and the number of pairs
where they differ is reported as ``pairs_differing`` — it is not an implementation of the rule.

Every exact implementation's verdicts are asserted equal to the reference's before timing. The
allocator is settled first (:func:`settle_allocator`).
"""

from __future__ import annotations

import argparse
import itertools
import math
import os
import resource
import time
from collections.abc import Callable

import numpy as np
import numpy.typing as npt
import pytest
from rapidfuzz import fuzz
from rapidfuzz.distance import Indel
from rapidfuzz.process import cdist

from assembler.contract.text import normalize_entries, normalize_entry
from assembler.stages import neardup
from assembler.stages.neardup import (
    NEAR_DUPLICATE_DICE_THRESHOLD,
    bigram_codes,
    dice_matches,
    duplicate_positions,
    pair_codes,
    survivor_walk,
)
from tests.oracle.pools import generate_texts
from tests.oracle.reference import bigrams, is_near_duplicate, near_duplicate_reference, reference_walk
from tests.oracle.reference import normalize_entry as reference_normalize

Codes = npt.NDArray[np.uint64]


def settle_allocator() -> None:
    """Time every implementation with the allocator as it is in a pipeline run.

    glibc gives a freed block above its mmap threshold (128 KiB at start) back to the system,
    and raises the threshold to the largest such block freed. A pipeline run frees chunk-sized
    arrays (megabytes) in its first block of pools; a process that only ever times one pool may
    never have, and then its few-hundred-KiB arrays come from fresh pages on every call (page
    faults costing as much as the work; how many depends on what ran before). Freeing one 16 MiB
    block first puts this process where the pipeline is, whatever ran before.
    """
    block = np.empty(16 << 20, dtype=np.uint8)
    del block


settle_allocator()
SIZES = (10, 50, 100, 200)
LANGS = ("en", "ja")
DUP_RATES = (0.0, 0.2)


def _seed(lang: str, n: int, dup_rate: float) -> int:
    return 10_000 * n + (7 if lang == "ja" else 3) * 100 + int(dup_rate * 10)


def _pool_id(lang: str, n: int, dup_rate: float) -> str:
    return f"{lang} n={n:>3} {'dup20%' if dup_rate else 'nodup'}"


# --- implementations ---------------------------------------------------------------------------


def vectorized_from_texts(texts: list[str]) -> npt.NDArray[np.int64]:
    """The pipeline's own entry point for one pool (``-1`` or the duplicated position)."""
    return duplicate_positions(np.zeros(len(texts), dtype=np.int64), texts)


def symbol_strings(codes: list[Codes]) -> list[str]:
    """Each sorted code set as a string of strictly increasing code points (surrogates skipped)."""
    if not codes:
        return []
    _, inverse = np.unique(np.concatenate(codes), return_inverse=True)
    points = inverse.astype(np.uint32)
    points += np.where(points >= 0xD800, 0x800, 0).astype(np.uint32)
    bounds = np.cumsum([0] + [c.size for c in codes])
    return [points[a:b].tobytes().decode("utf-32-le") for a, b in itertools.pairwise(bounds)]


def rapidfuzz_matches(codes: list[Codes]) -> npt.NDArray[np.bool_]:
    """The contract's verdict matrix from rapidfuzz's Indel distance over symbol strings."""
    strings = symbol_strings(codes)
    distance = cdist(strings, strings, scorer=Indel.distance, dtype=np.int32, workers=-1).astype(np.float64)
    sizes = np.array([c.size for c in codes], dtype=np.float64)
    denom = sizes[:, None] + sizes[None, :]
    shared = (denom - distance) / 2.0
    with np.errstate(divide="ignore", invalid="ignore"):
        matches = 2.0 * shared / denom >= NEAR_DUPLICATE_DICE_THRESHOLD
    matches |= denom == 0.0
    np.fill_diagonal(matches, True)
    return matches


def rapidfuzz_from_texts(texts: list[str]) -> npt.NDArray[np.int64]:
    return survivor_walk(rapidfuzz_matches([bigram_codes(normalize_entry(t)) for t in texts]))


def ratio_matches(normalized: list[str]) -> npt.NDArray[np.bool_]:
    """NOT the contract's rule: ``fuzz.ratio`` (character LCS similarity) >= 90."""
    scores = cdist(normalized, normalized, scorer=fuzz.ratio, dtype=np.float64, workers=-1)
    matches: npt.NDArray[np.bool_] = scores >= 100.0 * NEAR_DUPLICATE_DICE_THRESHOLD
    return matches


def ratio_from_texts(texts: list[str]) -> npt.NDArray[np.int64]:
    return survivor_walk(ratio_matches([normalize_entry(t) for t in texts]))


def reference_matrix(sets: list[set[str]]) -> npt.NDArray[np.bool_]:
    """Every pair's verdict by the reference rule (for the assertions, not timed)."""
    n = len(sets)
    out = np.ones((n, n), dtype=np.bool_)
    for i in range(n):
        for j in range(i + 1, n):
            out[i, j] = out[j, i] = is_near_duplicate(sets[i], sets[j])
    return out


def _as_walk(walk: npt.NDArray[np.int64]) -> list[int | None]:
    return [None if j < 0 else int(j) for j in walk]


# --- fixtures ----------------------------------------------------------------------------------


class Pool:
    """One pool's texts, prepared sets, the reference verdicts."""

    def __init__(self, lang: str, n: int, dup_rate: float) -> None:
        self.texts = generate_texts(n, seed=_seed(lang, n, dup_rate), lang=lang, dup_rate=dup_rate)
        self.sets = [bigrams(reference_normalize(t)) for t in self.texts]
        self.codes = [bigram_codes(normalize_entry(t)) for t in self.texts]
        self.walk = near_duplicate_reference(self.texts)
        self.matrix = reference_matrix(self.sets)
        self.label = _pool_id(lang, n, dup_rate)
        self.duplicates = sum(1 for j in self.walk if j is not None)

    def info(self) -> dict[str, object]:
        chars = [len(t) for t in self.texts]
        return {"duplicates": self.duplicates, "mean_chars": round(sum(chars) / len(chars))}


_POOLS: dict[tuple[str, int, float], Pool] = {}


def get_pool(lang: str, n: int, dup_rate: float) -> Pool:
    key = (lang, n, dup_rate)
    if key not in _POOLS:
        _POOLS[key] = Pool(lang, n, dup_rate)
    return _POOLS[key]


POOL_PARAMS = [
    pytest.param(lang, n, dup, id=f"{lang}-{n}-{'dup' if dup else 'nodup'}")
    for lang in LANGS
    for n in SIZES
    for dup in DUP_RATES
]


def _run(benchmark: object, group: str, impl: str, info: dict[str, object], fn: Callable[[], object]) -> None:
    bench = benchmark
    bench.group = group  # type: ignore[attr-defined]
    bench.extra_info.update({"impl": impl, **info})  # type: ignore[attr-defined]
    bench(fn)  # type: ignore[operator]


# --- from texts --------------------------------------------------------------------------------

TEXT_IMPLS = ("reference", "vectorized", "rapidfuzz-indel-exact", "rapidfuzz-ratio-NOT-exact")


@pytest.mark.parametrize("impl", TEXT_IMPLS)
@pytest.mark.parametrize(("lang", "n", "dup_rate"), POOL_PARAMS)
def test_kernel_from_texts(benchmark: object, lang: str, n: int, dup_rate: float, impl: str) -> None:
    pool = get_pool(lang, n, dup_rate)
    info = pool.info()
    texts = pool.texts
    fn: Callable[[], object]
    if impl == "reference":
        fn = lambda: near_duplicate_reference(texts)  # noqa: E731
    elif impl == "vectorized":
        assert _as_walk(vectorized_from_texts(texts)) == pool.walk
        fn = lambda: vectorized_from_texts(texts)  # noqa: E731
    elif impl == "rapidfuzz-indel-exact":
        assert np.array_equal(rapidfuzz_matches(pool.codes), pool.matrix)
        assert _as_walk(rapidfuzz_from_texts(texts)) == pool.walk
        fn = lambda: rapidfuzz_from_texts(texts)  # noqa: E731
    else:
        differing = ratio_matches([normalize_entry(t) for t in texts]) != pool.matrix
        info["pairs_differing"] = int(np.triu(differing, 1).sum())
        info["walk_differs"] = _as_walk(ratio_from_texts(texts)) != pool.walk
        fn = lambda: ratio_from_texts(texts)  # noqa: E731
    _run(benchmark, f"kernel from texts  {pool.label}", impl, info, fn)


# --- pairwise only -----------------------------------------------------------------------------

PAIR_IMPLS = ("reference", "vectorized-auto", "vectorized-dense", "vectorized-sparse", "rapidfuzz-indel-exact")


@pytest.mark.parametrize("impl", PAIR_IMPLS)
@pytest.mark.parametrize(("lang", "n", "dup_rate"), POOL_PARAMS)
def test_kernel_pairwise(benchmark: object, lang: str, n: int, dup_rate: float, impl: str) -> None:
    pool = get_pool(lang, n, dup_rate)
    sets, codes = pool.sets, pool.codes
    fn: Callable[[], object]
    if impl == "reference":
        assert reference_walk(sets) == pool.walk
        fn = lambda: reference_walk(sets)  # noqa: E731
    elif impl.startswith("vectorized-"):
        method = impl.removeprefix("vectorized-")
        assert np.array_equal(dice_matches(codes, method=method), pool.matrix)  # type: ignore[arg-type]
        fn = lambda: survivor_walk(dice_matches(codes, method=method))  # type: ignore[arg-type]  # noqa: E731
    else:
        assert np.array_equal(rapidfuzz_matches(codes), pool.matrix)
        fn = lambda: survivor_walk(rapidfuzz_matches(codes))  # noqa: E731
    _run(benchmark, f"kernel pairwise    {pool.label}", impl, pool.info(), fn)


# --- small pools from texts --------------------------------------------------------------------

SMALL_QUERIES = 1_000
SMALL_PASSAGES = 5


def small_pools(lang: str) -> list[list[str]]:
    """``SMALL_QUERIES`` pools of ``SMALL_PASSAGES`` texts, 20 % planted near-duplicates."""
    return [
        generate_texts(SMALL_PASSAGES, seed=_seed(lang, SMALL_PASSAGES, 0.2) + 7 * q, lang=lang, dup_rate=0.2)
        for q in range(SMALL_QUERIES)
    ]


@pytest.mark.parametrize("impl", ("reference", "vectorized"))
@pytest.mark.parametrize("lang", LANGS)
def test_small_pools_from_texts(benchmark: object, lang: str, impl: str) -> None:
    pools = small_pools(lang)
    fn: Callable[[], object]
    if impl == "reference":
        fn = lambda: [near_duplicate_reference(pool) for pool in pools]  # noqa: E731
    else:
        qs = np.repeat(np.arange(len(pools)), [len(pool) for pool in pools])
        texts = [text for pool in pools for text in pool]
        expected = [
            -1 if j is None else j + q * SMALL_PASSAGES
            for q, pool in enumerate(pools)
            for j in near_duplicate_reference(pool)
        ]
        assert duplicate_positions(qs, texts).tolist() == expected
        fn = lambda: duplicate_positions(qs, texts)  # noqa: E731
    info = {"queries": SMALL_QUERIES, "passages": SMALL_PASSAGES}
    _run(benchmark, f"small pools from texts  {lang} {SMALL_QUERIES}x{SMALL_PASSAGES}", impl, info, fn)


# --- where the time goes: python -m benchmarks.bench_neardup [--rounds N] --------------------


def _fastest(fn: Callable[[], object], rounds: int) -> float:
    """CPU seconds (all threads) of the fastest of ``rounds`` calls."""
    best = math.inf
    for _ in range(rounds):
        start = time.process_time()
        fn()
        best = min(best, time.process_time() - start)
    return best


def steps_row(lang: str, dup_rate: float, rounds: int) -> str:
    """One 200-passage pool: CPU ms of each step of ``duplicate_positions`` (each timed alone on
    the previous step's output), the whole call, the reference, their ratio, page faults a call."""
    pool = get_pool(lang, 200, dup_rate)
    texts = pool.texts
    qs = np.zeros(len(texts), dtype=np.int64)
    points, lengths = normalize_entries(texts)
    codes = pair_codes(points, lengths).copy()
    seed = int(lengths[: neardup._SEED_PASSAGES].sum())
    numbered = neardup._columns(codes, seed, min(len(texts), neardup._SEED_PASSAGES), 0)
    assert numbered is not None
    columns, count = numbered[0].copy(), numbered[1]
    steps: list[Callable[[], object]] = [
        lambda: normalize_entries(texts),
        lambda: pair_codes(points, lengths),
        lambda: neardup._columns(codes, seed, min(len(texts), neardup._SEED_PASSAGES), 0),
        lambda: neardup._counted_pairs(columns, count, lengths),
        lambda: duplicate_positions(qs, texts),
    ]
    cells = [_fastest(step, rounds) for step in steps]
    reference = _fastest(lambda: near_duplicate_reference(texts), max(3, rounds // 50))
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(50):
        duplicate_positions(qs, texts)
    faults = (resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before) / 50
    shown = " | ".join(f"{1e3 * cell:.3f}" for cell in cells)
    return f"| {pool.label} | {shown} | {1e3 * reference:.2f} | {reference / cells[-1]:.1f}× | {faults:.1f} |"


def main() -> None:
    parser = argparse.ArgumentParser(description="Where duplicate_positions spends a 200-passage pool (CPU ms).")
    parser.add_argument("--rounds", type=int, default=400)
    rounds: int = parser.parse_args().rounds
    print(f"load average {os.getloadavg()}, fastest of {rounds} rounds, CPU ms\n")
    print(
        "| pool | normalize_entries | pair_codes | hash join (`_columns`) | bitsets and bounds (`_counted_pairs`) "
        "| duplicate_positions (all) | reference | ratio | page faults a call |"
    )
    print("|---|" + "---:|" * 8)
    for lang in LANGS:
        for dup_rate in DUP_RATES:
            print(steps_row(lang, dup_rate, rounds))


if __name__ == "__main__":
    main()
