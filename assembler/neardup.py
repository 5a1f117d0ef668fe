"""Near-duplicate passage suppression (contract section 6) with NumPy bigram matrices.

The verdict is the contract's exact set rule: normalized texts (``normalize_entry``), the set of
adjacent code-point pairs, Dice ``2.0 * shared / (|A| + |B|) >= 0.9`` (two empty sets match). The
kernel :func:`dice_matches` computes every pair's verdict of one pool at once; the survivor walk
(:func:`suppress`) then keeps each passage unless it matches a passage kept before it, exactly as
the contract's sequential rule does.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Sequence
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
# Dense incidence matrices up to this many cells; sparser pools use co-occurrence counting.
_DENSE_CELLS = 4_000_000


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
    return np.unique((points[:-1] << np.uint64(21)) | points[1:])


def dice_matches(
    bigram_sets: Sequence[npt.NDArray[np.uint64]], method: Literal["auto", "dense", "sparse"] = "auto"
) -> npt.NDArray[np.bool_]:
    """The symmetric matrix of near-duplicate verdicts of one pool (diagonal True).

    ``shared`` counts come from an incidence matrix product: ``dense`` (BLAS over a 0/1 matrix,
    fast for small vocabularies such as English text) or ``sparse`` (co-occurrence counting, fast
    when bigrams are rare such as Japanese text); ``auto`` picks by matrix size. Both count exact
    integers, so the verdicts equal the set rule whichever runs.
    """
    n = len(bigram_sets)
    sizes = np.array([codes.size for codes in bigram_sets], dtype=np.float64)
    shared = _shared_counts(bigram_sets, method)
    denom = sizes[:, None] + sizes[None, :]
    with np.errstate(divide="ignore", invalid="ignore"):
        dice = 2.0 * shared / denom
    matches = dice >= NEAR_DUPLICATE_DICE_THRESHOLD
    matches |= denom == 0.0  # two empty sets count as identical
    matches[np.diag_indices(n)] = True
    return matches


def _shared_counts(bigram_sets: Sequence[npt.NDArray[np.uint64]], method: str) -> npt.NDArray[np.float64]:
    n = len(bigram_sets)
    rows = np.repeat(np.arange(n), [codes.size for codes in bigram_sets])
    all_codes = np.concatenate(bigram_sets) if n else np.empty(0, dtype=np.uint64)
    vocabulary, columns = np.unique(all_codes, return_inverse=True)
    if method == "dense" or (method == "auto" and n * vocabulary.size <= _DENSE_CELLS):
        incidence = np.zeros((n, vocabulary.size), dtype=np.float32)
        incidence[rows, columns] = 1.0
        # float32 sums of ones are exact below 2**24, far above any bigram count here.
        return (incidence @ incidence.T).astype(np.float64)
    order = np.argsort(columns, kind="stable")
    rows, columns = rows[order], columns[order]
    starts = np.flatnonzero(np.r_[True, columns[1:] != columns[:-1]])
    lengths = np.diff(np.r_[starts, columns.size])
    pair_counts = lengths * lengths
    total = int(pair_counts.sum())
    group = np.repeat(np.arange(starts.size), pair_counts)
    offset = np.arange(total) - np.repeat(np.cumsum(pair_counts) - pair_counts, pair_counts)
    width = lengths[group]
    left = rows[starts[group] + offset // width]
    right = rows[starts[group] + offset % width]
    counts = np.bincount(left * n + right, minlength=n * n)
    return counts.reshape(n, n).astype(np.float64)


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


def suppress(fused: pl.DataFrame) -> pl.DataFrame:
    """Mark near-duplicate passages of every query.

    Returns ``fused`` with ``duplicate_of`` (the survivor's ``candidate_id``, null when kept) and
    ``duplicate_of_json`` (its JSON string). Passages are compared in ``fused_rank`` order.
    """
    passages = fused.filter(pl.col("kind") == "passage").select("q", "fused_rank", "candidate_id", "id_json", "text")
    duplicate_ids: list[str | None] = []
    duplicate_json: list[str | None] = []
    keys: list[tuple[int, int]] = []
    for (q,), pool in passages.sort("q", "fused_rank").group_by("q", maintain_order=True):
        ids = pool["candidate_id"].to_list()
        id_json = pool["id_json"].to_list()
        ranks = pool["fused_rank"].to_list()
        keys.extend((int(q), rank) for rank in ranks)
        if len(ids) < 2:
            duplicate_ids.extend([None] * len(ids))
            duplicate_json.extend([None] * len(ids))
            continue
        sets = [bigram_codes(normalize_entry(text)) for text in pool["text"].to_list()]
        walk = survivor_walk(dice_matches(sets))
        duplicate_ids.extend(None if j < 0 else ids[j] for j in walk)
        duplicate_json.extend(None if j < 0 else id_json[j] for j in walk)
    verdicts = pl.DataFrame(
        {
            "q": [k[0] for k in keys],
            "fused_rank": [k[1] for k in keys],
            "duplicate_of": duplicate_ids,
            "duplicate_of_json": duplicate_json,
        },
        schema={"q": pl.UInt32, "fused_rank": pl.Int64, "duplicate_of": pl.String, "duplicate_of_json": pl.String},
    )
    return fused.join(verdicts, on=["q", "fused_rank"], how="left", maintain_order="left")
