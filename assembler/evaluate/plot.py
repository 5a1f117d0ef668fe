"""The sweep's plot: recall@k and source diversity against the budget, baseline versus assembly.

matplotlib is an optional extra (the ``plot`` extra), imported only here and only
when a plot is drawn.
"""

from __future__ import annotations

import importlib
import io
from typing import Any

from assembler.errors import install_hint
from assembler.evaluate.errors import EvaluateError
from assembler.evaluate.sweep import MODES, SweepResult, swept_key

__all__ = ["PANELS", "render_figures", "require_matplotlib"]

PANELS = (("recall.recall_at_k", "recall@k (mean over cases)"), ("diversity.sources", "distinct sources (mean)"))
_STYLE = {"baseline": {"marker": "o", "linestyle": "--"}, "assembly": {"marker": "s", "linestyle": "-"}}


def require_matplotlib() -> Any:
    """The ``matplotlib.pyplot`` module with a file-only backend, or a clear usage error."""
    try:
        matplotlib = importlib.import_module("matplotlib")  # not a static import: the extra is optional
    except ImportError:
        raise EvaluateError(f"the sweep plot needs matplotlib: {install_hint('plot')} (or pass --no-plot)") from None
    matplotlib.use("Agg")
    return importlib.import_module("matplotlib.pyplot")


def render_figures(result: SweepResult, title: str) -> dict[str, bytes]:
    """``{"sweep.png": ..., "sweep.svg": ...}``."""
    plt = require_matplotlib()
    key = swept_key(result.budgets)
    if key is not None:
        xs: list[float] = [float(getattr(budget.limits, key)) for budget in result.budgets]
        xlabel = key
    else:
        xs = [float(i) for i in range(len(result.budgets))]
        xlabel = "budget"
    figure, axes = plt.subplots(1, len(PANELS), figsize=(5.5 * len(PANELS), 4.0), constrained_layout=True)
    for axis, (metric, label) in zip(axes, PANELS, strict=True):
        for mode in MODES:
            name = mode if mode == "baseline" else f"assembly ({result.policy})"
            points = [
                (x, value)
                for x, budget in zip(xs, result.budgets, strict=True)
                if (value := result.value(budget, mode, metric)) is not None
            ]
            if points:
                axis.plot([p[0] for p in points], [p[1] for p in points], label=name, **_STYLE[mode])
        axis.set_xlabel(xlabel)
        axis.set_ylabel(label)
        axis.grid(True, alpha=0.3)
        if key is None:
            axis.set_xticks(xs, [budget.label for budget in result.budgets], rotation=20, ha="right")
        elif max(xs) / max(min(xs), 1.0) > 20:
            axis.set_xscale("log")
        axis.legend()
    figure.suptitle(title)
    figures = {}
    for fmt in ("png", "svg"):
        buffer = io.BytesIO()
        metadata = {"Date": None} if fmt == "svg" else {"Software": None}
        figure.savefig(buffer, format=fmt, dpi=120, metadata=metadata)
        figures[f"sweep.{fmt}"] = buffer.getvalue()
    plt.close(figure)
    return figures
