"""Near-duplicate passage suppression (contract section 6) with NumPy bigram matrices.

The verdict is the contract's exact set rule: normalized texts (``normalize_entry``), the set of
adjacent code-point pairs, Dice ``2.0 * shared / (|A| + |B|) >= 0.9`` (two empty sets match). The
kernel :func:`dice_matches` computes every pair's verdict of one pool at once; the survivor walk
(:func:`suppress`) then keeps each passage unless it matches a passage kept before it, exactly as
the contract's sequential rule does.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Callable, Sequence
from typing import Literal

import numpy as np
import numpy.typing as npt
import polars as pl

__all__ = [
    "NEAR_DUPLICATE_DICE_THRESHOLD",
    "bigram_codes",
    "dice_matches",
    "normalize_entry",
    "suppress",
    "survivor_walk",
]

NEAR_DUPLICATE_DICE_THRESHOLD = 0.9
_KATAKANA_TO_HIRAGANA = {code: code - 0x60 for code in range(0x30A1, 0x30F7)}


def _lower_each(text: str) -> str:
    # str.lower() applies the context-sensitive final-sigma rule; the contract lowercases every
    # code point on its own, which differs only where a capital sigma is present.
    return "".join(c.lower() for c in text) if "\u03a3" in text else text.lower()


def normalize_entry(text: str) -> str:
    """Taguru's ``normalize_entry``: lower, NFKC, lower, katakana folded to hiragana.

    >>> normalize_entry("\\uff21\\uff22 \\uff71\\uff72")
    'ab あい'
    """
    folded = _lower_each(unicodedata.normalize("NFKC", _lower_each(text)))
    return folded.translate(_KATAKANA_TO_HIRAGANA)


def bigram_codes(normalized: str) -> npt.NDArray[np.uint64]:
    """The sorted, distinct bigram set of a normalized text, each pair packed into one integer.

    A one-code-point text is the pair of that code point with itself; an empty text has no pair.
    """
    points = np.frombuffer(normalized.encode("utf-32-le"), dtype=np.uint32).astype(np.uint64)
    if points.size == 1:
        points = np.repeat(points, 2)
    codes = np.sort((points[:-1] << np.uint64(21)) | points[1:])
    return codes[np.r_[True, codes[1:] != codes[:-1]]] if codes.size else codes


def dice_matches(
    bigram_sets: Sequence[npt.NDArray[np.uint64]], method: Literal["auto", "dense", "sparse"] = "auto"
) -> npt.NDArray[np.bool_]:
    """The symmetric matrix of near-duplicate verdicts of one pool (diagonal True).

    ``shared`` counts come from the incidence matrix product, split by bigram frequency: bigrams
    found in many passages (the common letter pairs of English) go through a dense BLAS product,
    rare ones (most of Japanese) through co-occurrence counting. ``dense`` or ``sparse`` forces one
    path for everything. Both count exact integers, so the verdicts equal the set rule.
    """
    n = len(bigram_sets)
    sizes = np.array([codes.size for codes in bigram_sets], dtype=np.float64)
    rows = np.repeat(np.arange(n), sizes.astype(np.int64))
    codes = np.concatenate(bigram_sets) if n else np.empty(0, dtype=np.uint64)
    shared = _shared_counts(rows, codes, n, method)
    denom = sizes[:, None] + sizes[None, :]
    with np.errstate(divide="ignore", invalid="ignore"):
        matches: npt.NDArray[np.bool_] = (2.0 * shared / denom >= NEAR_DUPLICATE_DICE_THRESHOLD) | (denom == 0.0)
    matches[np.diag_indices(n)] = True
    return matches


def _pairs_within_groups(
    keys: npt.NDArray[np.uint64], members: npt.NDArray[np.int64]
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """Every ordered pair of members sharing a key (``keys`` sorted): ``(first_index, left, right)``.

    ``first_index`` is the position in ``keys`` where the pair's group starts.
    """
    starts = np.flatnonzero(np.r_[True, keys[1:] != keys[:-1]]) if keys.size else np.empty(0, dtype=np.int64)
    lengths = np.diff(np.r_[starts, keys.size])
    pair_counts = lengths * lengths
    group = np.repeat(np.arange(starts.size), pair_counts)
    offset = np.arange(int(pair_counts.sum())) - np.repeat(np.cumsum(pair_counts) - pair_counts, pair_counts)
    first = starts[group]
    return first, members[first + offset // lengths[group]], members[first + offset % lengths[group]]


_DENSE_DF = 8


def _shared_counts(
    rows: npt.NDArray[np.int64], codes: npt.NDArray[np.uint64], n: int, method: str
) -> npt.NDArray[np.float64]:
    order = np.argsort(codes, kind="stable")
    codes, rows = codes[order], rows[order]
    new_column = np.r_[True, codes[1:] != codes[:-1]] if codes.size else np.empty(0, dtype=np.bool_)
    columns = np.cumsum(new_column) - 1
    frequency = np.bincount(columns)[columns] if codes.size else np.empty(0, dtype=np.int64)
    dense = np.full(codes.size, method == "dense") if method != "auto" else frequency >= _DENSE_DF
    shared = np.zeros((n, n), dtype=np.float64)
    if dense.any():
        dense_columns = np.unique(columns[dense], return_inverse=True)[1]
        incidence = np.zeros((n, int(dense_columns.max()) + 1), dtype=np.float32)
        incidence[rows[dense], dense_columns] = 1.0
        # float32 sums of ones are exact below 2**24, far above any bigram count here.
        shared += incidence @ incidence.T
    sparse = ~dense
    if sparse.any():
        _, left, right = _pairs_within_groups(codes[sparse], rows[sparse])
        shared += np.bincount(left * n + right, minlength=n * n).reshape(n, n)
    return shared


def survivor_walk(matches: npt.NDArray[np.bool_]) -> npt.NDArray[np.int64]:
    """For passages in fused order: ``-1`` if kept, else the index of the first kept match."""
    n = matches.shape[0]
    duplicate_of = np.full(n, -1, dtype=np.int64)
    kept = np.zeros(n, dtype=np.bool_)
    for i in range(n):
        hits = np.flatnonzero(matches[i, :i] & kept[:i])
        if hits.size:
            duplicate_of[i] = hits[0]
        else:
            kept[i] = True
    return duplicate_of


def batch_bigram_codes(normalized: Sequence[str]) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.uint64]]:
    """The distinct bigrams of many normalized texts at once: ``(rows, codes)`` sorted by row, code.

    Same sets as :func:`bigram_codes` per text (rows index ``normalized``; fewer than 2**22 rows).
    """
    n = len(normalized)
    lengths = np.fromiter(map(len, normalized), dtype=np.int64, count=n)
    points = np.frombuffer("".join(normalized).encode("utf-32-le"), dtype=np.uint32).astype(np.uint64)
    owner = np.repeat(np.arange(n, dtype=np.uint64), lengths)
    inside = owner[1:] == owner[:-1]
    pair_rows = owner[:-1][inside]
    pair_codes = (points[:-1][inside] << np.uint64(21)) | points[1:][inside]
    singles = np.flatnonzero(lengths == 1)
    single_points = points[(np.cumsum(lengths) - lengths)[singles]]
    keys = np.concatenate(
        [
            (pair_rows << np.uint64(42)) | pair_codes,
            (singles.astype(np.uint64) << np.uint64(42)) | (single_points << np.uint64(21)) | single_points,
        ]
    )
    keys.sort()
    keys = keys[np.r_[True, keys[1:] != keys[:-1]]] if keys.size else keys
    return (keys >> np.uint64(42)).astype(np.int64), keys & np.uint64((1 << 42) - 1)


def _batched_small_pools(
    pool: npt.NDArray[np.int64],
    local: npt.NDArray[np.int64],
    sizes: npt.NDArray[np.int64],
    rows: npt.NDArray[np.int64],
    codes: npt.NDArray[np.uint64],
    width: int,
) -> npt.NDArray[np.int64]:
    """Survivor walks of many small pools at once; ``-1`` or the duplicated passage's local index.

    ``pool``/``local``/``sizes`` are per passage (its pool, its position there, its set size);
    ``rows``/``codes`` the distinct bigrams of those passages. Pools are padded to ``width``.
    """
    n_pools = int(pool.max()) + 1
    # Co-occurrence counting per (pool, bigram): every ordered pair of passages sharing it.
    keys = (pool[rows].astype(np.uint64) << np.uint64(42)) | codes
    order = np.argsort(keys, kind="stable")
    keys = keys[order]
    first, left, right = _pairs_within_groups(keys, local[rows[order]])
    owner = (keys[first] >> np.uint64(42)).astype(np.int64)
    cells = n_pools * width * width
    shared = np.bincount((owner * width + left) * width + right, minlength=cells).reshape(n_pools, width, width)
    set_size = np.zeros((n_pools, width), dtype=np.float64)
    valid = np.zeros((n_pools, width), dtype=np.bool_)
    set_size[pool, local] = sizes
    valid[pool, local] = True
    denom = set_size[:, :, None] + set_size[:, None, :]
    with np.errstate(divide="ignore", invalid="ignore"):
        matches = (2.0 * shared / denom >= NEAR_DUPLICATE_DICE_THRESHOLD) | (denom == 0.0)
    # The contract's walk, one position at a time across every pool.
    duplicate_of = np.full((n_pools, width), -1, dtype=np.int64)
    kept = np.zeros((n_pools, width), dtype=np.bool_)
    kept[:, 0] = valid[:, 0]
    for position in range(1, width):
        hits = matches[:, position, :position] & kept[:, :position]
        found = hits.any(axis=1)
        duplicate_of[:, position] = np.where(found, hits.argmax(axis=1), -1)
        kept[:, position] = valid[:, position] & ~found
    return duplicate_of[pool, local]


_SMALL_POOL = 32
# Passages per block: bounds the bigram arrays (tens of MB) and keeps packed keys below 2**22 rows.
_MAX_ROWS = 8192


def duplicate_positions(
    qs: npt.NDArray[np.int64], texts: Sequence[str], max_rows: int = _MAX_ROWS
) -> npt.NDArray[np.int64]:
    """For passages sorted by query then fused rank: ``-1`` if kept, else the row it duplicates.

    Small pools (up to 32 passages) are decided together, large ones one matrix per pool; pools
    are taken in blocks of about ``max_rows`` passages, which bounds memory by the block and keeps
    packed integer keys from overflowing.
    """
    n = len(texts)
    result = np.full(n, -1, dtype=np.int64)
    if n == 0:
        return result
    starts = np.flatnonzero(np.r_[True, qs[1:] != qs[:-1]])
    lengths = np.diff(np.r_[starts, n])
    pools_per_block = max(1, max_rows // int(lengths.max()))
    for first in range(0, starts.size, pools_per_block):
        b_starts, b_lengths = starts[first : first + pools_per_block], lengths[first : first + pools_per_block]
        lo, hi = int(b_starts[0]), int(b_starts[-1] + b_lengths[-1])
        rows, codes = batch_bigram_codes([normalize_entry(text) for text in texts[lo:hi]])
        sizes = np.bincount(rows, minlength=hi - lo)
        small = (b_lengths >= 2) & (b_lengths <= _SMALL_POOL)
        if small.any():
            pool_of = np.repeat(np.cumsum(small) - 1, b_lengths)
            local_of = np.arange(hi - lo) - np.repeat(b_starts - lo, b_lengths)
            in_small = np.repeat(small, b_lengths)
            keep_rows = in_small[rows]
            local_dup = _batched_small_pools(
                pool_of[in_small],
                local_of[in_small],
                sizes[in_small],
                np.cumsum(in_small)[rows[keep_rows]] - 1,
                codes[keep_rows],
                int(b_lengths[small].max()),
            )
            base = (np.arange(hi - lo) - local_of)[in_small]
            result[lo:hi][in_small] = np.where(local_dup < 0, -1, base + local_dup + lo)
        bounds = np.searchsorted(rows, np.arange(hi - lo + 1))
        for start, length in zip(b_starts[b_lengths > _SMALL_POOL], b_lengths[b_lengths > _SMALL_POOL], strict=True):
            local = start - lo
            sets = [codes[bounds[i] : bounds[i + 1]] for i in range(local, local + length)]
            walk = survivor_walk(dice_matches(sets))
            result[start : start + length] = np.where(walk < 0, -1, walk + start)
    return result


PositionRule = Callable[[npt.NDArray[np.int64], Sequence[str]], npt.NDArray[np.int64]]
"""Passages (query index, text) sorted by query then fused rank -> duplicated row or ``-1``."""


def suppress(fused: pl.DataFrame, rule: PositionRule = duplicate_positions) -> pl.DataFrame:
    """Mark near-duplicate passages of every query.

    Returns ``fused`` with ``duplicate_of`` (the survivor's ``candidate_id``, null when kept) and
    ``duplicate_of_json`` (its JSON string). Passages are compared in ``fused_rank`` order, by the
    contract's rule unless a policy passes its own ``rule``.
    """
    passages = (
        fused.filter(pl.col("kind") == "passage")
        .select("q", "fused_rank", "candidate_id", "id_json", "text")
        .sort("q", "fused_rank")
    )
    rows = rule(passages["q"].cast(pl.Int64).to_numpy(), passages["text"].to_list())
    target = pl.Series("target", rows).replace(-1, None)
    verdicts = passages.select(
        "q",
        "fused_rank",
        pl.col("candidate_id").gather(target).alias("duplicate_of"),
        pl.col("id_json").gather(target).alias("duplicate_of_json"),
    )
    return fused.join(verdicts, on=["q", "fused_rank"], how="left", maintain_order="left")
