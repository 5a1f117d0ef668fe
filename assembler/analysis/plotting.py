"""Plots of the analysis frames (:mod:`assembler.analysis`) for the notebooks.

matplotlib is an optional extra (the ``plot`` extra), imported on the first plot.
Every function draws on ``ax`` (a new figure when it is None) and returns the axes it drew on.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
import polars as pl

from assembler.errors import install_hint
from assembler.stages.fuse import RRF_K

__all__ = [
    "KERNEL_PARTS",
    "OUTCOME_COLORS",
    "OUTCOME_MARKS",
    "RANK_FLOW_FUSED",
    "TIER_LEGEND",
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
    "short_label",
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
        raise ImportError(f"plots need matplotlib: {install_hint('plot')}") from None


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


def short_label(candidate_id: str, width: int = 18) -> str:
    """A candidate id cut down for a plot label: ``file:paragraph`` for a passage or community,
    ``subject·label·object`` for an association, at most ``width`` characters.

    >>> short_label("passage\\x00brewery\\x00corpus/long_dense.md\\x002")
    'long_dense.md:2'
    >>> short_label("association\\x00subject\\x00has label\\x00a long object", 16)
    'subject·has lab…'
    """
    kind, *rest = candidate_id.split("\x00")
    if kind in ("passage", "community") and len(rest) >= 3:
        text = f"{rest[1].rsplit('/', 1)[-1]}:{rest[2]}"
    else:
        text = "·".join(rest) or kind
    return text if len(text) <= width else text[: width - 1] + "…"


def _renderable(text: str) -> bool:
    """Whether the fonts of ``font.family`` have a glyph for every character of ``text``.

    Without a CJK font, Japanese labels would print as empty boxes (and warn once per glyph).
    """
    if text.isascii():
        return True
    try:
        matplotlib = importlib.import_module("matplotlib")
        manager = importlib.import_module("matplotlib.font_manager")
        ft2font = importlib.import_module("matplotlib.ft2font")
        generic = {"serif", "sans-serif", "cursive", "fantasy", "monospace"}
        # A generic family stands for its rcParams list, every font of which serves as a fallback.
        names = [
            name
            for family in matplotlib.rcParams["font.family"]
            for name in (matplotlib.rcParams[f"font.{family}"] if family in generic else [family])
        ]
        covered: set[int] = set()
        for name in names:
            try:
                path = manager.findfont(manager.FontProperties(family=[name]), fallback_to_default=False)
            except ValueError:  # not installed
                continue
            covered.update(ft2font.FT2Font(path).get_charmap())
    except (ImportError, OSError, RuntimeError, KeyError):  # unknown: show the text as it is
        return True
    return all(ord(char) in covered for char in text)


def _smooth(xs: Sequence[float], ys: Sequence[float], steps: int = 24) -> tuple[list[float], list[float]]:
    """A polyline through the points, each step an S-curve flat at both ends (a bump chart's line)."""
    out_x, out_y = [float(xs[0])], [float(ys[0])]
    for (x0, y0), (x1, y1) in zip(zip(xs, ys, strict=True), zip(xs[1:], ys[1:], strict=True), strict=False):
        t = np.linspace(0.0, 1.0, steps)[1:]
        ease = t * t * (3.0 - 2.0 * t)
        out_x += (x0 + (x1 - x0) * t).tolist()
        out_y += (y0 + (y1 - y0) * ease).tolist()
    return out_x, out_y


RANK_FLOW_FUSED = "fused rank"
"""The x tick of :func:`rank_flow`'s fused column."""

OUTCOME_MARKS = {
    "admitted": "✓",
    "budget_exceeded": "✗ budget",
    "contradiction_group_exceeds_budget": "✗ group",
    "duplicate_passage": "✗ dup",
    "evidence_in_passage": "✗ in passage",
}
"""How :func:`rank_flow` labels each outcome at the fused end."""


def _rank_flow_columns(lanes: Sequence[str]) -> tuple[dict[str, float], float]:
    """x of each lane and of the fused column: graph lanes left of it, the others right of it
    (mirrored, the first one nearest), so association and passage lines never cross a column of
    the other kind; all on the left when one side is empty."""
    order = _lane_order(lanes)
    left = [lane for lane in order if lane.startswith("graph")]
    right = [lane for lane in order if lane not in left]
    if not left or not right:
        return {lane: float(x) for x, lane in enumerate(order)}, float(len(order))
    fused = len(left) + 0.5  # a wider gap either side: the labels sit on the fused column
    columns = {lane: float(x) for x, lane in enumerate(left)}
    columns.update({lane: fused + 1.5 + x for x, lane in enumerate(right)})
    return columns, fused


def rank_flow(lanes: pl.DataFrame, query_id: str, *, top: int = 20, ax: Any = None) -> Any:
    """A bump chart of one query: a column per lane at each candidate's rank there, and the fused rank.

    ``lanes`` is a :func:`~assembler.analysis.lane_frame`. Each of the first ``top`` fused
    candidates is one line from the lanes that returned it to its fused rank (graph lanes left of
    the fused column, passage and community lanes right of it), coloured by its best lane (the
    representative's: smallest ``(lane rank, lane)``, the ``lead_lane`` of the candidate frame)
    and dashed when it was omitted. The number at each lane point is that lane's RRF
    contribution x 1000 (``1000 / (60 + rank)``). The label at the fused rank is ``#rank``, the
    kind's initial, a short id (:func:`short_label`; left out where the font lacks its glyphs),
    the fused score x 1000 (the contributions' sum) and the outcome (:data:`OUTCOME_MARKS`).
    """
    rows = lanes.filter(pl.col("query_id") == query_id)
    fused_count = int(rows["fused_rank"].n_unique())
    columns, fused_x = _rank_flow_columns(rows["lane"].unique().to_list())
    centred = any(x > fused_x for x in columns.values())
    rows = rows.filter(pl.col("fused_rank") <= top)
    deepest = int(max(rows["lane_rank"].to_numpy().max(initial=1), rows["fused_rank"].to_numpy().max(initial=1)))
    last_x = max([fused_x, *columns.values()])
    ax = _axes(ax, (2.0 * last_x + (6.5 if centred else 8.5), max(4.5, 0.3 * deepest + 2.0)))
    for x in [*columns.values(), fused_x]:
        ax.axvline(x, color="0.88", lw=1.0, zorder=0)
    best_lanes: set[str] = set()
    outcomes: set[str] = set()
    for (rank,), entries in rows.sort("fused_rank").group_by("fused_rank", maintain_order=True):
        first = entries.row(0, named=True)
        best = str(entries.sort("lane_rank", "lane")["lane"][0])
        color = _lane_color(best, len(best_lanes))
        label = outcome(first["admitted"], first["reason"])
        points = [
            (columns[lane], r, value)
            for lane, r, value in entries.select("lane", "lane_rank", "contribution").iter_rows()
        ]
        for side in ([p for p in points if p[0] < fused_x], [p for p in points if p[0] > fused_x]):
            if not side:
                continue
            side.sort(key=lambda point: abs(point[0] - fused_x), reverse=True)  # outer lane first
            xs, ys = [p[0] for p in side], [float(p[1]) for p in side]
            ax.plot(
                *_smooth([*xs, fused_x], [*ys, float(rank)]),
                color=color,
                lw=1.8,
                alpha=0.8,
                ls="-" if first["admitted"] else "--",
                zorder=1,
            )
            ax.scatter(xs, ys, s=28, color=color, edgecolors="white", linewidths=0.6, zorder=3)
            for x, y, value in side:
                ax.annotate(
                    f"{1000 * value:.1f}", (x, y), xytext=(4, 3), textcoords="offset points", fontsize=6.5, color=color
                )
        short = short_label(first["candidate_id"])
        text = f"#{rank} {first['kind'][0]}" + (f" {short}" if _renderable(short) else "")
        text += f"  Σ{1000 * first['score']:.1f} {OUTCOME_MARKS.get(label, '✗ ' + label)}"
        ax.annotate(
            text,
            (fused_x, rank),
            xytext=(0, 0) if centred else (6, 0),
            textcoords="offset points",
            ha="center" if centred else "left",
            va="center",
            fontsize=7.5,
            zorder=5,
            bbox={"boxstyle": "round,pad=0.2", "fc": "white", "ec": "0.6" if first["admitted"] else "0.2", "lw": 0.6},
        )
        best_lanes.add(best)
        outcomes.add(label)
    ticks = sorted([(x, lane) for lane, x in columns.items()] + [(fused_x, RANK_FLOW_FUSED)])
    ax.set_xticks([x for x, _ in ticks], [name for _, name in ticks])
    ax.set_xlim(-0.4, last_x + (0.4 if centred else 1.8))
    ax.set_ylim(deepest + 0.8, 0.2)
    ax.yaxis.get_major_locator().set_params(integer=True)
    ax.set_ylabel("rank (1 = top)")
    ax.set_xlabel(
        "lane columns: the candidate's rank in that lane; middle: its fused rank"
        if centred
        else "lane columns: the candidate's rank in that lane; last: its fused rank"
    )
    shown = f" (first {top} of {fused_count} fused)" if fused_count > top else ""
    ax.set_title(f"{query_id}: lane ranks to fused rank{shown}")
    lines = pyplot().Line2D
    handles = [
        lines([], [], color=_lane_color(lane, index), lw=2, marker="o", label=f"best lane {lane}")
        for index, lane in enumerate(_lane_order(list(best_lanes)))
    ]
    handles.append(lines([], [], color="0.3", lw=1.8, ls="--", label="dashed: omitted"))
    marks = [k for k in OUTCOME_MARKS if k in outcomes] + sorted(outcomes - set(OUTCOME_MARKS))
    notes = [
        f"numbers: RRF contribution x1000 = 1000 / ({RRF_K:g} + lane rank)",
        "label: #fused rank, kind (a/p/c), id,",
        "    Σ: fused score x1000 (their sum), outcome:",
        *(f"    {OUTCOME_MARKS.get(k, '✗ ' + k)} = {k}" for k in marks),
    ]
    handles += [lines([], [], ls="none", label=note) for note in notes]
    ax.legend(handles=handles, fontsize="small", loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
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
    axes[0].set_title("what a package uses of each limit")
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
    axes[1].set_title("what is omitted, by reason (stacked)")
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
    """The Dice matrix of one pool; pairs at or above ``threshold`` are outlined in red.

    The colour bar's label says what the outline means, so it survives a caller's own title.
    """
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
    ax.figure.colorbar(image, ax=ax, label=f"bigram Dice (red outline: >= {threshold:g}, a near-duplicate pair)")
    ax.set_title(f"bigram Dice (red: >= {threshold})")
    return ax


def dice_histogram(values: Mapping[str, Sequence[float]], *, threshold: float = 0.9, ax: Any = None) -> Any:
    """Distribution of pairwise Dice coefficients per data set, with the threshold marked.

    Each data set is a light fill under its own outline (line style per data set), so one hidden
    behind another still shows.
    """
    ax = _axes(ax, (6.5, 4.0))
    bins = np.linspace(0.0, 1.0, 41)
    for index, (label, data) in enumerate(values.items()):
        color = f"C{index % 10}"
        ax.hist(list(data), bins=bins, alpha=0.15, color=color)
        ax.hist(
            list(data),
            bins=bins,
            histtype="step",
            lw=1.8,
            ls=("-", "--", ":", "-.")[index % 4],
            color=color,
            label=f"{label} ({len(data)} pairs)",
        )
    ax.axvline(threshold, color="red", ls="--", lw=1.2, label=f"threshold {threshold}")
    ax.set_yscale("log")
    ax.set_xlabel("bigram Dice of a passage pair (same query)")
    ax.set_ylabel("pairs (log scale)")
    ax.set_title("how close passage pairs come to the threshold")
    ax.legend(fontsize="small")
    return ax


KERNEL_PARTS = {
    "prepare": "prepare: normalize + bigram sets",
    "matrix": "matrix: all-pairs verdicts",
    "walk": "walk: survivor walk",
}
"""The legend entry of each part :func:`kernel_cost` draws (the columns of ``kernel_timings``)."""


def kernel_cost(timings: pl.DataFrame, *, ax: Any = None) -> Any:
    """Milliseconds of each part of the near-duplicate step against pool size, log-log, with
    n and n² guides through the last total (the x ticks are the sizes timed)."""
    ax = _axes(ax, (6.0, 4.0))
    sizes = timings["size"].to_numpy().astype(float)
    for part, marker in (("prepare", "o"), ("matrix", "s"), ("walk", "^")):
        ax.plot(sizes, timings[part].to_numpy() * 1e3, marker=marker, label=KERNEL_PARTS[part])
    total = (timings["prepare"] + timings["matrix"] + timings["walk"]).to_numpy() * 1e3
    ax.plot(sizes, total[-1] * (sizes / sizes[-1]), color="0.5", ls="--", lw=1, label="∝ n (through the last total)")
    ax.plot(sizes, total[-1] * (sizes / sizes[-1]) ** 2, "k:", label="∝ n² (through the last total)")
    _log_x(ax, [int(size) for size in sizes])
    ax.set_yscale("log")
    ax.set_xlabel("passages in the pool (n)")
    ax.set_ylabel("milliseconds (best of runs)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize="small")
    return ax


TIER_LEGEND = ("novel source (first occurrence)", "repeat source", "tier boundary")
"""The entries every :func:`tiering` legend has (the outcomes present follow)."""


def tiering(candidates: pl.DataFrame, query_id: str, *, ax: Any = None) -> Any:
    """Units in fused order (left) against their admission order (right) for one query.

    Blue lines are units whose source is novel, grey ones repeats; dashed lines mark the tiers
    (labelled on the left). The right marker is the outcome: a dot if admitted, a cross in the
    reason's colour if refused; the label is the fused rank, the kind's initial and the source.
    The legend says all of this (:data:`TIER_LEGEND`, then the outcomes present).
    """
    ax = _axes(ax, (8.5, 6.0))
    units = (
        candidates.filter((pl.col("query_id") == query_id) & pl.col("walk_step").is_not_null())
        .sort("walk_step")
        .unique("unit", keep="first", maintain_order=True)
    )
    width = int(candidates.filter(pl.col("query_id") == query_id)["tier_width"][0])
    outcomes: set[str] = set()
    for row in units.iter_rows(named=True):
        color = "C0" if row["novel"] else "0.6"
        label = outcome(row["admitted"], row["reason"])
        outcomes.add(label)
        ax.plot([0, 1], [row["unit"], row["admission_order"]], color=color, lw=1.5)
        ax.plot(
            1, row["admission_order"], marker="o" if row["admitted"] else "x", color=OUTCOME_COLORS.get(label, "grey")
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
    for tier, top in enumerate(range(0, last + 1, max(width, 1))):
        middle = (top + min(top + width, last + 1) - 1) / 2
        ax.text(-0.12, middle, f"tier {tier}", rotation=90, ha="center", va="center", fontsize=8, color="0.35")
    ax.set_xticks([0, 1], ["fused unit order", "admission order"])
    ax.yaxis.get_major_locator().set_params(integer=True)
    ax.set_xlim(-0.2, 2.2)
    ax.invert_yaxis()
    ax.set_ylabel("unit position (0 = first)")
    ax.set_title(f"{query_id}: diversity tiers (width {width})")
    lines = pyplot().Line2D
    novel, repeat, boundary_label = TIER_LEGEND
    handles = [
        lines([], [], color="C0", lw=1.5, label=novel),
        lines([], [], color="0.6", lw=1.5, label=repeat),
        lines([], [], color="k", ls="--", lw=0.6, label=boundary_label),
    ]
    for name in [k for k in OUTCOME_COLORS if k in outcomes] + sorted(outcomes - set(OUTCOME_COLORS)):
        handles.append(
            lines(
                [],
                [],
                ls="none",
                marker="o" if name == "admitted" else "x",
                color=OUTCOME_COLORS.get(name, "grey"),
                label=name if name == "admitted" else f"refused: {name}",
            )
        )
    handles.append(lines([], [], ls="none", label="label: #fused rank, kind (a/p/c), source"))
    ax.legend(handles=handles, fontsize="small", loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    return ax
