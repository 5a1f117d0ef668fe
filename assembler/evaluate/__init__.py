"""Offline evaluation: baseline (fixed-limit passages) versus assembly at equal budget.

Compatible with Taguru's ``evaluate`` (file formats: ``docs/evaluate.md``), run over lane dumps instead
of over HTTP. One module per concern: :mod:`~assembler.evaluate.loader` (eval files),
:mod:`~assembler.evaluate.dump` (lane dumps joined to cases), :mod:`~assembler.evaluate.baseline`
(truncation with the package accounting), :mod:`~assembler.evaluate.assembly` (package to hit
list), :mod:`~assembler.evaluate.structural` (graph-lane expectations),
:mod:`~assembler.evaluate.metrics` and :mod:`~assembler.evaluate.catalog` (scores and the 31
metrics), :mod:`~assembler.evaluate.harness` (one run), :mod:`~assembler.evaluate.artifact`,
:mod:`~assembler.evaluate.thresholds`, :mod:`~assembler.evaluate.compare`,
:mod:`~assembler.evaluate.sweep` and :mod:`~assembler.evaluate.plot`.
"""

from assembler.evaluate.compare import compare_paths, compare_reports, load_report
from assembler.evaluate.dump import load_lanes
from assembler.evaluate.errors import EvaluateError
from assembler.evaluate.harness import RunConfig, run_artifact
from assembler.evaluate.loader import EvalSet, load_eval
from assembler.evaluate.thresholds import evaluate_gate, load_thresholds

__all__ = [
    "EvalSet",
    "EvaluateError",
    "RunConfig",
    "compare_paths",
    "compare_reports",
    "evaluate_gate",
    "load_eval",
    "load_lanes",
    "load_report",
    "load_thresholds",
    "run_artifact",
]
