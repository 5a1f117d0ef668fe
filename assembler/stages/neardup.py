"""Near-duplicate passage suppression (contract section 6) with NumPy bigram matrices.

The verdict is the contract's exact set rule: normalized texts (``normalize_entry``), the set of
adjacent code-point pairs, Dice ``2.0 * shared / (|A| + |B|) >= 0.9`` (two empty sets match). The
kernel :func:`dice_matches` computes every pair's verdict of one pool at once; the survivor walk
(:func:`suppress`) then keeps each passage unless it matches a passage kept before it, exactly as
the contract's sequential rule does.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any, Literal

import numpy as np
import numpy.typing as npt
import polars as pl

from assembler.contract.text import normalize_entry

__all__ = [
    "NEAR_DUPLICATE_DICE_THRESHOLD",
    "PairTest",
    "bigram_codes",
    "blocked_walk",
    "dice_matches",
    "pool_matches",
    "pool_walk",
    "suppress",
    "survivor_walk",
]

NEAR_DUPLICATE_DICE_THRESHOLD = 0.9


def bigram_codes(normalized: str) -> npt.NDArray[np.uint64]:
    """The sorted, distinct bigram set of a normalized text, each pair packed into one integer.

    A one-code-point text is the pair of that code point with itself; an empty text has no pair.
    """
    points = np.frombuffer(normalized.encode("utf-32-le"), dtype=np.uint32).astype(np.uint64)
    if points.size < 2:
        return (points << np.uint64(21)) | points
    codes = points[:-1] << np.uint64(21)
    codes |= points[1:]
    codes.sort()
    distinct = np.empty(codes.size, dtype=np.bool_)
    distinct[0] = True
    np.not_equal(codes[1:], codes[:-1], out=distinct[1:])
    return codes[distinct]


def dice_matches(
    bigram_sets: Sequence[npt.NDArray[np.uint64]], method: Literal["auto", "dense", "sparse"] = "auto"
) -> npt.NDArray[np.bool_]:
    """The symmetric matrix of near-duplicate verdicts of one pool (diagonal True).

    ``auto`` (:func:`_bitset_matches`): each set becomes a bitset over the pool's distinct bigrams;
    shared counts taken over the most telling words first bound every pair's Dice from above, so
    most pairs are settled after a word or two and only the rest are counted in full. ``dense``
    (a BLAS product of the incidence matrix) and ``sparse`` (co-occurrence counting) count every
    pair. All three count exact integers and apply the contract's rule, so the verdicts are equal.
    """
    n = len(bigram_sets)
    sizes = np.fromiter(map(len, bigram_sets), dtype=np.int64, count=n)
    if method == "auto" and 0 < n <= _BITSET_MAX_PASSAGES and sizes.max() <= _BITSET_MAX_SET:
        try:
            codes = np.concatenate(bigram_sets, out=_scratch(10, int(sizes.sum()), np.uint64))
        except TypeError:  # not uint64 codes: the general path below
            codes = None
        verdicts = None if codes is None else _bitset_matches(codes, sizes)
        if verdicts is not None:
            return verdicts
    codes = np.concatenate(bigram_sets) if n else np.empty(0, dtype=np.uint64)
    rows = np.repeat(np.arange(n), sizes)
    shared = _shared_counts(rows, codes, n, method)
    denom = (sizes[:, None] + sizes[None, :]).astype(np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        matches: npt.NDArray[np.bool_] = (2.0 * shared / denom >= NEAR_DUPLICATE_DICE_THRESHOLD) | (denom == 0.0)
    matches[np.diag_indices(n)] = True
    return matches


# An odd 64-bit multiplier (Fibonacci hashing) for the hash join of :func:`_token_slots`, and
# the empty-slot mark (codes are below 2**42).
_HASH_MULTIPLIER = np.uint64(0x9E3779B97F4A7C15)
_NO_CODE = np.uint64(2**64 - 1)
_SCRATCH = threading.local()
_SCRATCH_MAX_BYTES = 1 << 23
_ARANGE: list[npt.NDArray[np.intp]] = [np.arange(1 << 16)]


def _scratch(slot: int, size: int, dtype: type[np.generic]) -> npt.NDArray[Any]:
    """A per-thread buffer reused across calls (``slot`` names it; contents undefined).

    The kernel's arrays of one pool are a few hundred kilobytes: allocated afresh on every call,
    they can come from fresh pages, whose faults cost as much as the arithmetic.
    """
    itemsize = np.dtype(dtype).itemsize
    nbytes = size * itemsize
    if nbytes > _SCRATCH_MAX_BYTES:
        return np.empty(size, dtype=dtype)
    buffers: dict[int, npt.NDArray[np.uint8]] = _SCRATCH.__dict__.setdefault("buffers", {})
    buffer = buffers.get(slot)
    if buffer is None or buffer.size < nbytes:
        buffer = buffers[slot] = np.empty(max(nbytes, 1 << 12), dtype=np.uint8)
    return buffer[:nbytes].view(dtype)


def _arange(n: int) -> npt.NDArray[np.intp]:
    """``np.arange(n)``, a read-only view of one shared array."""
    if _ARANGE[0].size < n:
        grown = np.arange(max(n, 2 * _ARANGE[0].size))
        grown.flags.writeable = False
        _ARANGE[0] = grown
    return _ARANGE[0][:n]


def _token_slots(codes: npt.NDArray[np.uint64]) -> tuple[npt.NDArray[np.intp], npt.NDArray[np.intp]]:
    """A slot per element, equal codes equal slots, distinct codes distinct slots, without sorting.

    A hash join: every element writes its code into its hash slot and reads back the code left
    there (which writer is left does not matter); a slot whose code is the element's own is that
    code's. Codes that lost their slot to another code (all their elements did) are few and get
    slots past the table, numbered by a sort. Returns the slots (scratch slot 0) and the used
    slots in increasing order (one per distinct code).
    """
    n = codes.size
    bits = max(8, (n - 1).bit_length())
    hashed = np.multiply(codes, _HASH_MULTIPLIER, out=_scratch(0, n, np.uint64))
    hashed >>= np.uint64(64 - bits)
    slots = hashed.view(np.intp)
    table = _scratch(1, 1 << bits, np.uint64)
    table.fill(_NO_CODE)
    table[slots] = codes
    lost = np.flatnonzero(np.not_equal(table.take(slots, out=_scratch(2, n, np.uint64), mode="clip"), codes))
    taken = np.flatnonzero(table != _NO_CODE)
    if lost.size:
        distinct, inverse = np.unique(codes.take(lost), return_inverse=True)
        slots[lost] = (1 << bits) + inverse
        taken = np.concatenate((taken, (1 << bits) + _arange(distinct.size)))
    return slots, taken


_UPPER_TRIANGLES: dict[int, npt.NDArray[np.bool_]] = {}


def _upper_triangle(n: int) -> npt.NDArray[np.bool_]:
    """The strict upper triangle mask of an ``n`` by ``n`` matrix (cached, read-only)."""
    mask = _UPPER_TRIANGLES.get(n)
    if mask is None:
        mask = np.triu(np.ones((n, n), dtype=np.bool_), 1)
        mask.flags.writeable = False
        if n <= 1024:
            _UPPER_TRIANGLES[n] = mask
    return mask


# Candidate pairs left after the first word are counted word by word (dropping the pairs whose
# bound fails) until this few remain or ``_BOUND_WORDS`` words are done, then over every
# remaining word at once.
_FEW_PAIRS = 128
_BOUND_WORDS = 4
_SAMPLE_PASSAGES = 64  # at most 255: the column order radix-sorts uint8 keys
# Beyond these (pool size, distinct bigrams of the pool, bigrams of a passage) the bitsets and
# the pair matrices outgrow the co-occurrence split of ``_shared_counts``, which takes over.
_BITSET_MAX_PASSAGES = 2048
_BITSET_MAX_WIDTH = 4096
_BITSET_MAX_SET = 1 << 24


def _bitset_matches(codes: npt.NDArray[np.uint64], sizes: npt.NDArray[np.int64]) -> npt.NDArray[np.bool_] | None:
    """Verdict matrix from exact shared counts, most pairs ruled out by an upper bound first.

    For any subset ``C`` of the bigrams, ``shared <= shared_C + min(|A| - |A_C|, |B| - |B_C|)``.
    Columns are ordered so that the first bitset words hold the bigrams found in about half the
    passages (the ones that tell passages apart). A pair whose bound fails the contract's rule
    cannot match: ``2.0 * s / d >= 0.9`` holds exactly when ``20 * s >= 9 * d`` for integers
    ``0 <= s`` and ``0 < d < 2**40`` (a quotient off 9/10 is off by at least ``1 / (10 d)``, far
    more than the rounding; tests/stages/test_neardup.py checks every ``d`` below 2**22), so the bounds
    are compared in integers. Pairs that survive every bound are counted over all
    words and judged by the contract's own float expression. ``None`` when the pool has more
    distinct bigrams than ``_BITSET_MAX_WIDTH``.

    ``codes`` holds each passage's bigrams in turn, ``sizes`` how many; a passage may repeat a
    bigram (its set is what the bitset holds, its set size the bitset's popcount).
    """
    n = sizes.size
    matches = np.zeros((n, n), dtype=np.bool_)
    matches[np.diag_indices(n)] = True
    empty = sizes == 0
    if empty.sum() > 1:
        matches[np.ix_(empty, empty)] = True  # both empty: the contract counts it a match
    if n < 2 or codes.size == 0:
        return matches
    total = codes.size
    slots, taken = _token_slots(codes)  # scratch slot 0
    n_tokens = taken.size
    width = -(-n_tokens // 64) * 64
    if width > _BITSET_MAX_WIDTH:
        return None
    # Columns: telling bigrams (found in about half the passages) first, as seen in the first
    # passages; the order only decides how soon pairs are ruled out, never a verdict.
    column = _scratch(1, int(taken[-1]) + 1, np.intp)
    column[taken] = _arange(n_tokens)
    sample = min(n, _SAMPLE_PASSAGES)
    seen = column.take(slots[: int(sizes[:sample].sum())])
    frequency = np.bincount(seen, minlength=n_tokens)
    telling = np.abs(2 * frequency - sample).astype(np.uint8)  # 0 .. 64: a radix sort
    column[taken.take(np.argsort(telling, kind="stable"))] = _arange(n_tokens)
    # Flat incidence positions: row * width + column, the row offsets by a running sum.
    flat = _scratch(3, total, np.intp)
    flat.fill(0)
    starts = np.cumsum(sizes)[:-1]
    if sizes.all():
        flat[starts] = width
    else:
        np.add.at(flat, starts[starts < total], width)  # empty passages share a start
    np.cumsum(flat, out=flat)
    flat += column.take(slots, out=_scratch(2, total, np.intp), mode="clip")
    incidence = _scratch(4, n * width, np.bool_)
    incidence.fill(False)
    incidence[flat] = True
    words = np.ascontiguousarray(np.packbits(incidence.reshape(n, width), axis=1, bitorder="little").view(np.uint64).T)
    sizes = np.bitwise_count(words).sum(axis=0, dtype=np.int64)  # set sizes: repeats counted once
    # Passages in order of most bigrams beyond the first word: then min(outside_i, outside_j) is
    # outside_j for i < j, and the first bound is one comparison per pair (upper triangle).
    kind: type[np.signedinteger[Any]] = np.int16 if int(sizes.max()) < 1600 else np.int32
    order = np.argsort(np.bitwise_count(words[0]) - sizes, kind="stable")
    words = words.take(order, axis=1)
    size: npt.NDArray[np.signedinteger[Any]] = sizes.take(order).astype(kind)
    # outside[w, i]: 20 times passage i's bigrams beyond word w; need: 9 * |A|.
    outside: npt.NDArray[np.signedinteger[Any]] = 20 * (size - np.cumsum(np.bitwise_count(words), axis=0, dtype=kind))
    need: npt.NDArray[np.signedinteger[Any]] = 9 * size
    word = words[0]
    pair_and = np.bitwise_and(word[:, None], word[None, :], out=_scratch(5, n * n, np.uint64).reshape(n, n))
    first = np.bitwise_count(pair_and, out=_scratch(6, n * n, np.uint8).reshape(n, n))
    bound = np.multiply(first, 20, out=_scratch(7, n * n, kind).reshape(n, n), dtype=kind)
    other = np.add(need[:, None], need[None, :] - outside[0][None, :], out=_scratch(8, n * n, kind).reshape(n, n))
    possible = np.greater_equal(bound, other, out=_scratch(9, n * n, np.bool_).reshape(n, n))
    possible &= _upper_triangle(n)
    pairs = np.flatnonzero(possible)
    left, right = np.divmod(pairs, n)
    counted = first.reshape(-1).take(pairs).astype(np.int32)
    w = 1
    while w < min(words.shape[0], _BOUND_WORDS) and left.size > _FEW_PAIRS:
        counted += np.bitwise_count(words[w].take(left) & words[w].take(right))
        bound = 20 * counted + np.minimum(outside[w].take(left), outside[w].take(right))
        keep = np.flatnonzero(bound >= need.take(left) + need.take(right))
        left, right, counted = left.take(keep), right.take(keep), counted.take(keep)
        w += 1
    if left.size:
        if w < words.shape[0]:
            rest = words[w:]
            both = np.bitwise_and(rest.take(left, axis=1), rest.take(right, axis=1))
            counted = counted + np.bitwise_count(both).sum(axis=0, dtype=np.int32)
        denom = size.take(left).astype(np.float64) + size.take(right)
        with np.errstate(divide="ignore", invalid="ignore"):  # two empty sets: already a match
            verdict = 2.0 * counted / denom >= NEAR_DUPLICATE_DICE_THRESHOLD
        left, right = order.take(left[verdict]), order.take(right[verdict])
        matches[left, right] = True
        matches[right, left] = True
    return matches


def pool_matches(normalized: Sequence[str]) -> npt.NDArray[np.bool_]:
    """:func:`dice_matches` of one pool's normalized texts, the bigrams taken all at once.

    No per-text set: every text's bigrams (repeats included) go to the bitset kernel, which
    keeps sets. Falls back to :func:`dice_matches` over :func:`bigram_codes` where the kernel does
    not apply (a pool too large or too varied for bitsets); that fallback holds ``n x n``
    matrices, so the pipeline walks such pools with :func:`blocked_walk` instead (:func:`pool_walk`).
    """
    verdicts = _pool_bitset_matches(normalized)
    if verdicts is not None:
        return verdicts
    return dice_matches([bigram_codes(text) for text in normalized])


def _pool_bitset_matches(normalized: Sequence[str]) -> npt.NDArray[np.bool_] | None:
    """The bitset kernel's verdict matrix of one pool, or None where it does not apply."""
    n = len(normalized)
    lengths = np.fromiter(map(len, normalized), dtype=np.int64, count=n)
    counts = np.maximum(lengths - 1, 0) + (lengths == 1)  # a one-code-point text: one pair with itself
    if not (0 < n <= _BITSET_MAX_PASSAGES and counts.max() <= _BITSET_MAX_SET):
        return None
    total = int(lengths.sum())
    points = _scratch(11, total, np.uint64)  # reused buffers: fresh pages cost as much as the work
    points[:] = np.frombuffer("".join(normalized).encode("utf-32-le"), dtype=np.uint32)
    pairs = np.left_shift(points, np.uint64(21), out=_scratch(12, total, np.uint64))
    pairs[:-1] |= points[1:]
    starts = np.cumsum(lengths) - lengths
    single = starts[lengths == 1]
    pairs[single] = (points[single] << np.uint64(21)) | points[single]
    keep = _scratch(13, total, np.bool_)
    keep.fill(True)
    keep[(starts + lengths - 1)[lengths > 1]] = False  # a text's last code point starts no pair
    codes = np.compress(keep, pairs, out=_scratch(14, int(counts.sum()), np.uint64))
    return _bitset_matches(codes, counts)


PairTest = Callable[[int, int], bool]
"""A policy's extra condition on a pair of positions of one pool ``(later, earlier)``: a pair
is a near-duplicate only if the contract's rule holds *and* this returns True."""


def pool_walk(normalized: Sequence[str], also: PairTest | None = None) -> npt.NDArray[np.int64]:
    """:func:`survivor_walk` of one pool: the bitset kernel's matrix where it applies (at most
    2,048 passages, 4,096 distinct bigrams), else :func:`blocked_walk` (no ``n x n`` matrix)."""
    matches = _pool_bitset_matches(normalized) if len(normalized) <= _BITSET_MAX_PASSAGES else None
    if matches is not None:
        return survivor_walk(matches, also)
    return blocked_walk(normalized, also)


# Memory bounds of :func:`blocked_walk`: the dense incidence matrix (float32, passages x the
# most frequent bigrams), each block's count matrix (float64, block rows x candidates), and each
# piece of co-occurrence pairs of the rarer bigrams.
_WALK_DENSE_BYTES = 1 << 26
_WALK_BLOCK_BYTES = 1 << 25
_WALK_PAIRS = 1 << 21


def blocked_walk(normalized: Sequence[str], also: PairTest | None = None) -> npt.NDArray[np.int64]:
    """The contract's survivor walk of one pool in blocks of passages, memory bounded.

    The same verdicts as :func:`survivor_walk` over :func:`dice_matches` (exact shared counts,
    the contract's float expression), without any ``n x n`` matrix: passages are taken in blocks
    of rows, and a block's rows are compared only with the passages kept before the block and
    with each other (a dropped passage never decides a later one), then walked in order. Shared
    counts: a float32 product of the incidence over the most frequent bigrams (exact: counts stay
    far below 2**24) plus co-occurrence counting over the rest, in bounded pieces.

    Memory: ``O(n * dense + block * n)`` with both terms capped (about 64 MiB and 32 MiB) plus the
    pool's bigrams; time ``O(n * kept * dense)`` for the product (quadratic in the passages when
    most are kept, linear when most are duplicates) plus the rarer bigrams' co-occurrences.
    """
    n = len(normalized)
    duplicate_of = np.full(n, -1, dtype=np.int64)
    if n < 2:
        return duplicate_of
    rows, codes = batch_bigram_codes(normalized)
    sizes = np.bincount(rows, minlength=n).astype(np.float64)
    _, columns, frequency = np.unique(codes, return_inverse=True, return_counts=True)
    del codes
    # Dense columns: bigrams in at least _DENSE_DF passages, the most frequent first, as many as fit.
    dense_columns = np.flatnonzero(frequency >= _DENSE_DF)
    most = max(1, _WALK_DENSE_BYTES // (4 * n))
    if dense_columns.size > most:
        dense_columns = dense_columns[np.argsort(-frequency[dense_columns], kind="stable")[:most]]
    dense_index = np.full(frequency.size, -1, dtype=np.int64)
    dense_index[dense_columns] = np.arange(dense_columns.size)
    entry_dense = dense_index[columns]
    is_dense = entry_dense >= 0
    incidence = np.zeros((n, max(1, dense_columns.size)), dtype=np.float32)
    incidence[rows[is_dense], entry_dense[is_dense]] = 1.0
    # The rarer bigrams: entries by row (``rows`` is sorted) and, per column, the rows holding it.
    sparse_rows, sparse_columns = rows[~is_dense], columns[~is_dense]
    del rows, columns, entry_dense, is_dense
    by_column = np.argsort(sparse_columns, kind="stable")
    column_rows = sparse_rows[by_column]
    column_start = np.r_[0, np.cumsum(np.bincount(sparse_columns, minlength=frequency.size))]
    row_start = np.r_[0, np.cumsum(np.bincount(sparse_rows, minlength=n))]
    del by_column
    kept = np.zeros(n, dtype=np.bool_)
    position = np.full(n, -1, dtype=np.int64)
    block = max(1, min(n, _WALK_BLOCK_BYTES // (8 * n)))
    for lo in range(0, n, block):
        hi = min(n, lo + block)
        earlier = np.flatnonzero(kept[:lo])
        candidates = np.concatenate((earlier, np.arange(lo, hi)))
        width = candidates.size
        position[candidates] = np.arange(width)
        if 2 * width < hi:  # few kept: gather them
            shared = (incidence[lo:hi] @ incidence[candidates].T).astype(np.float64)
        else:  # most kept: one product over every passage so far, then the kept columns
            shared = (incidence[lo:hi] @ incidence[:hi].T).take(candidates, axis=1).astype(np.float64)
        _add_rare_counts(shared, lo, hi, position, sparse_rows, sparse_columns, row_start, column_rows, column_start)
        position[candidates] = -1
        denom = sizes[lo:hi, None] + sizes.take(candidates)[None, :]
        with np.errstate(divide="ignore", invalid="ignore"):
            matches = (2.0 * shared / denom >= NEAR_DUPLICATE_DICE_THRESHOLD) | (denom == 0.0)
        del shared, denom
        before = earlier.size
        for i in range(lo, hi):
            hits = candidates.take(np.flatnonzero(matches[i - lo, : before + i - lo]))
            hits = hits[kept.take(hits)]
            found = -1
            for j in hits.tolist() if also is not None else hits[:1].tolist():
                if also is None or also(i, j):
                    found = j
                    break
            if found < 0:
                kept[i] = True
            else:
                duplicate_of[i] = found
    return duplicate_of


def _add_rare_counts(
    shared: npt.NDArray[np.float64],
    lo: int,
    hi: int,
    position: npt.NDArray[np.int64],
    sparse_rows: npt.NDArray[np.int64],
    sparse_columns: npt.NDArray[np.int64],
    row_start: npt.NDArray[np.int64],
    column_rows: npt.NDArray[np.int64],
    column_start: npt.NDArray[np.int64],
) -> None:
    """Add to ``shared`` (rows ``lo:hi`` x candidates) the co-occurrences over the rarer bigrams,
    at most ``_WALK_PAIRS`` pairs at a time (a bigram row's partners are its column's rows)."""
    width = shared.shape[1]
    entries = np.arange(int(row_start[lo]), int(row_start[hi]))
    if entries.size == 0:
        return
    partners = column_start.take(sparse_columns.take(entries) + 1) - column_start.take(sparse_columns.take(entries))
    ends = np.cumsum(partners)
    flat = shared.reshape(-1)
    first = 0
    while first < entries.size:
        base = int(ends[first - 1]) if first else 0
        last = max(first + 1, int(np.searchsorted(ends, base + _WALK_PAIRS, side="right")))
        piece, counts = entries[first:last], partners[first:last]
        total = int(counts.sum())
        starts = np.repeat(column_start.take(sparse_columns.take(piece)), counts)
        offsets = np.arange(total) - np.repeat(np.cumsum(counts) - counts, counts)
        right = position.take(column_rows.take(starts + offsets))
        left = np.repeat(sparse_rows.take(piece) - lo, counts)
        inside = right >= 0
        flat += np.bincount(left[inside] * width + right[inside], minlength=flat.size)
        first = last


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


def survivor_walk(matches: npt.NDArray[np.bool_], also: PairTest | None = None) -> npt.NDArray[np.int64]:
    """For passages in fused order: ``-1`` if kept, else the index of the first kept match.

    ``also`` (a policy's extra condition) is asked only about pairs the matrix already matches,
    a later passage against the passages kept before it, in order, until one holds.
    """
    n = matches.shape[0]
    # Strictly lower triangle (earlier passages only), row by row.
    pairs = np.flatnonzero(np.logical_and(matches, _upper_triangle(n).T))
    if pairs.size > 4 * n:
        return _survivor_walk_rows(matches, also)
    later, earlier = np.divmod(pairs, n)
    # Matching pairs in row order: each passage's earlier matches come after every pair of the
    # passages before it, whose fate is therefore settled.
    duplicate_of = [-1] * n
    for i, j in zip(later.tolist(), earlier.tolist(), strict=True):
        if duplicate_of[i] < 0 and duplicate_of[j] < 0 and (also is None or also(i, j)):
            duplicate_of[i] = j
    return np.array(duplicate_of, dtype=np.int64)


def _survivor_walk_rows(matches: npt.NDArray[np.bool_], also: PairTest | None = None) -> npt.NDArray[np.int64]:
    n = matches.shape[0]
    duplicate_of = np.full(n, -1, dtype=np.int64)
    kept = np.zeros(n, dtype=np.bool_)
    for i in range(n):
        hits = np.flatnonzero(matches[i, :i] & kept[:i])
        found = next((j for j in hits.tolist() if also(i, j)), -1) if also is not None else hits[0] if hits.size else -1
        if found >= 0:
            duplicate_of[i] = found
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
        normalized = [normalize_entry(text) for text in texts[lo:hi]]
        small = (b_lengths >= 2) & (b_lengths <= _SMALL_POOL)
        if small.any():
            in_small = np.repeat(small, b_lengths)
            rows, codes = batch_bigram_codes([text for text, keep in zip(normalized, in_small, strict=True) if keep])
            pool_of = np.repeat(np.cumsum(small) - 1, b_lengths)
            local_of = np.arange(hi - lo) - np.repeat(b_starts - lo, b_lengths)
            local_dup = _batched_small_pools(
                pool_of[in_small],
                local_of[in_small],
                np.bincount(rows, minlength=int(in_small.sum())),
                rows,
                codes,
                int(b_lengths[small].max()),
            )
            base = (np.arange(hi - lo) - local_of)[in_small]
            result[lo:hi][in_small] = np.where(local_dup < 0, -1, base + local_dup + lo)
        # A large pool on its own: its bigrams need no sort (pool_matches).
        for start, length in zip(b_starts[b_lengths > _SMALL_POOL], b_lengths[b_lengths > _SMALL_POOL], strict=True):
            local = int(start - lo)
            walk = pool_walk(normalized[local : local + length])
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
