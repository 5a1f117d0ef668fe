"""Plots of the analysis frames (:mod:`assembler.analysis`) for the notebooks.

matplotlib is an optional extra (``pip install 'assembler[plot]'``), imported on the first plot.
Every function draws on ``ax`` (a new figure when it is None) and returns the axes it drew on.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
import polars as pl

__all__ = [
    "OUTCOME_COLORS",
    "bars",
    "budget_usage",
    "curves",
    "dice_heatmap",
    "dice_histogram",
    "kernel_cost",
    "lane_wins",
    "outcome",
    "pyplot",
    "rank_flow",
    "tiering",
]

OUTCOME_COLORS = {
    "admitted": "#2a9d4b",
    "budget_exceeded": "#d62728",
    "contradiction_group_exceeds_budget": "#9467bd",
    "duplicate_passage": "#ff7f0e",
    "evidence_in_passage": "#8c564b",
}
_LANE_ORDER = ("graph_query", "graph_activate", "passage_bm25", "passage_fused", "passage_vector", "community")


def pyplot() -> Any:
    """``matplotlib.pyplot``, or an ``ImportError`` saying which extra to install."""
    try:
        return importlib.import_module("matplotlib.pyplot")
    except ImportError:
        raise ImportError("plots need matplotlib: pip install 'assembler[plot]'") from None


def _axes(ax: Any, size: tuple[float, float] = (7.0, 4.5)) -> Any:
    if ax is not None:
        return ax
    _, new = pyplot().subplots(figsize=size, constrained_layout=True)
    return new


def outcome(admitted: bool, reason: str | None) -> str:
    """``admitted`` or the omission reason (the keys of :data:`OUTCOME_COLORS`)."""
    return "admitted" if admitted else (reason or "omitted")


def _lane_order(lanes: Sequence[str]) -> list[str]:
    known = [lane for lane in _LANE_ORDER if lane in lanes]
    return known + sorted(set(lanes) - set(known))


def _log_x(ax: Any, values: Sequence[float]) -> None:
    """A log x axis ticked at the values themselves, written plainly."""
    ax.set_xscale("log")
    ax.minorticks_off()
    ax.set_xticks(list(values), [f"{v:g}" for v in values])


def _lane_color(lane: str, fallback: int) -> str:
    """One colour per known lane, the same in every plot."""
    index = _LANE_ORDER.index(lane) if lane in _LANE_ORDER else len(_LANE_ORDER) + fallback
    return f"C{index % 10}"


def _legend(ax: Any, labels: Sequence[str], **kwargs: Any) -> None:
    lines = pyplot().Line2D
    handles = [lines([], [], color=OUTCOME_COLORS.get(label, "grey"), lw=3, label=label) for label in labels]
    ax.legend(handles=handles, fontsize="small", **kwargs)


def rank_flow(lanes: pl.DataFrame, query_id: str, *, ax: Any = None) -> Any:
    """Lines from each lane rank (one column per lane) to the fused rank (last column) of one query.

    ``lanes`` is a :func:`~assembler.analysis.lane_frame`; line colour is the final outcome and
    line width the lane's RRF contribution.
    """
    ax = _axes(ax)
    rows = lanes.filter(pl.col("query_id") == query_id)
    order = _lane_order(rows["lane"].unique().to_list())
    fused_x = len(order)
    peak = float(rows["contribution"].to_numpy().max(initial=1e-12))
    seen: set[str] = set()
    for row in rows.iter_rows(named=True):
        label = outcome(row["admitted"], row["reason"])
        seen.add(label)
        x0 = order.index(row["lane"])
        ax.plot(
            [x0, fused_x],
            [row["lane_rank"], row["fused_rank"]],
            color=OUTCOME_COLORS.get(label, "grey"),
            lw=0.6 + 2.4 * row["contribution"] / peak,
            alpha=0.75,
            marker="o",
            ms=3,
        )
    for rank, kind in rows.unique("fused_rank").select("fused_rank", "kind").iter_rows():
        ax.annotate(
            f"{rank} {kind[0]}", (fused_x, rank), xytext=(6, 0), textcoords="offset points", va="center", fontsize=7
        )
    ax.set_xticks(range(fused_x + 1), [*order, "fused"], rotation=20, ha="right")
    ax.set_xlim(-0.3, fused_x + 0.6)
    ax.invert_yaxis()
    ax.set_ylabel("rank (1 = top)")
    ax.set_title(f"{query_id}: lane ranks to fused rank")
    _legend(ax, [k for k in OUTCOME_COLORS if k in seen] + sorted(seen - set(OUTCOME_COLORS)), loc="lower left")
    return ax


def lane_wins(wins: pl.DataFrame, *, by: str = "lead_lane", ax: Any = None) -> Any:
    """Stacked share of each ``by`` value at each fused position (a :func:`~assembler.analysis.position_wins`)."""
    ax = _axes(ax)
    positions = sorted(wins["fused_rank"].unique().to_list())
    values = wins[by].unique().to_list()
    groups = _lane_order(values) if by == "lead_lane" else sorted(values)
    bottom = np.zeros(len(positions))
    for index, group in enumerate(groups):
        shares = dict(wins.filter(pl.col(by) == group).select("fused_rank", "share").iter_rows())
        heights = np.array([shares.get(p, 0.0) for p in positions])
        ax.bar(positions, heights, bottom=bottom, label=group, color=_lane_color(group, index))
        bottom += heights
    ax.set_xticks(positions)
    ax.set_xlabel("fused position")
    ax.set_ylabel("share of queries")
    ax.set_ylim(0, 1)
    ax.legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.0, 1.0))
    ax.set_title(f"who holds the top positions ({by})")
    return ax


def budget_usage(sweep: pl.DataFrame, *, axes: Any = None) -> Any:
    """Two panels over a :func:`~assembler.analysis.budget_sweep`: share of each limit used, omissions by reason."""
    if axes is None:
        _, axes = pyplot().subplots(1, 2, figsize=(11.0, 4.0), constrained_layout=True)
    key = sweep["key"][0]
    used = (
        sweep.group_by("budget")
        .agg(
            (pl.col("items_used") / pl.col("max_items")).mean().alias("items"),
            (pl.col("bytes_used") / pl.col("max_bytes")).mean().alias("bytes"),
            (pl.col("tokens_used") / pl.col("max_tokens")).mean().alias("tokens"),
        )
        .sort("budget")
    )
    budgets = used["budget"].to_numpy()
    for name, marker in (("items", "o"), ("bytes", "s"), ("tokens", "^")):
        axes[0].plot(budgets, used[name].to_numpy(), marker=marker, label=f"{name} used / limit")
    axes[0].set_ylabel("mean share of the limit used")
    reasons = [c for c in sweep.columns if c.startswith("omitted_") and c != "omitted_total"]
    omitted = sweep.group_by("budget").agg(pl.col(reasons).sum()).sort("budget")
    bottom = np.zeros(len(budgets))
    for reason in reasons:
        counts = omitted[reason].to_numpy().astype(float)
        if counts.any():
            name = reason.removeprefix("omitted_")
            axes[1].fill_between(
                budgets, bottom, bottom + counts, step=None, alpha=0.8, label=name, color=OUTCOME_COLORS.get(name)
            )
            bottom += counts
    axes[1].set_ylabel("candidates omitted (all queries)")
    for axis in axes:
        axis.set_xlabel(f"{key} (tightening to the left)")
        if budgets.max() / max(budgets.min(), 1) > 20:
            _log_x(axis, budgets.tolist())
        axis.grid(True, alpha=0.3)
        axis.legend(fontsize="small")
    return axes


def curves(
    frame: pl.DataFrame,
    x: str,
    y: str,
    hue: str,
    *,
    ax: Any = None,
    styles: Mapping[str, Mapping[str, Any]] | None = None,
    log_x: bool = False,
) -> Any:
    """One line of ``y`` against ``x`` per value of ``hue`` (e.g. baseline versus assembly)."""
    ax = _axes(ax, (6.0, 4.0))
    for (value,), part in frame.sort(x).group_by(hue, maintain_order=True):
        style = {"marker": "o", **(styles or {}).get(str(value), {})}
        ax.plot(part[x].to_numpy(), part[y].to_numpy(), label=str(value), **style)
    ax.set_xlabel(x)
    ax.set_ylabel(y)
    if log_x:
        _log_x(ax, sorted(set(frame[x].to_list())))
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize="small")
    return ax


def bars(frame: pl.DataFrame, x: str, y: str, hue: str, *, ax: Any = None) -> Any:
    """Grouped bars of ``y`` per ``x``, one bar per value of ``hue``."""
    ax = _axes(ax, (6.0, 4.0))
    xs = frame[x].unique(maintain_order=True).to_list()
    hues = frame[hue].unique(maintain_order=True).to_list()
    width = 0.8 / max(len(hues), 1)
    for index, value in enumerate(hues):
        heights = dict(frame.filter(pl.col(hue) == value).select(x, y).iter_rows())
        positions = np.arange(len(xs)) + (index - (len(hues) - 1) / 2) * width
        ax.bar(positions, [heights.get(v, 0) for v in xs], width=width, label=str(value), color=f"C{index % 10}")
    ax.set_xticks(range(len(xs)), [str(v) for v in xs])
    ax.set_xlabel(x)
    ax.set_ylabel(y)
    ax.legend(fontsize="small")
    return ax


def dice_heatmap(
    dice: npt.NDArray[np.float64], labels: Sequence[str], *, threshold: float = 0.9, ax: Any = None
) -> Any:
    """The Dice matrix of one pool; pairs at or above ``threshold`` are outlined."""
    ax = _axes(ax, (6.5, 5.5))
    image = ax.imshow(dice, vmin=0.0, vmax=1.0, cmap="viridis")
    n = dice.shape[0]
    for i in range(n):
        for j in range(n):
            if i != j and dice[i, j] >= threshold:
                ax.add_patch(pyplot().Rectangle((j - 0.5, i - 0.5), 1, 1, fill=False, ec="red", lw=2))
            if n <= 12:
                shade = "black" if dice[i, j] > 0.6 else "white"
                ax.text(j, i, f"{dice[i, j]:.2f}", ha="center", va="center", fontsize=7, color=shade)
    ax.set_xticks(range(n), labels, rotation=60, ha="right", fontsize=7)
    ax.set_yticks(range(n), labels, fontsize=7)
    ax.figure.colorbar(image, ax=ax, label="bigram Dice")
    ax.set_title(f"bigram Dice (red: >= {threshold})")
    return ax


def dice_histogram(values: Mapping[str, Sequence[float]], *, threshold: float = 0.9, ax: Any = None) -> Any:
    """Distribution of pairwise Dice coefficients per data set, with the threshold marked."""
    ax = _axes(ax, (6.5, 4.0))
    bins = np.linspace(0.0, 1.0, 41)
    for index, (label, data) in enumerate(values.items()):
        ax.hist(list(data), bins=bins, alpha=0.55, label=f"{label} ({len(data)} pairs)", color=f"C{index % 10}")
    ax.axvline(threshold, color="red", ls="--", lw=1.2, label=f"threshold {threshold}")
    ax.set_yscale("log")
    ax.set_xlabel("bigram Dice of a passage pair (same query)")
    ax.set_ylabel("pairs")
    ax.legend(fontsize="small")
    return ax


def kernel_cost(timings: pl.DataFrame, *, ax: Any = None) -> Any:
    """Seconds of each part of the near-duplicate step against pool size, log-log, with an n² guide."""
    ax = _axes(ax, (6.0, 4.0))
    sizes = timings["size"].to_numpy().astype(float)
    for part, marker in (("prepare", "o"), ("matrix", "s"), ("walk", "^")):
        ax.plot(sizes, timings[part].to_numpy() * 1e3, marker=marker, label=part)
    total = (timings["prepare"] + timings["matrix"] + timings["walk"]).to_numpy() * 1e3
    guide = total[-1] * (sizes / sizes[-1]) ** 2
    ax.plot(sizes, guide, "k:", label="∝ n² (through the last total)")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("passages in the pool (n)")
    ax.set_ylabel("milliseconds (best of runs)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize="small")
    return ax


def tiering(candidates: pl.DataFrame, query_id: str, *, ax: Any = None) -> Any:
    """Units in fused order (left) against their admission order (right) for one query.

    Blue lines are units whose source is novel, grey ones repeats; dashed lines mark the tiers.
    The right marker is the outcome: a dot if admitted, a cross if refused by the budget.
    """
    ax = _axes(ax, (6.0, 6.0))
    units = (
        candidates.filter((pl.col("query_id") == query_id) & pl.col("walk_step").is_not_null())
        .sort("walk_step")
        .unique("unit", keep="first", maintain_order=True)
    )
    width = int(candidates.filter(pl.col("query_id") == query_id)["tier_width"][0])
    for row in units.iter_rows(named=True):
        color = "C0" if row["novel"] else "0.6"
        ax.plot([0, 1], [row["unit"], row["admission_order"]], color=color, lw=1.5)
        ax.plot(
            1,
            row["admission_order"],
            marker="o" if row["admitted"] else "x",
            color=OUTCOME_COLORS.get(outcome(row["admitted"], row["reason"]), "grey"),
        )
        ax.annotate(
            f"#{row['fused_rank']} {row['kind'][0]} {row['source'] or '-'}",
            (1, row["admission_order"]),
            xytext=(8, 0),
            textcoords="offset points",
            va="center",
            fontsize=7,
        )
    last = int(units["unit"].to_numpy().max(initial=0))
    for boundary in range(width, last + 1, width):
        ax.axhline(boundary - 0.5, color="k", ls="--", lw=0.6)
    ax.set_xticks([0, 1], ["fused unit order", "admission order"])
    ax.yaxis.get_major_locator().set_params(integer=True)
    ax.set_xlim(-0.2, 2.2)
    ax.invert_yaxis()
    ax.set_ylabel("position")
    ax.set_title(f"{query_id}: diversity tiers (width {width})")
    return ax
