"""Analysis API: Polars frames that explain how a batch was assembled, for notebooks and ``explain``.

``analyze(source)`` assembles a lane dump once and returns a :class:`BatchAnalysis` with one row
per fused candidate (lanes and ranks, each lane's RRF contribution, exact-dedup merges,
near-duplicate verdict and survivor, contradiction group, diversity tier, admission position,
decision and reason, budget used so far), one row per (candidate, lane) and one per query.
:mod:`assembler.analysis.budgets` sweeps budgets, :mod:`assembler.analysis.dice` opens the
near-duplicate step. Plots are in :mod:`assembler.analysis.plotting` (optional matplotlib).
"""

from assembler.analysis.budgets import binding_limits, budget_sweep
from assembler.analysis.dice import dice_matrix, dice_pairs, kernel_timings, passage_pool, threshold_sweep
from assembler.analysis.frames import (
    BatchAnalysis,
    Source,
    analyze,
    candidate_frame,
    decision_diff,
    group_frame,
    lane_frame,
    load_records,
    position_wins,
    query_frame,
    with_limits,
    without_lane,
)

__all__ = [
    "BatchAnalysis",
    "Source",
    "analyze",
    "binding_limits",
    "budget_sweep",
    "candidate_frame",
    "decision_diff",
    "dice_matrix",
    "dice_pairs",
    "group_frame",
    "kernel_timings",
    "lane_frame",
    "load_records",
    "passage_pool",
    "position_wins",
    "query_frame",
    "threshold_sweep",
    "with_limits",
    "without_lane",
]
