"""Near-duplicate verdicts equal the contract's plain set rule (section 6)."""

from __future__ import annotations

import itertools
import sys
import unicodedata
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from assembler.contract.text import normalize_entries, normalize_entry
from assembler.stages import neardup
from assembler.stages.neardup import bigram_codes, dice_matches, duplicate_positions, survivor_walk


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


# --- the bitset kernel (``dice_matches`` auto) and the fast paths of normalization and the walk ---


@settings(max_examples=300, deadline=None)
@given(st.lists(TEXT, min_size=1, max_size=40))
def test_pool_matches_equal_the_plain_set_rule(texts: list[str]) -> None:
    """A large pool's bigrams go to the kernel unsorted, repeats included: the verdicts are still
    the set rule's."""
    matrix = neardup.pool_matches([normalize_entry(t) for t in texts])
    for i, a in enumerate(texts):
        for j, b in enumerate(texts):
            if i != j:
                assert bool(matrix[i, j]) == plain_match(a, b)


def test_pool_matches_count_a_repeated_bigram_once() -> None:
    texts = ["abababab", "abab", "ba", "a", "", "aa", "aaaa", "", "b"]
    matrix = neardup.pool_matches(texts)
    assert matrix.tolist() == verdicts(texts).tolist()
    assert matrix[0, 1] and matrix[5, 6] and matrix[4, 7]  # {ab, ba} twice; {aa} twice; two empty texts


def test_integer_threshold_equals_the_float_rule() -> None:
    """The kernel's bounds compare ``20 * s >= 9 * d``; the least such ``s`` is the float rule's."""
    d = np.arange(1, 1 << 22, dtype=np.int64)
    least = (9 * d + 19) // 20
    assert (2.0 * least / d >= 0.9).all()
    assert (2.0 * (least - 1) / d < 0.9).all()


def codes_of(sets: list[set[int]]) -> list[np.ndarray]:
    return [np.array(sorted(s), dtype=np.uint64) for s in sets]


def plain_set_match(a: set[int], b: set[int]) -> bool:
    denom = len(a) + len(b)
    return denom == 0 or 2.0 * len(a & b) / denom >= 0.9


@pytest.mark.parametrize(("extra_b", "duplicate"), [(2, True), (3, False)])
def test_size_bound_boundary(extra_b: int, duplicate: bool) -> None:
    """9 vs 11 bigrams, the 9 shared: Dice and the size bound are exactly 0.9 (a match); 9 vs 12 not."""
    a = set(range(9))
    b = a | set(range(100, 100 + extra_b))
    assert plain_set_match(a, b) is duplicate
    for method in ("auto", "dense", "sparse"):
        assert bool(dice_matches(codes_of([a, b]), method)[0, 1]) is duplicate  # type: ignore[arg-type]


@st.composite
def similar_sets(draw: st.DrawFn) -> list[set[int]]:
    """Pools of sets drawn around a few bases (many pairs near the threshold), codes up to 2**42."""
    universe = draw(st.integers(4, 700))
    spread = draw(st.sampled_from([1, 1 << 21, (1 << 42) // universe]))
    bases = draw(st.lists(st.sets(st.integers(0, universe - 1), max_size=250), min_size=1, max_size=4))
    pool: list[set[int]] = []
    for _ in range(draw(st.integers(1, 90))):
        base = set(draw(st.sampled_from(bases)))
        drop = draw(st.integers(0, max(0, len(base) // 8)))
        for value in sorted(base)[:drop]:
            base.discard(value)
        base |= draw(st.sets(st.integers(0, universe - 1), max_size=draw(st.sampled_from([0, 3, 30]))))
        pool.append(base)
    return [{value * spread for value in s} for s in pool]


@settings(max_examples=150, deadline=None)
@given(similar_sets())
def test_bitset_kernel_equals_the_plain_set_rule(sets: list[set[int]]) -> None:
    matrix = dice_matches(codes_of(sets))
    expected = np.array([[i == j or plain_set_match(a, b) for j, b in enumerate(sets)] for i, a in enumerate(sets)])
    assert (matrix == expected).all()


def test_bitset_kernel_with_many_candidate_pairs() -> None:
    """300 passages, 150 of them copies of one text with a few changes: thousands of pairs to count."""
    rng = np.random.default_rng(5)
    base = set(rng.choice(2000, 400, replace=False).tolist())
    sets = []
    for i in range(300):
        if i % 2:
            sets.append(set(rng.choice(2000, int(rng.integers(300, 500)), replace=False).tolist()))
        else:
            changed = set(rng.choice(sorted(base), 395, replace=False).tolist())
            sets.append(changed | set(rng.integers(2000, 4000, int(rng.integers(0, 40))).tolist()))
    codes = codes_of(sets)
    assert (dice_matches(codes) == dice_matches(codes, "dense")).all()


@pytest.mark.parametrize("multipliers", [(0, 0, 0), (1, 1, 1), (3, 0, 1), (0, 0x9E3779B97F4A7C15, 1)])
def test_hash_collisions_are_settled(monkeypatch: pytest.MonkeyPatch, multipliers: tuple[int, int, int]) -> None:
    """A degenerate hash sends most codes to the same slots, round after round: every round and
    the final sort still give one column per distinct code (and the verdicts stay exact)."""
    monkeypatch.setattr(neardup, "_MULTIPLIERS", tuple(np.uint64(m) for m in multipliers))
    rng = np.random.default_rng(multipliers[0])
    sets = [set(rng.choice(600, int(rng.integers(0, 120)), replace=False).tolist()) for _ in range(60)]
    sets += [set(s) for s in sets[:20]]
    values = np.concatenate(codes_of(sets))
    layout = neardup._pair_layout(values)
    assert layout is not None
    numbered = neardup._columns(layout, values.size // 3, 20, 0)
    assert numbered is not None
    columns, count = numbered
    pairs = set(zip(values.tolist(), columns.tolist(), strict=True))
    # One column per code, one code per column, the columns 0 .. count - 1.
    assert len(pairs) == len({v for v, _ in pairs}) == len({c for _, c in pairs}) == count
    assert {c for _, c in pairs} == set(range(count))
    assert (dice_matches(codes_of(sets)) == dice_matches(codes_of(sets), "dense")).all()


def test_a_pool_past_2048_distinct_bigrams_keeps_the_bitset_kernel() -> None:
    """Columns past 11 bits take the spare bits of both halves of a code; same verdicts."""
    rng = np.random.default_rng(11)
    sets = [set(rng.choice(3000, 300, replace=False).tolist()) for _ in range(60)]
    sets += [s - set(sorted(s)[:10]) for s in sets[:30]]  # near-duplicates
    sizes = np.array([len(s) for s in sets], dtype=np.int64)
    layout = neardup._pair_layout(np.concatenate(codes_of(sets)))
    assert layout is not None
    numbered = neardup._columns(layout, int(sizes[:20].sum()), 20, 0)
    assert numbered is not None and 2048 < numbered[1] <= 4096
    assert neardup._bitset_pairs(layout, sizes) is not None
    matrix = dice_matches(codes_of(sets))
    assert (matrix == dice_matches(codes_of(sets), "dense")).all()
    assert matrix[60:, :30].any()


def test_codes_are_not_limited_to_code_points() -> None:
    """dice_matches takes any uint64 codes: below 2**42 - 1 through the bitset kernel, others
    (including 2**42 - 1, which would look like an empty slot) through the general path."""
    for top in ((1 << 42) - 2, (1 << 42) - 1, 1 << 50):
        sets = [{top, 1, 2, 3, 4, 5, 6, 7, 8, 9}, {1, 2, 3, 4, 5, 6, 7, 8, 9}, {top, 5}, {top}] * 10
        expected = [[plain_set_match(a, b) or i == j for j, b in enumerate(sets)] for i, a in enumerate(sets)]
        assert dice_matches(codes_of(sets)).tolist() == expected


def test_pair_codes_hold_the_bigram_sets() -> None:
    """Codes of one text are its bigrams (repeats aside): set sizes and every pair's shared count
    equal those of ``bigram_codes``."""
    texts = ["", "a", "ab", "aaaa", "abab", "ba", "日本日本語", "\U0001f600x\U0001f600", "ｱア", "a"]
    points, lengths = normalize_entries(texts)
    codes = neardup.pair_codes(points, lengths).copy()
    ends = np.cumsum(lengths)
    per_text = [set(codes[end - length : end].tolist()) for end, length in zip(ends, lengths, strict=True)]
    plain = [set(bigram_codes(normalize_entry(t)).tolist()) for t in texts]
    for i in range(len(texts)):
        assert len(per_text[i]) == len(plain[i])
        for j in range(len(texts)):
            assert len(per_text[i] & per_text[j]) == len(plain[i] & plain[j])


def test_lowercase_is_idempotent_per_code_point() -> None:
    """``normalize_entry`` skips the second lowercasing where NFKC changed nothing; this is why."""
    for code in range(sys.maxunicode + 1):
        if 0xD800 <= code <= 0xDFFF:
            continue
        lowered = chr(code).lower()
        assert "".join(c.lower() for c in lowered) == lowered, hex(code)


def contract_normalize(text: str) -> str:
    lowered = unicodedata.normalize("NFKC", "".join(c.lower() for c in text))
    lowered = "".join(c.lower() for c in lowered)
    return "".join(chr(ord(c) - 0x60) if 0x30A1 <= ord(c) <= 0x30F6 else c for c in lowered)


@settings(max_examples=300)
@given(
    st.text(alphabet=st.sampled_from("aZ Σσς İIｱアあヴヶｶﾞ゛ＡⅫ㌔ﬁ日本\u3000\u00a0é\u0301."), max_size=20)
    | st.text(max_size=20)
)
def test_normalize_entry_equals_the_contract_steps(text: str) -> None:
    assert normalize_entry(text) == contract_normalize(text)


@settings(max_examples=200)
@given(st.integers(1, 60), st.integers(0, 2**32 - 1), st.sampled_from([0.0, 0.02, 0.1, 0.5, 1.0]))
def test_survivor_walk_paths_agree(n: int, seed: int, density: float) -> None:
    """Few earlier matches take the pair list, many the row loop: both are the contract's walk."""
    matches = np.random.default_rng(seed).random((n, n)) < density
    assert survivor_walk(matches).tolist() == neardup._survivor_walk_rows(matches).tolist()


BLOCK_CAPS = [(1 << 26, 1 << 25, 1 << 21), (64, 96, 5), (1, 1, 1)]  # (dense, block, pair-piece) bounds


@settings(max_examples=150)
@given(st.lists(TEXT, min_size=1, max_size=24), st.sampled_from(BLOCK_CAPS))
def test_blocked_walk_equals_the_plain_walk_at_any_block_size(texts: list[str], caps: tuple[int, int, int]) -> None:
    """Blocks of one row, a dense part of one bigram and pair pieces of one pair still give the contract's walk."""
    saved = neardup._WALK_DENSE_BYTES, neardup._WALK_BLOCK_BYTES, neardup._WALK_PAIRS
    neardup._WALK_DENSE_BYTES, neardup._WALK_BLOCK_BYTES, neardup._WALK_PAIRS = caps
    try:
        assert neardup.blocked_walk([normalize_entry(t) for t in texts]).tolist() == plain_walk(texts)
    finally:
        neardup._WALK_DENSE_BYTES, neardup._WALK_BLOCK_BYTES, neardup._WALK_PAIRS = saved


def near_identical_pool(n: int, seed: int) -> list[str]:
    """``n`` texts from 40 base texts, most with one character changed: many duplicates, many kept."""
    rng = np.random.default_rng(seed)
    letters = np.array(list("abcdefghij klmnopqrstuvwxyz"))
    bases = ["".join(rng.choice(letters, size=int(rng.integers(20, 80)))) for _ in range(40)]
    texts = []
    for _ in range(n):
        text = bases[int(rng.integers(40))]
        at = int(rng.integers(len(text)))
        texts.append(text[:at] + str(rng.choice(letters)) + text[at + 1 :])
    return texts


def test_a_pool_past_the_kernel_limit_is_walked_in_blocks_with_the_same_verdicts() -> None:
    """2,100 passages (past the bitset kernel's 2,048): pool_walk takes blocked_walk, equal to the matrix walk."""
    texts = [normalize_entry(t) for t in near_identical_pool(2_100, 7)]
    expected = survivor_walk(dice_matches([bigram_codes(t) for t in texts], method="sparse"))
    assert neardup._pool_pairs(*neardup._code_points(texts)) is None
    walk = neardup.pool_walk(texts)
    assert walk.tolist() == expected.tolist()
    assert 0 < int((walk >= 0).sum()) < len(texts)  # both verdicts occur


def test_a_wide_pool_is_walked_in_blocks_with_the_same_verdicts() -> None:
    """Past 4,096 distinct bigrams (random CJK): the general path, equal to the plain walk."""
    rng = np.random.default_rng(3)
    texts = ["".join(chr(0x4E00 + int(c)) for c in rng.integers(0, 3000, size=120)) for _ in range(60)]
    texts += [text[:-1] + "x" for text in texts[:20]]  # near-duplicates of the first twenty
    assert neardup._pool_pairs(*neardup._code_points([normalize_entry(t) for t in texts])) is None
    assert neardup.pool_walk([normalize_entry(t) for t in texts]).tolist() == plain_walk(texts)


@settings(max_examples=150)
@given(st.lists(TEXT, min_size=1, max_size=16), st.integers(0, 2**32 - 1), st.booleans())
def test_a_pair_test_refines_the_walk_and_is_asked_only_about_matching_pairs_against_kept_passages(
    texts: list[str], seed: int, blocked: bool
) -> None:
    """``also``: a pair is a duplicate only if the rule and the test hold; never asked about a dropped passage."""
    rng = np.random.default_rng(seed)
    allowed = rng.random((len(texts), len(texts))) < 0.5
    asked: list[tuple[int, int]] = []

    def also(i: int, j: int) -> bool:
        asked.append((i, j))
        return bool(allowed[i, j])

    normalized = [normalize_entry(t) for t in texts]
    walk = (neardup.blocked_walk(normalized, also) if blocked else neardup.pool_walk(normalized, also)).tolist()
    kept: list[int] = []
    expected = []
    for i, text in enumerate(texts):
        match = next((j for j in kept if plain_match(texts[j], text) and allowed[i, j]), None)
        expected.append(-1 if match is None else match)
        if match is None:
            kept.append(i)
    assert walk == expected
    assert all(j < i and walk[j] < 0 and plain_match(texts[i], texts[j]) for i, j in asked)


@settings(max_examples=100)
@given(st.integers(1, 40), st.integers(0, 2**32 - 1), st.sampled_from([0.0, 0.1, 0.5, 1.0]))
def test_survivor_walk_paths_agree_with_a_pair_test(n: int, seed: int, density: float) -> None:
    rng = np.random.default_rng(seed)
    matches, allowed = rng.random((n, n)) < density, rng.random((n, n)) < 0.5

    def also(i: int, j: int) -> bool:
        return bool(allowed[i, j])

    assert survivor_walk(matches, also).tolist() == neardup._survivor_walk_rows(matches, also).tolist()


# --- from raw texts: duplicate_positions on pools past the small-pool batch (the bitset kernel) ---


def filler(n: int, seed: int) -> list[str]:
    """``n`` unrelated texts (random letters, no two alike)."""
    rng = np.random.default_rng(seed)
    letters = np.array(list("abcdefghijklmnopqrstuvwxyz "))
    return ["".join(rng.choice(letters, size=int(rng.integers(30, 60)))) for _ in range(n)]


BASE = "the brewery was founded in 1902 in iwate"
EDGE_POOLS = {
    "one passage": ["only"],
    "all identical": ["same text"] * 50,
    "all empty": [""] * 40,
    "empty among others": ["", *filler(20, 1), "", "x", "", *filler(20, 2)],
    "first passages empty": [""] * 40 + [*filler(10, 3), *filler(10, 3)],
    "CJK": ["".join(chr(0x4E00 + (7 * i + k) % 500) for k in range(60)) for i in range(40)]
    + ["".join(chr(0x4E00 + (7 * i + k) % 500) for k in range(59)) for i in range(5)],
    "differing only in normalization": [
        BASE,
        *filler(35, 4),
        BASE.upper(),
        BASE.replace("1902", "１９０２"),
        *("リンゴとバナナのおはなし", "りんごとばななのおはなし", "ﾘﾝｺﾞとﾊﾞﾅﾅのおはなし"),
        *("ΟΔΟΣ ΟΔΟΣ", "οδοσ οδοσ"),
    ],
    "Dice exactly 0.9 and just below": ["abcdefghij", *filler(35, 5), "abcdefghijkl", "abcdefghijklm"],
    "first kept match, not the most similar": ["abcdefghij", *filler(35, 6), "abcdefghijk", "abcdefghijk"],
    # The contract's example (section 3): C is a duplicate of A, D matches only the dropped C.
    "a match of a dropped passage only": [
        "The Aomine brewery was founded in 1902 in Iwate.",
        *filler(35, 7),
        "The Aomine brewery was founded in 1902 in Iwate prefecture.",
        "The Aomine brewery was founded in 1902, in Iwate prefecture.",
    ],
}


@pytest.mark.parametrize("name", sorted(EDGE_POOLS))
def test_edge_pools_from_raw_texts_equal_the_plain_walk(name: str) -> None:
    texts = EDGE_POOLS[name]
    walk = duplicate_positions(np.zeros(len(texts), dtype=np.int64), texts).tolist()
    assert walk == plain_walk(texts)
    points, lengths = normalize_entries(texts)
    assert neardup.code_point_walk(points, lengths).tolist() == walk


def test_the_edge_pools_exercise_what_they_name() -> None:
    walk = {name: plain_walk(texts) for name, texts in EDGE_POOLS.items()}
    assert walk["all identical"] == [-1] + [0] * 49  # 1,225 matching pairs: the walk row by row
    assert walk["all empty"] == [-1] + [0] * 39
    assert walk["differing only in normalization"][36:] == [0, 0, -1, 38, 38, -1, 41]
    assert walk["Dice exactly 0.9 and just below"][36:] == [0, -1]
    assert walk["first kept match, not the most similar"][36:] == [0, 0]
    assert walk["a match of a dropped passage only"][36:] == [0, -1]


LARGE_TEXT = st.text(alphabet=st.sampled_from("ab cd ΣσİｱアあＡ日本\u0301ﬁ…é"), max_size=24)


@settings(max_examples=60, deadline=None)
@given(st.lists(LARGE_TEXT, min_size=1, max_size=12), st.integers(33, 90), st.integers(0, 2**32 - 1))
def test_large_pools_from_raw_texts_equal_the_plain_walk(bases: list[str], n: int, seed: int) -> None:
    """Pools past the batch of small pools, drawn around a few bases (one character changed, case
    or width changed), Unicode that takes the string path included."""
    rng = np.random.default_rng(seed)
    texts = []
    for _ in range(n):
        text = bases[int(rng.integers(len(bases)))]
        change = int(rng.integers(4))
        if change == 1 and text:
            at = int(rng.integers(len(text)))
            text = text[:at] + "abΣア"[int(rng.integers(4))] + text[at + 1 :]
        elif change == 2:
            text = text.upper()
        elif change == 3:
            text = text.replace("a", "ａ").replace("あ", "ア")
        texts.append(text)
    assert duplicate_positions(np.zeros(n, dtype=np.int64), texts).tolist() == plain_walk(texts)


# --- many small pools at once: chunks of bitsets, halved when too wide, co-occurrence last ---


@settings(max_examples=40, deadline=None)
@given(
    st.lists(st.lists(TEXT, min_size=2, max_size=9), min_size=1, max_size=30),
    st.sampled_from([(1, 64, 1 << 23), (7, 64, 1 << 23), (512, 1 << 15, 1 << 23), (40, 64, 64), (512, 64, 1)]),
)
def test_small_pools_in_chunks_equal_one_plain_walk_per_pool(
    pools: list[list[str]], caps: tuple[int, int, int]
) -> None:
    """Chunks of one passage, of a few pools, of all of them; chunks too wide for their bitsets
    (halved down to one pool, then counted by co-occurrence): the plain walk of each pool."""
    qs = np.repeat(np.arange(len(pools)), [len(pool) for pool in pools])
    texts = [text for pool in pools for text in pool]
    expected: list[int] = []
    for pool in pools:
        expected += [-1 if j < 0 else j + len(expected) for j in plain_walk(pool)]
    saved = neardup._CHUNK_PASSAGES, neardup._CHUNK_MAX_WIDTH, neardup._CHUNK_INCIDENCE_BYTES
    neardup._CHUNK_PASSAGES, neardup._CHUNK_MAX_WIDTH, neardup._CHUNK_INCIDENCE_BYTES = caps
    try:
        assert duplicate_positions(qs, texts).tolist() == expected
    finally:
        neardup._CHUNK_PASSAGES, neardup._CHUNK_MAX_WIDTH, neardup._CHUNK_INCIDENCE_BYTES = saved


@pytest.mark.parametrize(("cap", "halved", "by_cooccurrence"), [(1 << 15, True, False), (2048, True, True)])
def test_a_chunk_of_small_pools_too_wide_for_bitsets_is_halved_then_counted_by_cooccurrence(
    monkeypatch: pytest.MonkeyPatch, cap: int, halved: bool, by_cooccurrence: bool
) -> None:
    """Random CJK passages (about 4,000 distinct bigrams per pool) with planted duplicates: the
    chunk of twelve pools is past the cap and halved; with a cap below one pool's bigrams, single
    pools are counted by co-occurrence. The walk is the plain one either way."""
    rng = np.random.default_rng(9)
    pools = []
    for _ in range(12):
        pool = ["".join(chr(0x4E00 + int(c)) for c in rng.integers(0, 20000, size=400)) for _ in range(10)]
        pool[5] = pool[1][:-1] + "x"
        pool[8] = pool[5]
        pools.append(pool)
    monkeypatch.setattr(neardup, "_CHUNK_MAX_WIDTH", cap)
    calls = {"chunks": 0, "too wide": 0, "co-occurrence": 0}
    chunk_shared, cooccurrence_shared = neardup._chunk_shared, neardup._cooccurrence_shared

    def counted_chunk(*args: Any) -> Any:
        calls["chunks"] += 1
        result = chunk_shared(*args)
        calls["too wide"] += result is None
        return result

    def counted_cooccurrence(*args: Any) -> Any:
        calls["co-occurrence"] += 1
        return cooccurrence_shared(*args)

    monkeypatch.setattr(neardup, "_chunk_shared", counted_chunk)
    monkeypatch.setattr(neardup, "_cooccurrence_shared", counted_cooccurrence)
    qs = np.repeat(np.arange(12), 10)
    texts = [text for pool in pools for text in pool]
    expected: list[int] = []
    for pool in pools:
        expected += [-1 if j < 0 else j + len(expected) for j in plain_walk(pool)]
    walk = duplicate_positions(qs, texts).tolist()
    assert walk == expected
    assert walk[5] == 1 and walk[8] == 1
    assert (calls["too wide"] > 0) is halved and (calls["co-occurrence"] > 0) is by_cooccurrence
