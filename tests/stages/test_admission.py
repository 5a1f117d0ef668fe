"""The greedy budgeted admission walk (contract section 8.3-8.5), on hand-built walk frames.

``admit`` sees only measurements: each row is one unit member with its item size and the
citation ids it refers to; units are consecutive rows (``unit_size`` on every member). The
expected outcomes are derived by hand, and for random walks by a plain transcription of the
contract's walk built on ``tests.oracle.reference``'s accounting helpers.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from assembler.contract.request import Limits
from assembler.stages.admission import BUDGET_EXCEEDED, GROUP_EXCEEDS_BUDGET, Admission, admit, array_overhead
from tests.oracle.reference import overhead as reference_overhead
from tests.oracle.reference import tokens_from_quarters as reference_tokens

GENEROUS = Limits(max_items=1000, max_bytes=1_048_576, max_tokens=10**9)


@dataclass(frozen=True)
class Member:
    """One row of the walk: an item's measurements and the citation ids it refers to."""

    item_bytes: int
    item_quarters: int | None = None  # None: same as the bytes (ASCII text)
    cites: tuple[int, ...] = ()

    @property
    def quarters(self) -> int:
        return self.item_bytes if self.item_quarters is None else self.item_quarters


Unit = Sequence[Member]


def walk_frame(queries: Sequence[tuple[int, Sequence[Unit]]]) -> pl.DataFrame:
    """The walk frame of ``[(q, units in admission order), ...]`` (queries in ascending ``q``)."""
    rows: dict[str, list[object]] = {
        "q": [],
        "unit": [],
        "unit_size": [],
        "item_bytes": [],
        "item_quarters": [],
        "citation_ids": [],
    }
    for q, units in queries:
        for index, unit in enumerate(units):
            for member in unit:
                rows["q"].append(q)
                rows["unit"].append(index)
                rows["unit_size"].append(len(unit))
                rows["item_bytes"].append(member.item_bytes)
                rows["item_quarters"].append(member.quarters)
                rows["citation_ids"].append(list(member.cites))
    return pl.DataFrame(
        rows,
        schema={
            "q": pl.UInt32,
            "unit": pl.Int64,
            "unit_size": pl.Int64,
            "item_bytes": pl.Int64,
            "item_quarters": pl.Int64,
            "citation_ids": pl.List(pl.Int64),
        },
    )


def run(
    units: Sequence[Unit],
    limits: Limits = GENEROUS,
    citation_bytes: Sequence[int] = (),
    citation_quarters: Sequence[int] | None = None,
) -> Admission:
    """Admit one query's units."""
    quarters = citation_bytes if citation_quarters is None else citation_quarters
    return admit(walk_frame([(0, units)]), [limits], list(citation_bytes), list(quarters))


def single(*sizes: int) -> list[Unit]:
    """Units of one uncited ASCII member each."""
    return [[Member(size)] for size in sizes]


@dataclass(frozen=True)
class Expected:
    admitted: list[bool]
    reason: list[str | None]
    bytes_after: list[int]
    tokens_after: list[int]
    citation_ids: list[int]
    items_used: int
    bytes_used: int
    tokens_used: int


def reference_admission(
    units: Sequence[Unit], limits: Limits, citation_bytes: Sequence[int], citation_quarters: Sequence[int]
) -> Expected:
    """Section 8.4 written out plainly: the package's totals recomputed from scratch at every step."""
    items: list[Member] = []
    cited: list[int] = []
    admitted: list[bool] = []
    reasons: list[str | None] = []
    bytes_after: list[int] = []
    tokens_after: list[int] = []

    def totals(members: Sequence[Member], citations: Sequence[int]) -> tuple[int, int]:
        if not members:
            return 4, 1  # the empty package's floor (section 8.5)
        size = reference_overhead(len(members)) + reference_overhead(len(citations))
        quarters = size + sum(m.quarters for m in members) + sum(citation_quarters[c] for c in citations)
        size += sum(m.item_bytes for m in members) + sum(citation_bytes[c] for c in citations)
        return size, reference_tokens(quarters)

    for unit in units:
        new = [c for c in dict.fromkeys(c for m in unit for c in m.cites) if c not in cited]
        size, tokens = totals([*items, *unit], [*cited, *new])
        fits = len(items) + len(unit) <= limits.max_items and size <= limits.max_bytes and tokens <= limits.max_tokens
        if fits:
            items.extend(unit)
            cited.extend(new)
        reason = None if fits else GROUP_EXCEEDS_BUDGET if len(unit) > 1 else BUDGET_EXCEEDED
        now = totals(items, cited)
        for _ in unit:
            admitted.append(fits)
            reasons.append(reason)
            bytes_after.append(now[0])
            tokens_after.append(now[1])
    size, tokens = totals(items, cited)
    return Expected(admitted, reasons, bytes_after, tokens_after, cited, len(items), size, tokens)


def assert_matches_reference(
    outcome: Admission,
    units: Sequence[Unit],
    limits: Limits,
    citation_bytes: Sequence[int],
    citation_quarters: Sequence[int],
    q: int = 0,
) -> None:
    expected = reference_admission(units, limits, citation_bytes, citation_quarters)
    assert outcome.citation_ids[q] == expected.citation_ids
    assert (outcome.items_used[q], outcome.bytes_used[q], outcome.tokens_used[q]) == (
        expected.items_used,
        expected.bytes_used,
        expected.tokens_used,
    )


# ---------------------------------------------------------------------------
# array_overhead
# ---------------------------------------------------------------------------


@pytest.mark.parametrize(("count", "expected"), [(0, 2), (1, 2), (2, 3), (3, 4), (40, 41)])
def test_array_overhead_matches_compact_serialization(count: int, expected: int) -> None:
    assert array_overhead(count) == expected
    assert array_overhead(count) == len("[" + ",".join(["x"] * count) + "]") - count


# ---------------------------------------------------------------------------
# The empty package
# ---------------------------------------------------------------------------


def test_an_empty_walk_reports_the_empty_package_floor_for_every_query() -> None:
    outcome = admit(walk_frame([]), [GENEROUS, Limits(0, 0, 0)], [], [])
    assert outcome.admitted == [] and outcome.reason == []
    assert outcome.items_used == [0, 0]
    assert outcome.bytes_used == [4, 4]  # "[]" + "[]"
    assert outcome.tokens_used == [1, 1]
    assert outcome.citation_ids == [[], []]


@pytest.mark.parametrize(
    "limits",
    [Limits(0, 65536, 4000), Limits(40, 0, 4000), Limits(40, 3, 4000), Limits(40, 65536, 0), Limits(0, 0, 0)],
    ids=["items0", "bytes0", "bytes3", "tokens0", "all0"],
)
def test_a_zero_budget_refuses_everything_and_keeps_the_4_byte_1_token_floor(limits: Limits) -> None:
    outcome = run([[Member(1)], [Member(5, cites=(0,))], [Member(2), Member(3)]], limits, [7])
    assert outcome.admitted == [False] * 4
    assert outcome.reason == [BUDGET_EXCEEDED, BUDGET_EXCEEDED, GROUP_EXCEEDS_BUDGET, GROUP_EXCEEDS_BUDGET]
    # The floor is reported even when it exceeds the limits: they bound what is admitted.
    assert (outcome.items_used, outcome.bytes_used, outcome.tokens_used) == ([0], [4], [1])
    assert outcome.bytes_after == [4] * 4 and outcome.tokens_after == [1] * 4
    assert outcome.citation_ids == [[]]


def test_a_budget_of_exactly_the_floor_still_admits_nothing() -> None:
    # One item of one byte needs 2 + 1 + 2 = 5 bytes; 4 bytes (the empty package) is not enough.
    assert run(single(1), Limits(40, 4, 4000)).admitted == [False]
    assert run(single(1), Limits(40, 5, 4000)).admitted == [True]


# ---------------------------------------------------------------------------
# Ceilings: ties at the limit, skip-and-continue
# ---------------------------------------------------------------------------


def test_a_package_of_exactly_max_bytes_fits_and_one_more_byte_does_not() -> None:
    exact = 2 + 10 + 2  # items array "[...]" with one item of 10 bytes, empty citations "[]"
    at_limit = run(single(10), Limits(40, exact, 4000))
    assert at_limit.admitted == [True] and at_limit.bytes_used == [exact]
    assert run(single(10), Limits(40, exact - 1, 4000)).admitted == [False]


def test_a_package_of_exactly_max_tokens_fits_and_one_more_quarter_does_not() -> None:
    # quarters = 2 + q + 2; q = 8 gives exactly 12 quarters = 3 tokens; q = 9 gives 13 → 4 tokens.
    assert run([[Member(1, 8)]], Limits(40, 65536, 3)).admitted == [True]
    assert run([[Member(1, 9)]], Limits(40, 65536, 3)).admitted == [False]


def test_tokens_are_one_ceiling_over_the_combined_quarters_not_a_sum_of_per_item_ceilings() -> None:
    # Per item ceil(1/4) = 1 each; combined: 3 (items array) + 1 + 1 + 2 (citations array) = 7 → 2 tokens.
    outcome = run([[Member(1, 1)], [Member(1, 1)]])
    assert outcome.tokens_used == [2]
    assert outcome.bytes_used == [7]


def test_after_a_byte_refusal_a_later_smaller_unit_is_still_admitted() -> None:
    outcome = run(single(500, 10, 450, 20), Limits(40, 400, 4000))
    assert outcome.admitted == [False, True, False, True]
    assert outcome.reason == [BUDGET_EXCEEDED, None, BUDGET_EXCEEDED, None]
    assert outcome.items_used == [2]
    assert outcome.bytes_used == [3 + 10 + 20 + 2]


def test_after_a_token_refusal_a_later_smaller_unit_is_still_admitted() -> None:
    # Bytes never bind here; the first unit is four-quarter text (non-ASCII) worth 100 tokens.
    outcome = run([[Member(100, 400)], [Member(10)]], Limits(40, 65536, 50))
    assert outcome.admitted == [False, True]
    assert outcome.reason == [BUDGET_EXCEEDED, None]
    assert outcome.tokens_used == [reference_tokens(2 + 10 + 2)]


def test_the_item_count_limit_refuses_every_later_unit_however_small() -> None:
    outcome = run(single(5, 5, 1, 1), Limits(2, 65536, 4000))
    assert outcome.admitted == [True, True, False, False]
    assert outcome.reason == [None, None, BUDGET_EXCEEDED, BUDGET_EXCEEDED]
    assert outcome.items_used == [2]


def test_running_usage_is_recorded_after_each_decision_and_a_refusal_repeats_it() -> None:
    outcome = run(single(10, 500, 20), Limits(40, 100, 4000))
    first = 2 + 10 + 2
    second = 3 + 10 + 20 + 2
    assert outcome.bytes_after == [first, first, second]
    assert outcome.tokens_after == [reference_tokens(first), reference_tokens(first), reference_tokens(second)]
    assert outcome.bytes_used == [second]


# ---------------------------------------------------------------------------
# Contradiction groups (units of several members)
# ---------------------------------------------------------------------------


def test_a_group_that_fits_is_admitted_whole() -> None:
    outcome = run([[Member(10), Member(20), Member(30)]])
    assert outcome.admitted == [True] * 3
    assert outcome.reason == [None] * 3
    assert outcome.items_used == [3]
    assert outcome.bytes_used == [4 + 60 + 2]


def test_a_group_over_the_item_limit_is_refused_whole_with_the_group_reason() -> None:
    # max_items 1: the first member alone would fit, the group does not.
    outcome = run([[Member(10), Member(10)], [Member(10)]], Limits(1, 65536, 4000))
    assert outcome.admitted == [False, False, True]
    assert outcome.reason == [GROUP_EXCEEDS_BUDGET, GROUP_EXCEEDS_BUDGET, None]
    assert outcome.items_used == [1]


def test_a_group_over_the_byte_limit_is_refused_whole_and_the_walk_goes_on() -> None:
    outcome = run([[Member(10)], [Member(40), Member(40)], [Member(30)]], Limits(40, 60, 4000))
    assert outcome.admitted == [True, False, False, True]
    assert outcome.reason == [None, GROUP_EXCEEDS_BUDGET, GROUP_EXCEEDS_BUDGET, None]
    assert outcome.bytes_used == [3 + 10 + 30 + 2]


def test_a_one_member_unit_refusal_is_budget_exceeded_even_after_a_refused_group() -> None:
    outcome = run([[Member(90), Member(90)], [Member(90)]], Limits(40, 50, 4000))
    assert outcome.reason == [GROUP_EXCEEDS_BUDGET, GROUP_EXCEEDS_BUDGET, BUDGET_EXCEEDED]


# ---------------------------------------------------------------------------
# Citations
# ---------------------------------------------------------------------------


def test_a_citation_shared_by_two_units_is_charged_once() -> None:
    outcome = run([[Member(10, cites=(0,))], [Member(20, cites=(0,))]], citation_bytes=[100])
    assert outcome.admitted == [True, True]
    assert outcome.citation_ids == [[0]]
    assert outcome.bytes_used == [3 + 10 + 20 + 2 + 100]
    # With a budget of exactly that usage both still fit: the second unit pays nothing for the citation.
    tight = run([[Member(10, cites=(0,))], [Member(20, cites=(0,))]], Limits(40, 135, 4000), [100])
    assert tight.admitted == [True, True] and tight.bytes_used == [135]


def test_a_citation_shared_inside_one_group_is_charged_once() -> None:
    outcome = run([[Member(10, cites=(0, 1)), Member(20, cites=(1, 0))]], citation_bytes=[100, 50])
    assert outcome.citation_ids == [[0, 1]]
    assert outcome.bytes_used == [3 + 30 + 3 + 150]


def test_citation_quarters_are_charged_like_bytes() -> None:
    outcome = run([[Member(4, 4, cites=(0,))]], citation_bytes=[9], citation_quarters=[30])
    assert outcome.bytes_used == [2 + 4 + 2 + 9]
    assert outcome.tokens_used == [reference_tokens(2 + 4 + 2 + 30)]


def test_a_citation_can_be_what_refuses_a_unit() -> None:
    # The item alone fits in 20 bytes (2 + 10 + 2 = 14); with its 100-byte citation it does not.
    outcome = run([[Member(10, cites=(0,))], [Member(10)]], Limits(40, 20, 4000), [100])
    assert outcome.admitted == [False, True]
    assert outcome.citation_ids == [[]]


def test_a_refused_unit_commits_no_citation_so_a_later_unit_pays_for_it() -> None:
    outcome = run(
        [[Member(500, cites=(0,))], [Member(10, cites=(0,))]],
        Limits(40, 200, 4000),
        [100],
    )
    assert outcome.admitted == [False, True]
    assert outcome.citation_ids == [[0]]
    assert outcome.bytes_used == [2 + 10 + 2 + 100]


def test_committed_citations_are_listed_in_commit_order_not_sorted() -> None:
    outcome = run([[Member(1, cites=(2,))], [Member(1, cites=(0, 1))]], citation_bytes=[1, 1, 1])
    assert outcome.citation_ids == [[2, 0, 1]]


def test_the_citation_array_overhead_counts_new_citations() -> None:
    # Two citations: "[c0,c1]" is 3 bytes of overhead, not 2.
    outcome = run([[Member(1, cites=(0, 1))]], citation_bytes=[5, 6])
    assert outcome.bytes_used == [2 + 1 + 3 + 11]


# ---------------------------------------------------------------------------
# Several queries
# ---------------------------------------------------------------------------


def test_queries_are_walked_independently_with_their_own_limits() -> None:
    frame = walk_frame([(0, single(10, 10)), (2, [[Member(10, cites=(0,))], [Member(10, cites=(0,))]])])
    outcome = admit(frame, [Limits(1, 65536, 4000), GENEROUS, GENEROUS], [100], [100])
    assert outcome.admitted == [True, False, True, True]
    assert outcome.items_used == [1, 0, 2]
    # Query 1 has no rows: the empty package.
    assert (outcome.bytes_used[1], outcome.tokens_used[1]) == (4, 1)
    # The citation is paid for in query 2 even though another query could hold it.
    assert outcome.citation_ids == [[], [], [0]]
    assert outcome.bytes_used[2] == 3 + 20 + 2 + 100


# ---------------------------------------------------------------------------
# Against a plain transcription of the walk
# ---------------------------------------------------------------------------

members = st.builds(
    Member,
    item_bytes=st.integers(1, 120),
    item_quarters=st.none() | st.integers(1, 480),
    cites=st.lists(st.integers(0, 4), max_size=3, unique=True).map(tuple),
)
unit_lists = st.lists(st.lists(members, min_size=1, max_size=3), max_size=8)
limit_values = st.builds(
    Limits,
    max_items=st.integers(0, 10),
    max_bytes=st.integers(0, 700),
    max_tokens=st.integers(0, 200),
)
citation_sizes = st.lists(st.integers(1, 150), min_size=5, max_size=5)


@settings(max_examples=200, deadline=None)
@given(unit_lists, limit_values, citation_sizes, citation_sizes)
def test_the_walk_matches_a_plain_transcription_of_the_contract(
    units: list[list[Member]], limits: Limits, citation_bytes: list[int], citation_quarters: list[int]
) -> None:
    outcome = run(units, limits, citation_bytes, citation_quarters)
    expected = reference_admission(units, limits, citation_bytes, citation_quarters)
    assert outcome.admitted == expected.admitted
    assert outcome.reason == expected.reason
    assert outcome.bytes_after == expected.bytes_after
    assert outcome.tokens_after == expected.tokens_after
    assert_matches_reference(outcome, units, limits, citation_bytes, citation_quarters)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(unit_lists, limit_values), min_size=1, max_size=4), citation_sizes)
def test_a_batch_of_queries_matches_each_query_walked_alone(
    queries: list[tuple[list[list[Member]], Limits]], citation_bytes: list[int]
) -> None:
    frame = walk_frame([(q, units) for q, (units, _) in enumerate(queries)])
    outcome = admit(frame, [limits for _, limits in queries], citation_bytes, citation_bytes)
    offset = 0
    for q, (units, limits) in enumerate(queries):
        alone = run(units, limits, citation_bytes)
        rows = sum(len(unit) for unit in units)
        assert outcome.admitted[offset : offset + rows] == alone.admitted
        assert outcome.reason[offset : offset + rows] == alone.reason
        assert outcome.citation_ids[q] == alone.citation_ids[0]
        assert (outcome.items_used[q], outcome.bytes_used[q], outcome.tokens_used[q]) == (
            alone.items_used[0],
            alone.bytes_used[0],
            alone.tokens_used[0],
        )
        offset += rows


@settings(max_examples=200, deadline=None)
@given(unit_lists, limit_values, citation_sizes)
def test_budgets_are_hard_ceilings_unless_nothing_is_admitted(
    units: list[list[Member]], limits: Limits, citation_bytes: list[int]
) -> None:
    outcome = run(units, limits, citation_bytes)
    assert outcome.items_used[0] == sum(outcome.admitted) <= limits.max_items
    if outcome.items_used[0]:
        assert outcome.bytes_used[0] <= limits.max_bytes
        assert outcome.tokens_used[0] <= limits.max_tokens
    else:
        assert (outcome.bytes_used[0], outcome.tokens_used[0]) == (4, 1)
    assert all((reason is None) == admitted for admitted, reason in zip(outcome.admitted, outcome.reason, strict=True))
    # Usage never decreases along the walk.
    assert outcome.bytes_after == sorted(outcome.bytes_after)
