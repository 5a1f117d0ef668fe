"""Diversity tiering (contract section 7), on hand-built unit frames.

``tier_units`` orders admission units; a unit's source is its first member's. The expected
orders come from the contract's examples, from hand derivation, and for random inputs from the
contract's sequential rule (the ``seen`` set walked tier by tier, as ``tests/oracle/reference.py``
does inline) written out below.
"""

from __future__ import annotations

from collections.abc import Sequence

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from assembler.stages.diversity import tier_units, tier_width

Source = str | None


def units_frame(queries: Sequence[tuple[int, int, Sequence[Sequence[Source]]]]) -> pl.DataFrame:
    """Rows of ``[(q, tier_width, units)]``, each unit a list of its members' sources."""
    rows: dict[str, list[object]] = {"q": [], "unit": [], "position": [], "source": [], "tier_width": []}
    for q, width, units in queries:
        position = 0
        for index, unit in enumerate(units):
            for source in unit:
                rows["q"].append(q)
                rows["unit"].append(index)
                rows["position"].append(position)
                rows["source"].append(source)
                rows["tier_width"].append(width)
                position += 1
    return pl.DataFrame(
        rows,
        schema={"q": pl.UInt32, "unit": pl.Int64, "position": pl.Int64, "source": pl.String, "tier_width": pl.Int64},
    )


def order(units: Sequence[Source | Sequence[Source]], width: int) -> list[int]:
    """Unit indices in admission order, for one query; a bare source is a one-member unit."""
    members = [[unit] if unit is None or isinstance(unit, str) else list(unit) for unit in units]
    tiered = tier_units(units_frame([(0, width, members)]))
    heads = tiered.sort("position").unique("unit", keep="first", maintain_order=True).sort("admission_order")
    return heads["unit"].to_list()


def reference_order(sources: Sequence[Source], width: int) -> list[int]:
    """Section 7 as written: a global ``seen`` set, novel units then repeats in each tier."""
    ordered: list[int] = []
    seen: set[str] = set()
    for start in range(0, len(sources), width):
        recorded: set[str] = set()
        novel: list[int] = []
        repeat: list[int] = []
        for index in range(start, min(start + width, len(sources))):
            source = sources[index]
            if source is None:
                novel.append(index)
            elif source in seen or source in recorded:
                repeat.append(index)
            else:
                novel.append(index)
                recorded.add(source)
        seen |= recorded
        ordered += novel + repeat
    return ordered


# ---------------------------------------------------------------------------
# tier_width
# ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("max_items", "width"),
    [(0, 1), (1, 1), (3, 1), (4, 1), (7, 1), (8, 2), (11, 2), (12, 3), (40, 10), (1000, 250)],
)
def test_tier_width_is_a_quarter_of_max_items_and_at_least_one(max_items: int, width: int) -> None:
    assert tier_width(max_items) == width


def test_tier_width_agrees_with_the_formula_everywhere_in_range() -> None:
    assert [tier_width(n) for n in range(1001)] == [max(1, n // 4) for n in range(1001)]


# ---------------------------------------------------------------------------
# The contract's examples
# ---------------------------------------------------------------------------


def test_a_novel_source_moves_ahead_of_a_repeat_within_a_tier() -> None:
    # max_items 12, width 3: dominant#0, dominant#1, other → dominant#0, other, dominant#1.
    assert order(["dominant", "dominant", "other"], tier_width(12)) == [0, 2, 1]


def test_a_source_seen_in_an_earlier_tier_is_a_repeat() -> None:
    # width 2: alpha#0, beta | alpha#1, gamma → alpha#0, beta, gamma, alpha#1.
    assert order(["alpha", "beta", "alpha", "gamma"], 2) == [0, 1, 3, 2]


# ---------------------------------------------------------------------------
# Edge cases and ties
# ---------------------------------------------------------------------------


def test_one_unit_tiers_keep_the_unit_order() -> None:
    assert order(["a", "a", "b", "a", "b"], 1) == [0, 1, 2, 3, 4]


def test_a_tier_wider_than_the_pool_puts_every_first_occurrence_first() -> None:
    assert order(["a", "a", "b", "a", "c", "b"], 10) == [0, 2, 4, 1, 3, 5]


def test_repeats_and_novel_units_each_keep_their_relative_order() -> None:
    assert order(["x", "x", "x", "y", "x", "z"], 6) == [0, 3, 5, 1, 2, 4]


def test_unsourced_units_are_always_novel_and_never_repeats_of_each_other() -> None:
    assert order(["a", None, "a", None, None], 5) == [0, 1, 3, 4, 2]


def test_an_unsourced_unit_does_not_record_anything() -> None:
    # width 2: [None, a | a, None]: the second tier's "a" repeats the first tier's, None stays novel.
    assert order([None, "a", "a", None], 2) == [0, 1, 3, 2]


def test_a_tier_of_only_repeats_keeps_its_order() -> None:
    assert order(["a", "b", "b", "a"], 2) == [0, 1, 2, 3]


def test_sources_are_compared_exactly() -> None:
    # Different case, a trailing space, or full-width letters are different sources.
    assert order(["a.md", "a.md", "A.md", "a.md ", "ａ.md"], 5) == [0, 2, 3, 4, 1]


def test_a_novel_unit_in_a_later_tier_never_jumps_into_an_earlier_tier() -> None:
    # width 2: [a, a | b, c]: unit 1 is a repeat but stays in the first tier, ahead of b and c.
    assert order(["a", "a", "b", "c"], 2) == [0, 1, 2, 3]


def test_a_last_partial_tier_is_reordered_too() -> None:
    # width 3: [a, b, c | a, d]: a repeats, d is novel → d first in the last tier.
    assert order(["a", "b", "c", "a", "d"], 3) == [0, 1, 2, 4, 3]


def test_a_groups_source_is_its_first_members() -> None:
    # Unit 0 is a group led by "a" (second member "b"): "b" was never recorded, so unit 1 is novel;
    # unit 2 ("a") repeats the group's source.
    assert order([["a", "b"], "b", "a", "c"], 4) == [0, 1, 3, 2]


def test_every_member_of_a_group_gets_the_groups_admission_order() -> None:
    tiered = tier_units(units_frame([(0, 3, [["a"], ["a", "z", "y"], ["b"]])])).sort("position")
    assert tiered["unit"].to_list() == [0, 1, 1, 1, 2]
    assert tiered["admission_order"].to_list() == [0, 2, 2, 2, 1]
    assert tiered["repeat"].to_list() == [False, True, True, True, False]


def test_tier_and_repeat_columns_say_why() -> None:
    tiered = tier_units(units_frame([(0, 2, [["a"], ["a"], [None], ["b"], ["b"]])])).sort("position")
    assert tiered["tier"].to_list() == [0, 0, 1, 1, 2]
    assert tiered["repeat"].to_list() == [False, True, False, False, True]
    assert tiered["admission_order"].to_list() == [0, 1, 2, 3, 4]


def test_queries_are_tiered_independently_with_their_own_widths() -> None:
    frame = units_frame([(0, 1, [["a"], ["a"], ["b"]]), (3, 3, [["b"], ["b"], ["a"]])])
    tiered = tier_units(frame).sort("q", "position")
    # q0 (width 1): unit order; q3 (width 3): "b" seen in q0 is still novel in q3.
    assert tiered["admission_order"].to_list() == [0, 1, 2, 0, 2, 1]
    assert tiered["repeat"].to_list() == [False, True, False, False, True, False]


def test_every_input_row_and_column_is_kept() -> None:
    frame = units_frame([(0, 2, [["a", "b"], ["c"], ["a"]])]).with_columns(extra=pl.lit("kept"))
    tiered = tier_units(frame)
    assert tiered.height == frame.height
    assert set(frame.columns) < set(tiered.columns)
    assert tiered.sort("position").select(frame.columns).equals(frame)


def test_rows_come_back_in_the_order_they_came_in() -> None:
    """The tiers join back onto the units keeping their row order (a lazy join need not keep it)."""
    frame = units_frame([(0, 2, [["a", "b"], ["c"], ["a"]]), (1, 1, [["d"], ["d"]])]).reverse()
    assert tier_units(frame).select(frame.columns).equals(frame)


def test_an_empty_frame_stays_empty() -> None:
    tiered = tier_units(units_frame([]))
    assert tiered.height == 0
    assert "admission_order" in tiered.columns


# ---------------------------------------------------------------------------
# Properties
# ---------------------------------------------------------------------------

sources = st.lists(st.none() | st.sampled_from(["a", "b", "c", "d", "Σ"]), max_size=14)


@settings(max_examples=200, deadline=None)
@given(sources, st.integers(1, 6))
def test_the_order_matches_the_sequential_rule(unit_sources: list[Source], width: int) -> None:
    assert order(unit_sources, width) == reference_order(unit_sources, width)


@settings(max_examples=100, deadline=None)
@given(sources, st.integers(1, 6))
def test_tiering_is_a_permutation_within_each_tier(unit_sources: list[Source], width: int) -> None:
    ordered = order(unit_sources, width)
    assert sorted(ordered) == list(range(len(unit_sources)))
    # Each admission slot holds a unit of the same tier: tiers never mix.
    assert [unit // width for unit in ordered] == [slot // width for slot in range(len(ordered))]


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(sources, st.integers(1, 6)), min_size=1, max_size=4))
def test_a_batch_tiers_like_each_query_alone(queries: list[tuple[list[Source], int]]) -> None:
    frame = units_frame([(q, width, [[s] for s in unit_sources]) for q, (unit_sources, width) in enumerate(queries)])
    tiered = tier_units(frame).sort("q", "admission_order")
    for q, (unit_sources, width) in enumerate(queries):
        assert tiered.filter(pl.col("q") == q)["unit"].to_list() == reference_order(unit_sources, width)
