"""The Parquet schemas: lane dumps in (one row per query, nested columns) and packages out."""

from __future__ import annotations

import pyarrow as pa

from assembler.stages.lanes_columnar import LANE_DUMP_ARROW

__all__ = ["LANE_DUMP_SCHEMA", "PACKAGE_SCHEMA"]

LANE_DUMP_SCHEMA = LANE_DUMP_ARROW
"""The Parquet form of a lane dump: one row per query, nested columns (see docs/lane-dump.md).

``null`` anywhere means absent; ``origins``/``labels`` are always lists; every ``score`` is stored
as the f64 it was parsed as (rounded to f32 on reading, as from JSON). Derived from the contract's
wire shapes (:data:`assembler.stages.lanes_columnar.LANE_DUMP_FIELDS`), as the JSON Lines reader's is."""

PACKAGE_SCHEMA = pa.schema(
    [
        ("query_id", pa.string()),
        ("package", pa.string()),
        ("items_used", pa.int64()),
        ("bytes_used", pa.int64()),
        ("tokens_used", pa.int64()),
        ("omitted_total", pa.int64()),
        ("omitted_budget_exceeded", pa.int64()),
        ("omitted_contradiction_group_exceeds_budget", pa.int64()),
        ("omitted_duplicate_passage", pa.int64()),
        ("omitted_evidence_in_passage", pa.int64()),
        ("search_limit_cuts", pa.int64()),
    ]
)
"""The Parquet form of the package stream: the package text plus summary columns."""
