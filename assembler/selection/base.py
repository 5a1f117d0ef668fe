"""The selection policy seam: what a policy reads, what it returns, and the shared back half.

Everything before selection (lanes in, fusion, citation lookup) and everything after it (package
text) is shared. A :class:`SelectionPolicy` decides, from the fused candidates, which are dropped
as duplicates, how the rest form admission units, in which order they are offered, and which are
admitted; :func:`admit_units` is the back half every policy shares (item texts, tiers, the walk).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

import polars as pl

from assembler.contract.request import Limits
from assembler.stages import collect
from assembler.stages.admission import admit
from assembler.stages.diversity import tiered
from assembler.stages.groups import materialize_contradicts
from assembler.stages.package import build_items
from assembler.stages.reorder import Reorderer, is_permutation

__all__ = [
    "Selection",
    "SelectionInputs",
    "SelectionPolicy",
    "admit_units",
    "survivor_positions",
    "with_admitted_group_texts",
]


@dataclass(frozen=True, eq=False)  # holds frames or arrays: compared by identity
class SelectionInputs:
    """What a policy may read besides the fused candidates; all sequences are indexed by ``q``.

    ``citations`` holds the resolved locators (``citation_id``, ``q``, ``source``, ``paragraph``)
    that the candidates' ``citation_ids`` point at.

    ``reorder`` is called once with the survivors of near-duplicate suppression and returns a
    permutation per ``q`` (section 11.1); an invalid permutation is ignored.
    """

    citations: pl.DataFrame
    limits: Sequence[Limits]
    tier_widths: Sequence[int]
    citation_bytes: Sequence[int]
    citation_quarters: Sequence[int]
    reorder: Reorderer | None = None


@dataclass(frozen=True, eq=False)  # holds frames or arrays: compared by identity
class Selection:
    """A policy's decisions.

    ``decisions``: one row per fused candidate with at least ``q``, ``fused_rank``, ``id_json``,
    ``kind``, ``duplicate_of_json`` (null unless dropped as a duplicate), ``walk_step`` (null
    for duplicates), ``admitted``, ``reason``, ``item_json``, ``item_bytes`` and ``item_quarters``.
    ``item_json`` (and ``contradicts_json``) is null for a member of a contradiction group of more
    than :data:`~assembler.stages.groups.EAGER_GROUP_SIZE` that was not admitted: that text is
    quadratic in the group's size and goes into no package, so it is never built;
    ``item_bytes``/``item_quarters`` are exact for every row.
    Per query: the committed
    ``citation_ids`` and the final usage, the number of ``contradiction_groups`` and the
    diversity ``tier_widths`` used (reported in ``plan.selection``).
    """

    decisions: pl.DataFrame
    citation_ids: Sequence[Sequence[int]]
    items_used: Sequence[int]
    bytes_used: Sequence[int]
    tokens_used: Sequence[int]
    contradiction_groups: Sequence[int]
    tier_widths: Sequence[int]


class SelectionPolicy(Protocol):
    """A named selection rule set."""

    @property
    def name(self) -> str:
        """The name ``--policy`` selects it by."""
        ...

    def select(self, fused: pl.DataFrame, inputs: SelectionInputs) -> Selection:
        """Decide every fused candidate of the batch."""
        ...


def survivor_positions(survivors: pl.DataFrame, reorders: Mapping[int, Sequence[int]]) -> pl.DataFrame:
    """Add ``position``: the survivor's place per query, fused order unless validly reordered."""
    survivors = survivors.with_columns(position=pl.int_range(pl.len()).over("q").cast(pl.Int64))
    if not reorders:
        return survivors
    counts = dict(survivors.group_by("q").len().iter_rows())
    moved_q: list[int] = []
    moved_from: list[int] = []
    moved_to: list[int] = []
    for q, order in reorders.items():
        if is_permutation(order, counts.get(q, 0)):
            moved_q.extend([q] * len(order))
            moved_from.extend(order)
            moved_to.extend(range(len(order)))
    if not moved_q:
        return survivors
    moves = pl.DataFrame(
        {"q": moved_q, "position": moved_from, "new_position": moved_to},
        schema={"q": pl.UInt32, "position": pl.Int64, "new_position": pl.Int64},
    )
    return (
        survivors.join(moves, on=["q", "position"], how="left")
        .with_columns(position=pl.coalesce("new_position", "position"))
        .drop("new_position")
        .sort("q", "position")
    )


def admit_units(
    marked: pl.DataFrame,
    units: pl.DataFrame,
    group_counts: pl.DataFrame,
    inputs: SelectionInputs,
    tier_widths: Sequence[int] | None = None,
) -> Selection:
    """The shared back half of selection: item texts, diversity tiers, the budget walk, decisions.

    ``marked`` is every fused candidate with ``reason`` (and ``duplicate_of``/``duplicate_of_json``)
    set for those dropped before the walk; ``units`` the survivors with admission units assigned
    (:func:`~assembler.stages.groups.group_contradictions`). The walk runs on measurements alone; the
    ``contradicts`` texts are built afterwards for the admitted groups only
    (:func:`with_admitted_group_texts`).
    ``tier_widths`` overrides the contract's diversity tier widths (1 = no reordering).
    """
    tier_widths = inputs.tier_widths if tier_widths is None else tier_widths
    widths = pl.DataFrame(
        {"q": range(len(tier_widths)), "tier_width": tier_widths},
        schema={"q": pl.UInt32, "tier_width": pl.Int64},
    )
    walk = collect(
        tiered(build_items(units).lazy().join(widths.lazy(), on="q"))
        .sort("q", "admission_order", "position")
        .with_columns(walk_step=pl.int_range(pl.len()).over("q").cast(pl.Int64))
    )[0]
    outcome = admit(walk, inputs.limits, inputs.citation_bytes, inputs.citation_quarters)
    walk = walk.with_columns(
        admitted=pl.Series(outcome.admitted, dtype=pl.Boolean),
        walk_reason=pl.Series(outcome.reason, dtype=pl.String),
        bytes_after=pl.Series(outcome.bytes_after, dtype=pl.Int64),
        tokens_after=pl.Series(outcome.tokens_after, dtype=pl.Int64),
    )
    walk = with_admitted_group_texts(walk)
    decisions = (
        marked.lazy()
        .join(
            walk.lazy().select(
                "q",
                "fused_rank",
                "position",
                "unit",
                "unit_size",
                "contradicts_json",
                "tier",
                "repeat",
                "admission_order",
                "walk_step",
                "admitted",
                "walk_reason",
                "item_json",
                "item_bytes",
                "item_quarters",
                "bytes_after",
                "tokens_after",
            ),
            on=["q", "fused_rank"],
            how="left",
            maintain_order="left",
        )
        .with_columns(admitted=pl.col("admitted").fill_null(False), reason=pl.coalesce("walk_reason", "reason"))
        .drop("walk_reason")
    )
    groups = [0] * len(inputs.limits)
    for q, count in group_counts.iter_rows():
        groups[q] = count
    return Selection(
        decisions=collect(decisions)[0],
        citation_ids=outcome.citation_ids,
        items_used=outcome.items_used,
        bytes_used=outcome.bytes_used,
        tokens_used=outcome.tokens_used,
        contradiction_groups=groups,
        tier_widths=tier_widths,
    )


def with_admitted_group_texts(walk: pl.DataFrame) -> pl.DataFrame:
    """Build ``contradicts_json`` and ``item_json`` for the members of the admitted groups that
    have none yet (groups larger than :data:`~assembler.stages.groups.EAGER_GROUP_SIZE`).

    ``build_items`` measured every such member from ``contradicts_bytes``/``contradicts_quarters``
    and left its text null (a group's texts are quadratic in its size: 20,000 members would carry
    400 million ids). The walk admits a group whole or not at all and needs only the measurements,
    so the texts are built here for the admitted ones, whose size the query's ``max_bytes`` bounds.
    Rebuilding an item recomputes its measurements from the text; they equal the walk's.
    """
    admitted = walk.filter(
        pl.col("admitted") & pl.col("contradicts_bytes").is_not_null() & pl.col("contradicts_json").is_null()
    )
    if admitted.height == 0:
        return walk
    texts = build_items(materialize_contradicts(admitted)).select("q", "fused_rank", "contradicts_json", "item_json")
    built = (
        walk.lazy()
        .join(texts.lazy(), on=["q", "fused_rank"], how="left", suffix="_built", maintain_order="left")
        .with_columns(
            contradicts_json=pl.coalesce("contradicts_json_built", "contradicts_json"),
            item_json=pl.coalesce("item_json_built", "item_json"),
        )
        .drop("contradicts_json_built", "item_json_built")
    )
    return collect(built)[0]
