"""Near-duplicate passage suppression (contract section 6) with NumPy bitsets.

The verdict is the contract's exact set rule: normalized texts (``normalize_entry``), the set of
adjacent code-point pairs, Dice ``2.0 * shared / (|A| + |B|) >= 0.9`` (two empty sets match),
then the survivor walk: each passage is kept unless it matches a passage kept before it.

From raw texts (:func:`duplicate_positions`, what :func:`suppress` runs): a chunk's texts are
normalized at once as one array of code points (:func:`normalize_entries`); every position's
bigram becomes one integer (:func:`pair_codes`); a hash join numbers a pool's distinct bigrams
and each passage becomes a bitset (:func:`_columns`, :func:`_counted_pairs`), whose first word
rules most pairs out by an exact upper bound; the few pairs left are counted in full and judged
by the contract's float expression; the walk goes over the matching pairs in order
(:func:`code_point_walk`). Small pools are decided together (:func:`_batched_small_pools`),
pools past the bitset limits in blocks (:func:`blocked_walk`). :func:`dice_matches` gives one
pool's whole verdict matrix from prepared bigram sets.
"""

from __future__ import annotations

import itertools
import operator
import threading
from collections.abc import Callable, Sequence
from typing import Any, Literal

import numpy as np
import numpy.typing as npt
import polars as pl

from assembler.contract.arrow import numpy_series, sorted_unique
from assembler.contract.text import normalize_entries, normalize_entry
from assembler.stages import collect

__all__ = [
    "NEAR_DUPLICATE_DICE_THRESHOLD",
    "PairTest",
    "bigram_codes",
    "blocked_walk",
    "code_point_walk",
    "dice_matches",
    "normalize_entry",  # re-exported: the rule's normalization, next to its bigrams
    "pair_codes",
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

    ``auto``: the bitset kernel (:func:`_bitset_pairs`), for uint64 codes below ``2**42 - 1``
    (those of :func:`bigram_codes`) in pools of at most 2,048 passages and 4,096 distinct codes. ``dense``
    (a BLAS product of the incidence matrix) and ``sparse`` (co-occurrence counting) count every
    pair. All three count exact integers and apply the contract's rule, so the verdicts are equal.
    """
    n = len(bigram_sets)
    sizes = np.fromiter(map(len, bigram_sets), dtype=np.int64, count=n)
    codes = np.concatenate(bigram_sets) if n else np.empty(0, dtype=np.uint64)
    layout = _pair_layout(codes) if method == "auto" else None
    pairs = None if layout is None else _bitset_pairs(layout, sizes)
    if pairs is not None:
        return _pair_matrix(n, *pairs)
    rows = np.repeat(np.arange(n), sizes)
    shared = _shared_counts(rows, codes, n, method)
    denom = (sizes[:, None] + sizes[None, :]).astype(np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        matches: npt.NDArray[np.bool_] = (2.0 * shared / denom >= NEAR_DUPLICATE_DICE_THRESHOLD) | (denom == 0.0)
    matches[np.diag_indices(n)] = True
    return matches


def _pair_layout(codes: npt.NDArray[Any]) -> npt.NDArray[np.uint64] | None:
    """Codes of :func:`bigram_codes` in the kernel's pair layout (:func:`pair_codes`): a code's
    high 21 bits in place of a first code point, its low 21 bits in place of the second. ``None``
    for other codes: not uint64, or not below ``2**42 - 1`` (which would look like an empty slot).
    """
    if codes.dtype != np.uint64 or (codes.size and int(codes.max()) >= (1 << 42) - 1):
        return None
    layout: npt.NDArray[np.uint64] = np.right_shift(codes, np.uint64(21)) << np.uint64(11)
    layout |= (codes & np.uint64((1 << 21) - 1)) << np.uint64(43)
    return layout


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


# --- the bitset kernel -------------------------------------------------------------------------
#
# Codes in the pair layout: a bigram's first code point shifted left by 11 in one 32-bit half of
# a uint64, its second the same in the other (:func:`pair_codes`). Bits 0 to 10 and 32 to 42 are
# zero in every code, so a hash table entry holds a code with its column number in those spare
# bits, and one gather both checks an element's slot and gives its column.
_SPARE_LOW = 0x7FF
_CODE_BITS = np.uint64(~(0x7FF | (0x7FF << 32)) & (2**64 - 1))
_EMPTY_SLOT = np.uint64(2**64 - 1)  # never a code (a code's spare bits are zero)
# Odd 64-bit multipliers (multiplicative hashing), one per round; codes still without a column
# after the last round are numbered by a sort.
_MULTIPLIERS = (np.uint64(0x9E3779B97F4A7C15), np.uint64(0xD6E8FEB86659FD93), np.uint64(0xFF51AFD7ED558CCD))
_TABLE_BITS = 13
_SORT_CODES = 256  # a later round with at most this many codes sorts them instead
# The first passages' bigrams seed the hash table and order its columns; the bigrams new in the
# later passages (a few per cent) take the second round.
_SEED_PASSAGES = 32
# Candidate pairs left after the first word are counted word by word (dropping the pairs whose
# bound fails) until this few remain or ``_BOUND_WORDS`` words are done, then over every
# remaining word at once, ``_COUNT_PAIRS`` pairs at a time.
_FEW_PAIRS = 128
_BOUND_WORDS = 4
_COUNT_PAIRS = 1 << 15
# Beyond these (pool size, distinct bigrams of the pool, bigrams of a passage) the bitsets and
# the pair matrices outgrow the co-occurrence split of ``_shared_counts``, which takes over.
_BITSET_MAX_PASSAGES = 2048
_BITSET_MAX_WIDTH = 4096
_BITSET_MAX_SET = 1 << 24


def pair_codes(points: npt.NDArray[np.uint32], lengths: npt.NDArray[np.int64]) -> npt.NDArray[np.uint64]:
    """Every position's bigram in the pair layout, texts in turn (a per-thread buffer).

    ``points``/``lengths``: normalized texts as code points (:func:`normalize_entries`). A text of
    ``m >= 2`` code points gives ``m`` codes, its last position repeating the pair before it (a
    set ignores repeats); a one-code-point text its pair with itself; an empty text none. So text
    ``i`` has ``lengths[i]`` codes, at its own positions.
    """
    total = points.size
    shifted = _scratch(15, (total + 2) // 2 * 2, np.uint32)
    np.left_shift(points, np.uint32(11), out=shifted[:total])
    shifted[total] = 0
    # The uint64 at each 4-byte step of the shifted points: a code point with the next one (which
    # half holds which depends on the byte order, the same for every code).
    overlapping = np.ndarray((total,), dtype=np.uint64, buffer=shifted, strides=(4,))
    codes = _scratch(16, total, np.uint64)
    np.copyto(codes, overlapping)
    last = np.cumsum(lengths) - 1
    longer = last[lengths >= 2]
    codes[longer] = codes[longer - 1]
    single = last[lengths == 1]
    if single.size:
        half = points[single].astype(np.uint64) << np.uint64(11)
        codes[single] = half | (half << np.uint64(32))
    return codes


def _columns(
    codes: npt.NDArray[np.uint64],
    seed: int,
    sample: int,
    first: int,
    round_: int = 0,
    max_bits: int = _TABLE_BITS,
    max_width: int = _BITSET_MAX_WIDTH,
) -> tuple[npt.NDArray[np.intp], int] | None:
    """A column per code, ``first`` on: equal codes equal columns, distinct codes distinct ones.

    A hash join: ``codes[:seed]`` write themselves into their slots, then every code reads its
    slot back; a code that finds itself there takes that slot's column, the others (codes absent
    from the seed, or that lost their slot to another code) take another round with another
    multiplier, and after the last round (or when few are left) a sort. Which code keeps a
    contested slot does not matter. With ``sample`` (the passages ``codes[:seed]`` come from),
    the seeded columns go first to the codes found about ``sample / 2`` times, the ones that
    tell passages apart: the order only decides how soon pairs are ruled out, never a verdict.
    ``None`` past ``max_width`` columns in all (at most 2**22: the spare bits).
    """
    total = codes.size
    if round_ == len(_MULTIPLIERS) or (round_ and total <= _SORT_CODES):
        distinct, inverse = np.unique(codes, return_inverse=True)
        if first + distinct.size > max_width:
            return None
        return first + inverse.astype(np.intp), int(distinct.size)
    bits = min(max_bits, max(8, (2 * seed).bit_length()))
    outer = round_ == 0  # the first round uses the per-thread buffers, the later ones are small
    hashed = np.multiply(codes, _MULTIPLIERS[round_], out=_scratch(0, total, np.uint64) if outer else None)
    hashed >>= np.uint64(64 - bits)
    slots = hashed.view(np.intp)
    table = _scratch(1, 1 << bits, np.uint64) if outer else np.empty(1 << bits, dtype=np.uint64)
    table.fill(_EMPTY_SLOT)
    table[slots[:seed]] = codes[:seed]
    if sample:  # how often each slot was written: the slots taken, and how telling their codes are
        frequency = np.bincount(slots[:seed], minlength=1 << bits)
        taken = np.flatnonzero(frequency)
        if first + taken.size > max_width:
            return None
        taken = taken.take(np.argsort(np.abs(2 * frequency.take(taken) - sample), kind="stable"))
    else:
        taken = np.flatnonzero(table != _EMPTY_SLOT)
    count = taken.size
    if first + count > max_width:
        return None
    column = np.arange(first, first + count, dtype=np.uint64)
    if first + count > _SPARE_LOW + 1:  # past 11 bits: the high part goes to bits 32 on
        column = (column & np.uint64(_SPARE_LOW)) | ((column >> np.uint64(11)) << np.uint64(32))
    table[taken] |= column
    found = table.take(slots, out=_scratch(2, total, np.uint64) if outer else None, mode="clip")
    found ^= codes  # a code's own entry leaves its column's spare bits; any other, more bits
    if first + count <= _SPARE_LOW + 1:
        lost = np.flatnonzero(found > np.uint64(_SPARE_LOW))
        columns = found.view(np.intp)
    else:
        lost = np.flatnonzero(found & _CODE_BITS)
        columns = ((found & np.uint64(_SPARE_LOW)) | ((found >> np.uint64(21)) & np.uint64(_SPARE_LOW << 11))).view(
            np.intp
        )
    if lost.size:
        again = _columns(codes.take(lost), lost.size, 0, first + count, round_ + 1, max_bits, max_width)
        if again is None:
            return None
        columns[lost] = again[0]
        count += again[1]
    return columns, count


def _trivial_pairs(n: int, sizes: npt.NDArray[np.int64]) -> tuple[npt.NDArray[np.intp], npt.NDArray[np.intp]] | None:
    """The matching pairs of a pool of fewer than two passages or of empty passages only."""
    if n < 2:
        nothing = np.empty(0, dtype=np.intp)
        return nothing, nothing
    if not sizes.any():  # every passage empty: every pair matches
        earlier, later = np.triu_indices(n, 1)
        return earlier.astype(np.intp), later.astype(np.intp)
    return None


def _fits_kernel(sizes: npt.NDArray[np.int64]) -> bool:
    return sizes.size <= _BITSET_MAX_PASSAGES and (sizes.size == 0 or int(sizes.max()) <= _BITSET_MAX_SET)


def _bitset_pairs(
    codes: npt.NDArray[np.uint64], sizes: npt.NDArray[np.int64]
) -> tuple[npt.NDArray[np.intp], npt.NDArray[np.intp]] | None:
    """:func:`_counted_pairs` of one pool given its bigrams in the pair layout (each passage's in
    turn, repeats allowed; ``sizes`` how many). ``None`` where the kernel does not apply."""
    if not _fits_kernel(sizes):
        return None
    n = sizes.size
    trivial = _trivial_pairs(n, sizes)
    if trivial is not None:
        return trivial
    sample = min(n, _SEED_PASSAGES)
    numbered = _columns(codes, int(sizes[:sample].sum()), sample, 0)
    return None if numbered is None else _counted_pairs(*numbered, sizes)


def _pool_pairs(
    points: npt.NDArray[np.uint32], lengths: npt.NDArray[np.int64]
) -> tuple[npt.NDArray[np.intp], npt.NDArray[np.intp]] | None:
    """:func:`_bitset_pairs` of one pool given as normalized code points (:func:`normalize_entries`)."""
    return _bitset_pairs(pair_codes(points, lengths), lengths) if _fits_kernel(lengths) else None


def _bitsets(columns: npt.NDArray[np.intp], count: int, sizes: npt.NDArray[np.int64]) -> npt.NDArray[np.uint64]:
    """Each passage's set of columns as a bitset, ``n`` by ``ceil(count / 64)`` words (``columns``:
    each passage's in turn, ``sizes`` how many; repeats set the same bit)."""
    n = sizes.size
    width = -(-count // 64) * 64
    flat = np.repeat(_arange(n) * width, sizes)
    flat += columns
    incidence = _scratch(4, n * width, np.bool_)
    incidence.fill(False)
    incidence[flat] = True
    words: npt.NDArray[np.uint64] = np.packbits(incidence.reshape(n, width), axis=1, bitorder="little").view(np.uint64)
    return words


def _counted_pairs(
    columns: npt.NDArray[np.intp], count: int, sizes: npt.NDArray[np.int64]
) -> tuple[npt.NDArray[np.intp], npt.NDArray[np.intp]]:
    """The matching pairs of one pool, ``(earlier, later)`` indices, from exact shared counts,
    most pairs ruled out by an upper bound first.

    ``columns``: each passage's bigrams in turn (repeats allowed) numbered ``0 .. count - 1``,
    the ones that tell passages apart first (:func:`_columns`); ``sizes``: how many per passage.
    Each passage becomes a bitset over the columns, its set size the popcount. For any subset
    ``C`` of the bigrams, ``shared <= shared_C + min(|A| - |A_C|, |B| - |B_C|)``; with the telling
    bigrams in the first 64-bit word, most pairs fail this bound after one word.
    ``2.0 * s / d >= 0.9`` holds exactly when ``20 * s >= 9 * d`` for integers ``0 <= s`` and
    ``0 < d < 2**40`` (a quotient off 9/10 is off by at least ``1 / (10 d)``, far more than the
    rounding; tests/stages/test_neardup.py checks every ``d`` below 2**22), so the bounds are
    compared in integers. Pairs that survive every bound are counted over all words and judged
    by the contract's own float expression.
    """
    n = sizes.size
    words = _bitsets(columns, count, sizes)
    ones = np.bitwise_count(words)
    size = ones.sum(axis=1, dtype=np.int64)  # set sizes: repeats counted once
    kind: type[np.signedinteger[Any]] = np.int16 if int(size.max()) < 1600 else np.int32
    # Passages in order of most bigrams beyond the first word: then min(outside_i, outside_j) is
    # outside_j for i < j, and the first bound is 20 * shared_C >= need_i + (need_j - outside_j).
    order = np.argsort(ones[:, 0] - size, kind="stable")
    words = np.ascontiguousarray(words.take(order, axis=0).T)
    set_size: npt.NDArray[np.signedinteger[Any]] = size.take(order).astype(kind)
    # outside[w, i]: 20 times passage i's bigrams beyond word w; need: 9 * |A|. In int16 when sets
    # are below 1,600: 20 * shared_C + outside_i <= 20 * |A| and need_i + need_j stay below 2**15.
    within = np.cumsum(ones[:, :_BOUND_WORDS].take(order, axis=0).T, axis=0, dtype=kind)
    outside: npt.NDArray[np.signedinteger[Any]] = 20 * (set_size - within)
    need: npt.NDArray[np.signedinteger[Any]] = 9 * set_size
    word = words[0]
    pair_and = np.bitwise_and(word[:, None], word[None, :], out=_scratch(5, n * n, np.uint64).reshape(n, n))
    first = np.bitwise_count(pair_and, out=_scratch(6, n * n, np.uint8).reshape(n, n))
    # The first bound in units of 20, each side rounded down: a pair dropped here fails the exact
    # bound too (floor(a / 20) + floor(c / 20) <= (a + c) / 20).
    least = np.add(
        (need // 20)[:, None], ((need - outside[0]) // 20)[None, :], out=_scratch(8, n * n, kind).reshape(n, n)
    )
    possible = np.greater_equal(first, least, out=_scratch(9, n * n, np.bool_).reshape(n, n))
    possible &= _upper_triangle(n)
    pairs = np.flatnonzero(possible)
    left = pairs // n
    right = pairs - left * n
    counted = first.reshape(-1).take(pairs).astype(np.int32)
    w = 1
    while w < min(words.shape[0], _BOUND_WORDS) and left.size > _FEW_PAIRS:
        counted += np.bitwise_count(words[w].take(left) & words[w].take(right))
        bounds = 20 * counted + np.minimum(outside[w].take(left), outside[w].take(right))
        keep = np.flatnonzero(bounds >= need.take(left).astype(np.int32) + need.take(right))
        left, right, counted = left.take(keep), right.take(keep), counted.take(keep)
        w += 1
    if w < words.shape[0]:
        rest = words[w:]
        for lo in range(0, left.size, _COUNT_PAIRS):
            part = slice(lo, lo + _COUNT_PAIRS)
            both = np.bitwise_and(rest.take(left[part], axis=1), rest.take(right[part], axis=1))
            counted[part] += np.bitwise_count(both).sum(axis=0, dtype=np.int32)
    denom = set_size.take(left).astype(np.float64) + set_size.take(right)
    with np.errstate(divide="ignore", invalid="ignore"):
        verdict = (2.0 * counted / denom >= NEAR_DUPLICATE_DICE_THRESHOLD) | (denom == 0.0)
    one, another = order.take(left[verdict]), order.take(right[verdict])
    return np.minimum(one, another), np.maximum(one, another)


def _pair_matrix(n: int, earlier: npt.NDArray[np.intp], later: npt.NDArray[np.intp]) -> npt.NDArray[np.bool_]:
    """The symmetric verdict matrix of matching pairs (diagonal True)."""
    matches = np.zeros((n, n), dtype=np.bool_)
    matches[np.diag_indices(n)] = True
    matches[earlier, later] = True
    matches[later, earlier] = True
    return matches


def _code_points(normalized: Sequence[str]) -> tuple[npt.NDArray[np.uint32], npt.NDArray[np.int64]]:
    """Normalized texts as :func:`normalize_entries` gives them: code points in turn, lengths."""
    points = np.frombuffer("".join(normalized).encode("utf-32-le"), dtype=np.uint32)
    return points, np.fromiter(map(len, normalized), dtype=np.int64, count=len(normalized))


def _texts(points: npt.NDArray[np.uint32], lengths: npt.NDArray[np.int64]) -> list[str]:
    """The texts back from code points and lengths."""
    joined = points.tobytes().decode("utf-32-le")
    ends = np.cumsum(lengths).tolist()
    return [joined[end - length : end] for end, length in zip(ends, lengths.tolist(), strict=True)]


def pool_matches(normalized: Sequence[str]) -> npt.NDArray[np.bool_]:
    """:func:`dice_matches` of one pool's normalized texts, the bigrams taken all at once.

    No per-text set: every text's bigrams (repeats included, :func:`pair_codes`) go to the
    bitset kernel, which keeps sets. Falls back to :func:`dice_matches` over :func:`bigram_codes`
    where the kernel does not apply (a pool too large or too varied for bitsets); that fallback
    holds ``n x n`` matrices, so the pipeline walks such pools with :func:`blocked_walk` instead
    (:func:`code_point_walk`).
    """
    pairs = _pool_pairs(*_code_points(normalized))
    if pairs is not None:
        return _pair_matrix(len(normalized), *pairs)
    return dice_matches([bigram_codes(text) for text in normalized])


PairTest = Callable[[int, int], bool]
"""A policy's extra condition on a pair of positions of one pool ``(later, earlier)``: a pair
is a near-duplicate only if the contract's rule holds *and* this returns True."""


def code_point_walk(
    points: npt.NDArray[np.uint32], lengths: npt.NDArray[np.int64], also: PairTest | None = None
) -> npt.NDArray[np.int64]:
    """The survivor walk of one pool given as normalized code points (:func:`normalize_entries`):
    ``-1`` if kept, else the index of the first kept match, as :func:`survivor_walk` over the
    verdict matrix.

    The bitset kernel's matching pairs where it applies (at most 2,048 passages, 4,096 distinct
    bigrams), walked in order without a matrix; else :func:`blocked_walk` (no ``n x n`` matrix).
    """
    return _walk(points, lengths, also, None)


def _walk(
    points: npt.NDArray[np.uint32],
    lengths: npt.NDArray[np.int64],
    also: PairTest | None,
    normalized: Sequence[str] | None,
) -> npt.NDArray[np.int64]:
    n = lengths.size
    pairs = _pool_pairs(points, lengths)
    if pairs is None:
        return blocked_walk(_texts(points, lengths) if normalized is None else normalized, also)
    earlier, later = pairs
    if earlier.size > 4 * n:  # many matches: the walk row by row over the matrix
        return _survivor_walk_rows(_pair_matrix(n, earlier, later), also)
    # Matching pairs in row order: each passage's earlier matches come after every pair of the
    # passages before it, whose fate is therefore settled.
    duplicate_of = [-1] * n
    for i, j in sorted(zip(later.tolist(), earlier.tolist(), strict=True)):
        if duplicate_of[i] < 0 and duplicate_of[j] < 0 and (also is None or also(i, j)):
            duplicate_of[i] = j
    return np.array(duplicate_of, dtype=np.int64)


def pool_walk(normalized: Sequence[str], also: PairTest | None = None) -> npt.NDArray[np.int64]:
    """:func:`code_point_walk` of one pool's normalized texts."""
    points, lengths = _code_points(normalized)
    return _walk(points, lengths, also, normalized)


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
    return _batch_bigram_codes(*_code_points(normalized))


def _batch_bigram_codes(
    points: npt.NDArray[np.uint32], lengths: npt.NDArray[np.int64]
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.uint64]]:
    """:func:`batch_bigram_codes` of texts given as code points and lengths."""
    n = lengths.size
    points = points.astype(np.uint64)
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
    points: npt.NDArray[np.uint32], lengths: npt.NDArray[np.int64], pool_lengths: npt.NDArray[np.int64]
) -> npt.NDArray[np.int64]:
    """Survivor walks of many small pools at once; ``-1`` or the duplicated passage's index in its pool.

    ``points``/``lengths``: the passages' normalized code points (:func:`normalize_entries`), pool
    after pool; ``pool_lengths``: passages per pool (2 to ``_SMALL_POOL``). Pools are taken in
    chunks of about ``_CHUNK_PASSAGES`` passages, each chunk's passages bitsets over the chunk's
    bigrams (:func:`_columns`), and every pair within a pool counted over all words; a chunk too
    varied for bitsets is counted by co-occurrence (:func:`_cooccurrence_shared`).
    """
    n_pools = pool_lengths.size
    width = int(pool_lengths.max())
    pair_counts = pool_lengths * (pool_lengths - 1) // 2
    # Every pair of every pool, (later, earlier) passage indices, pool after pool.
    pair_pool = np.repeat(np.arange(n_pools), pair_counts)
    offset = np.arange(int(pair_counts.sum())) - np.repeat(np.cumsum(pair_counts) - pair_counts, pair_counts)
    later_local, earlier_local = _POOL_LATER.take(offset), _POOL_EARLIER.take(offset)
    pool_first = np.cumsum(pool_lengths) - pool_lengths
    later, earlier = pool_first.take(pair_pool) + later_local, pool_first.take(pair_pool) + earlier_local
    verdict = np.zeros(later.size, dtype=np.bool_)
    ends = np.cumsum(lengths)
    passage_ends = np.cumsum(pool_lengths)
    pair_ends = np.cumsum(pair_counts)
    chunk_ends = sorted_unique(
        np.searchsorted(passage_ends, np.arange(_CHUNK_PASSAGES, passage_ends[-1], _CHUNK_PASSAGES))
    )
    chunks = [(lo, hi) for lo, hi in itertools.pairwise([0, *(chunk_ends + 1).tolist(), n_pools]) if lo < hi]
    while chunks:
        lo, hi = chunks.pop()
        r0, r1 = int(pool_first[lo]), int(passage_ends[hi - 1])
        e0, e1 = int(ends[r0 - 1]) if r0 else 0, int(ends[r1 - 1])
        q0, q1 = int(pair_ends[lo - 1]) if lo else 0, int(pair_ends[hi - 1])
        counted = _chunk_shared(points[e0:e1], lengths[r0:r1], later[q0:q1] - r0, earlier[q0:q1] - r0, hi - lo == 1)
        if counted is None:  # too many distinct bigrams for one chunk's bitsets: halves
            chunks += [(lo, (lo + hi) // 2), ((lo + hi) // 2, hi)]
            continue
        shared, size = counted
        denom = size.take(later[q0:q1] - r0) + size.take(earlier[q0:q1] - r0)
        with np.errstate(divide="ignore", invalid="ignore"):
            verdict[q0:q1] = (2.0 * shared / denom >= NEAR_DUPLICATE_DICE_THRESHOLD) | (denom == 0.0)
    matches = np.zeros((n_pools, width, width), dtype=np.bool_)
    matches[pair_pool, later_local, earlier_local] = verdict
    valid = np.arange(width)[None, :] < pool_lengths[:, None]
    # The contract's walk, one position at a time across every pool.
    duplicate_of = np.full((n_pools, width), -1, dtype=np.int64)
    kept = np.zeros((n_pools, width), dtype=np.bool_)
    kept[:, 0] = valid[:, 0]
    for position in range(1, width):
        hits = matches[:, position, :position] & kept[:, :position]
        found = hits.any(axis=1)
        duplicate_of[:, position] = np.where(found, hits.argmax(axis=1), -1)
        kept[:, position] = valid[:, position] & ~found
    return duplicate_of[valid]


def _chunk_shared(
    points: npt.NDArray[np.uint32],
    lengths: npt.NDArray[np.int64],
    later: npt.NDArray[np.int64],
    earlier: npt.NDArray[np.int64],
    last_resort: bool,
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]] | None:
    """Shared bigrams of the pairs ``(later, earlier)`` of a chunk's passages, and every passage's
    set size, from bitsets over the chunk's bigrams. ``None`` past their limits, unless
    ``last_resort`` (one pool): then by co-occurrence counting (:func:`_cooccurrence_shared`)."""
    n = lengths.size
    if not lengths.any():
        return np.zeros(later.size, dtype=np.float64), np.zeros(n, dtype=np.float64)
    codes = pair_codes(points, lengths)
    most = min(_CHUNK_MAX_WIDTH, max(64, _CHUNK_INCIDENCE_BYTES // n))
    numbered = _columns(codes, codes.size, 0, 0, max_bits=_CHUNK_TABLE_BITS, max_width=most)
    if numbered is None:
        return _cooccurrence_shared(points, lengths, later, earlier) if last_resort else None
    words = _bitsets(*numbered, lengths)
    size = np.bitwise_count(words).sum(axis=1, dtype=np.int64).astype(np.float64)
    shared = np.zeros(later.size, dtype=np.float64)
    for lo in range(0, later.size, _COUNT_PAIRS):
        part = slice(lo, lo + _COUNT_PAIRS)
        both = np.bitwise_and(words.take(later[part], axis=0), words.take(earlier[part], axis=0))
        shared[part] = np.bitwise_count(both).sum(axis=1, dtype=np.int64)
    return shared, size


def _cooccurrence_shared(
    points: npt.NDArray[np.uint32],
    lengths: npt.NDArray[np.int64],
    later: npt.NDArray[np.int64],
    earlier: npt.NDArray[np.int64],
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """:func:`_chunk_shared` by co-occurrence: every pair of passages sharing a bigram, counted
    from the sorted distinct (passage, bigram) keys (the pairs asked lie within small pools)."""
    rows, codes = _batch_bigram_codes(points, lengths)
    order = np.argsort(codes, kind="stable")
    _, left, right = _pairs_within_groups(codes.take(order), rows.take(order))
    keep = left > right
    key = left[keep] * lengths.size + right[keep]
    counted, counts = np.unique(key, return_counts=True)
    wanted = later * lengths.size + earlier
    shared = np.zeros(wanted.size, dtype=np.float64)
    if counted.size:
        at = np.minimum(np.searchsorted(counted, wanted), counted.size - 1)
        shared = np.where(counted.take(at) == wanted, counts.take(at), 0).astype(np.float64)
    size = np.bincount(rows, minlength=lengths.size).astype(np.float64)
    return shared, size


_SMALL_POOL = 32
# Pairs (later, earlier) of positions below _SMALL_POOL, by later then earlier: a pool of m
# passages has the first m (m - 1) / 2 of them.
_POOL_LATER, _POOL_EARLIER = np.tril_indices(_SMALL_POOL, -1)
# Small pools are decided in chunks of about this many passages, each chunk's bitsets at most
# _CHUNK_MAX_WIDTH bigrams wide and _CHUNK_INCIDENCE_BYTES in all (a chunk past either is halved).
_CHUNK_PASSAGES = 512
_CHUNK_TABLE_BITS = 15
_CHUNK_MAX_WIDTH = 1 << 15
_CHUNK_INCIDENCE_BYTES = 1 << 23
# Passages per block: bounds the bigram arrays (tens of MB) and keeps packed keys below 2**22 rows.
_MAX_ROWS = 8192


def duplicate_positions(
    qs: npt.NDArray[np.int64], texts: Sequence[str], max_rows: int = _MAX_ROWS
) -> npt.NDArray[np.int64]:
    """For passages sorted by query then fused rank: ``-1`` if kept, else the row it duplicates.

    Pools are taken in blocks of about ``max_rows`` passages (memory is bounded by the block),
    each block normalized at once (:func:`normalize_entries`). Small pools (2 to 32 passages) are
    decided together (:func:`_batched_small_pools`), larger ones one by one
    (:func:`code_point_walk`).
    """
    n = len(texts)
    result = np.full(n, -1, dtype=np.int64)
    if n == 0:
        return result
    bounds = (np.flatnonzero(qs[1:] != qs[:-1]) + 1).tolist()
    starts, ends = [0, *bounds], [*bounds, n]
    pools_per_block = max(1, max_rows // max(map(operator.sub, ends, starts)))
    for first in range(0, len(starts), pools_per_block):
        b_starts, b_ends = starts[first : first + pools_per_block], ends[first : first + pools_per_block]
        lo, hi = b_starts[0], b_ends[-1]
        points, text_lengths = normalize_entries(texts[lo:hi])
        sizes = [end - start for start, end in zip(b_starts, b_ends, strict=True)]
        if any(2 <= size <= _SMALL_POOL for size in sizes):
            b_lengths = np.array(sizes)
            small = (b_lengths >= 2) & (b_lengths <= _SMALL_POOL)
            in_small = np.repeat(small, b_lengths)
            local_dup = _batched_small_pools(
                points if small.all() else points[np.repeat(in_small, text_lengths)],
                text_lengths[in_small],
                b_lengths[small],
            )
            base = np.repeat(np.array(b_starts)[small], b_lengths[small])
            result[lo:hi][in_small] = np.where(local_dup < 0, -1, base + local_dup)
        offsets: list[int] = []
        for start, end in zip(b_starts, b_ends, strict=True):
            if end - start <= _SMALL_POOL:
                continue
            offsets = offsets or [0, *np.cumsum(text_lengths).tolist()]
            walk = code_point_walk(points[offsets[start - lo] : offsets[end - lo]], text_lengths[start - lo : end - lo])
            if start:
                walk[walk >= 0] += start
            result[start:end] = walk
    return result


PositionRule = Callable[[npt.NDArray[np.int64], Sequence[str]], npt.NDArray[np.int64]]
"""Passages (query index, text) sorted by query then fused rank -> duplicated row or ``-1``."""


def suppress(fused: pl.DataFrame, rule: PositionRule = duplicate_positions) -> pl.DataFrame:
    """Mark near-duplicate passages of every query.

    Returns ``fused`` with ``duplicate_of`` (the survivor's ``candidate_id``, null when kept) and
    ``duplicate_of_json`` (its JSON string). Passages are compared in ``fused_rank`` order, by the
    contract's rule unless a policy passes its own ``rule``.
    """
    [passages] = collect(
        fused.lazy()
        .filter(pl.col("kind") == "passage")
        .select("q", "fused_rank", "candidate_id", "id_json", "text")
        .sort("q", "fused_rank")
    )
    rows = rule(passages["q"].cast(pl.Int64).to_numpy(), passages["text"].to_list())
    target = numpy_series(np.asarray(rows, dtype=np.int64), "target").replace(-1, None)
    verdicts = passages.lazy().select(
        "q",
        "fused_rank",
        pl.col("candidate_id").gather(target).alias("duplicate_of"),
        pl.col("id_json").gather(target).alias("duplicate_of_json"),
    )
    return collect(fused.lazy().join(verdicts, on=["q", "fused_rank"], how="left", maintain_order="left"))[0]
