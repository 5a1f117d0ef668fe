"""The admission walk with all queries stepped side by side (``admit(..., method="across")``).

The vectorized walk must give exactly the per-query walk's outcome: the contract's plain
transcription (``tests.stages.test_admission.reference_admission``) per query, and the per-query
implementation on whole batches, including the citation cases where a refused unit must not
commit the citations it brings.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from assembler.contract.request import Limits
from assembler.stages.admission import BUDGET_EXCEEDED, GROUP_EXCEEDS_BUDGET, SETUP_COST_ROWS, STEP_COST_ROWS, admit
from tests.stages.test_admission import (
    GENEROUS,
    Member,
    citation_sizes,
    limit_values,
    reference_admission,
    unit_lists,
    walk_frame,
)


def test_a_refused_unit_commits_no_citation_in_any_query_walked_side_by_side() -> None:
    # Query 0 refuses the 500-byte unit, so its citation is paid by the next one; query 1 admits both.
    units = [[Member(500, cites=(0,))], [Member(10, cites=(0,))]]
    frame = walk_frame([(0, units), (1, units)])
    outcome = admit(frame, [Limits(40, 200, 4000), GENEROUS], [100], [100], method="across")
    assert outcome.admitted == [False, True, True, True]
    assert outcome.reason == [BUDGET_EXCEEDED, None, None, None]
    assert outcome.citation_ids == [[0], [0]]
    assert outcome.bytes_used == [2 + 10 + 2 + 100, 3 + 510 + 2 + 100]


def test_a_citation_shared_inside_a_group_is_charged_once_side_by_side() -> None:
    group = [[Member(10, cites=(0, 1)), Member(20, cites=(1, 0))]]
    frame = walk_frame([(0, group), (1, group)])
    outcome = admit(frame, [GENEROUS, Limits(1, 65536, 4000)], [100, 50], [100, 50], method="across")
    assert outcome.admitted == [True, True, False, False]
    assert outcome.reason == [None, None, GROUP_EXCEEDS_BUDGET, GROUP_EXCEEDS_BUDGET]
    assert outcome.citation_ids == [[0, 1], []]
    assert outcome.bytes_used == [3 + 30 + 3 + 150, 4]


def test_queries_without_rows_keep_the_empty_package_side_by_side() -> None:
    frame = walk_frame([(1, [[Member(5)]]), (3, [[Member(7)], [Member(2)]])])
    outcome = admit(frame, [GENEROUS] * 5, [], [], method="across")
    assert outcome.items_used == [0, 1, 0, 2, 0]
    assert outcome.bytes_used == [4, 2 + 5 + 2, 4, 3 + 9 + 2, 4]
    assert outcome.tokens_used[0] == 1 and outcome.citation_ids == [[], [], [], [], []]


def test_an_unknown_method_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match="method"):
        admit(walk_frame([]), [], [], [], method="fast")  # type: ignore[arg-type]


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(unit_lists, limit_values), min_size=1, max_size=6), citation_sizes, citation_sizes)
def test_walking_queries_side_by_side_matches_walking_them_one_at_a_time(
    queries: list[tuple[list[list[Member]], Limits]], citation_bytes: list[int], citation_quarters: list[int]
) -> None:
    frame = walk_frame([(q, units) for q, (units, _) in enumerate(queries)])
    limits = [limits for _, limits in queries]
    across = admit(frame, limits, citation_bytes, citation_quarters, method="across")
    assert across == admit(frame, limits, citation_bytes, citation_quarters, method="per_query")
    offset = 0
    for q, (units, query_limits) in enumerate(queries):
        expected = reference_admission(units, query_limits, citation_bytes, citation_quarters)
        rows = sum(len(unit) for unit in units)
        assert across.admitted[offset : offset + rows] == expected.admitted
        assert across.reason[offset : offset + rows] == expected.reason
        assert across.bytes_after[offset : offset + rows] == expected.bytes_after
        assert across.tokens_after[offset : offset + rows] == expected.tokens_after
        assert across.citation_ids[q] == expected.citation_ids
        assert (across.items_used[q], across.bytes_used[q], across.tokens_used[q]) == (
            expected.items_used,
            expected.bytes_used,
            expected.tokens_used,
        )
        offset += rows


@settings(max_examples=20, deadline=None)
@given(st.lists(st.tuples(unit_lists, limit_values), min_size=1, max_size=6), citation_sizes)
def test_the_automatic_choice_gives_the_per_query_outcome_on_wide_batches(
    queries: list[tuple[list[list[Member]], Limits]], citation_bytes: list[int]
) -> None:
    # The queries repeated until the batch has rows enough for "auto" to walk it side by side.
    rows = max(1, sum(len(unit) for units, _ in queries for unit in units))
    wide = queries * (1 + (SETUP_COST_ROWS + STEP_COST_ROWS * 8) // rows)
    frame = walk_frame([(q, units) for q, (units, _) in enumerate(wide)])
    limits = [limits for _, limits in wide]
    assert admit(frame, limits, citation_bytes, citation_bytes) == admit(
        frame, limits, citation_bytes, citation_bytes, method="per_query"
    )
