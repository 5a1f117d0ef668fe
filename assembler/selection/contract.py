"""The contract's selection policy (sections 5-8), byte-exact with the evidence server; the default."""

from __future__ import annotations

import polars as pl

from assembler.selection.base import Selection, SelectionInputs, admit_units, survivor_positions
from assembler.stages.groups import group_contradictions
from assembler.stages.neardup import suppress
from assembler.stages.package import DUPLICATE_PASSAGE

__all__ = ["CONTRACT", "ContractPolicy"]


class ContractPolicy:
    """The contract's selection (sections 5-8): near-duplicates, groups, tiers, greedy walk."""

    name = "contract"

    def select(self, fused: pl.DataFrame, inputs: SelectionInputs) -> Selection:
        """Run the contract's selection over a fused batch."""
        marked = suppress(fused).with_columns(
            reason=pl.when(pl.col("duplicate_of").is_not_null()).then(pl.lit(DUPLICATE_PASSAGE))
        )
        survivors = marked.filter(pl.col("duplicate_of").is_null())
        orders = inputs.reorder(survivors) if inputs.reorder is not None else {}
        units, group_counts = group_contradictions(survivor_positions(survivors, orders))
        return admit_units(marked, units, group_counts, inputs)


CONTRACT = ContractPolicy()
