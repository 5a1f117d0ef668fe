"""Near-duplicate verdicts equal the contract's plain set rule (section 6)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from assembler.neardup import bigram_codes, dice_matches, duplicate_positions, normalize_entry, survivor_walk


def plain_bigrams(text: str) -> set[tuple[str, str]]:
    normalized = normalize_entry(text)
    if len(normalized) == 1:
        return {(normalized, normalized)}
    return set(itertools.pairwise(normalized))


def plain_match(a: str, b: str) -> bool:
    sa, sb = plain_bigrams(a), plain_bigrams(b)
    denom = len(sa) + len(sb)
    return denom == 0 or 2.0 * len(sa & sb) / denom >= 0.9


def plain_walk(texts: list[str]) -> list[int]:
    kept: list[int] = []
    result = []
    for i, text in enumerate(texts):
        match = next((j for j in kept if plain_match(texts[j], text)), None)
        result.append(-1 if match is None else match)
        if match is None:
            kept.append(i)
    return result


def verdicts(texts: list[str]) -> np.ndarray:
    return dice_matches([bigram_codes(normalize_entry(t)) for t in texts])


@pytest.mark.parametrize(
    ("a", "b", "duplicate"),
    [
        ("", "", True),  # both empty: Dice counts as 1.0
        ("", "x", False),
        ("a", "a", True),
        ("a", "aa", True),  # one code point pairs with itself
        ("a", "b", False),
        ("aa", "bb", False),
        ("ab", "ba", False),
        ("x y", "x  y", False),  # 0.8
        ("ｱｲｳ", "あいう", True),  # half-width katakana folds to hiragana
        ("ΑΣ", "ας", False),  # per-code-point lowercase: no final sigma
        ("ΑΣ", "ασ", True),
        ("the quick brown fox jumps", "the quick brown fox jump", True),
        ("the quick brown fox jumps over the lazy dog", "the quick brown fox jumps over the lazy dogs", True),
    ],
)
def test_edge_cases(a: str, b: str, duplicate: bool) -> None:
    assert plain_match(a, b) is duplicate
    assert bool(verdicts([a, b])[0, 1]) is duplicate


def test_size_mismatched_pair_is_not_a_duplicate() -> None:
    """`could_be_near_duplicate_prunes_a_size_mismatched_pair...`: 20 vs 1 bigrams."""
    assert not verdicts(["abcdefghijklmnopqrstu", "ab"])[0, 1]


TEXT = st.text(alphabet=st.sampled_from("abab cdｱあア日本ΣσςİI. "), max_size=14)


@settings(max_examples=300)
@given(st.lists(TEXT, min_size=1, max_size=12))
def test_matrix_and_walk_equal_the_plain_set_rule(texts: list[str]) -> None:
    matrix = verdicts(texts)
    for i, a in enumerate(texts):
        for j, b in enumerate(texts):
            if i != j:
                assert bool(matrix[i, j]) == plain_match(a, b)
    assert survivor_walk(matrix).tolist() == plain_walk(texts)


@settings(max_examples=50)
@given(st.lists(TEXT, min_size=2, max_size=10))
def test_sparse_and_dense_kernels_agree(texts: list[str]) -> None:
    sets = [bigram_codes(normalize_entry(t)) for t in texts]
    assert (dice_matches(sets, "dense") == dice_matches(sets, "sparse")).all()


def test_survivor_is_the_first_kept_match_not_the_most_similar() -> None:
    texts = ["abcdefghij", "abcdefghijk", "abcdefghijk"]
    # 2 matches 0 (kept) first, although it is identical to 1 (dropped, never a target).
    assert survivor_walk(verdicts(texts)).tolist() == [-1, 0, 0]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(TEXT, max_size=40), min_size=1, max_size=6), st.sampled_from([1, 7, 1 << 20]))
def test_batched_pools_equal_one_plain_walk_per_pool(pools: list[list[str]], max_rows: int) -> None:
    """Small pools decided together and large ones one by one give the plain walk of each pool."""
    qs = np.repeat(np.arange(len(pools)), [len(pool) for pool in pools])
    texts = [text for pool in pools for text in pool]
    expected: list[int] = []
    offset = 0
    for pool in pools:
        expected += [-1 if j < 0 else j + offset for j in plain_walk(pool)]
        offset += len(pool)
    assert duplicate_positions(qs, texts, max_rows).tolist() == expected
