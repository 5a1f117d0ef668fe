"""The run artifact's shapes: scalars of metric values, per-case values, atomic JSON writing.

>>> scalar({"n": 2, "mean": 0.75}, "distribution"), scalar({"value": 0.5, "n": 4}, "ratio")
(0.75, 0.5)
>>> case_value({"recall": {"ndcg": 0.5}, "diversity_sources": 3}, "recall.ndcg")
0.5
>>> case_value({"coverage": {"labels": {"value": 1.0}}}, "coverage.concepts") is None
True
>>> case_value({"answer_in_context": 1}, "answers.in_context")
1.0

Answer-in-context (``--answers``) is additive: a case block's ``answer_in_context`` and the top-level
``answers`` block after ``metrics``, shaped like the artifact itself (``definitions`` and
``metrics`` of its one metric), so a reader that does not know it reads the rest unchanged.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Mapping
from typing import Any

from assembler.run.atomic import AtomicFile

__all__ = [
    "case_value",
    "dump_json",
    "generated_at",
    "scalar",
    "write_json",
    "write_lines",
    "write_text",
]


def generated_at(now: float | None = None) -> str:
    """UTC, whole seconds: ``YYYY-MM-DDTHH:MM:SSZ``."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(now))


def scalar(value: Any, statistic: str) -> float | None:
    """Distribution -> ``mean``; ratio and count -> ``value``; None when missing or not a number."""
    if not isinstance(value, Mapping):
        return None
    key = "mean" if statistic == "distribution" else "value"
    return _number(value.get(key))


def _number(value: Any) -> float | None:
    """``value`` as a float; None when it is no number, or an integer past a float's range (an
    artifact edited by hand: it is not applicable rather than an OverflowError)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        return float(value)
    except OverflowError:
        return None


def _get(block: Any, *path: str) -> Any:
    for key in path:
        if not isinstance(block, Mapping):
            return None
        block = block.get(key)
    return block


def case_value(block: Mapping[str, Any], metric: str) -> float | None:
    """A case-scoped metric's value read from a ``CaseBlock`` (None = not applicable)."""
    paths: dict[str, tuple[str, ...]] = {
        "recall.recall_at_k": ("recall", "recall_at_k"),
        "recall.mrr": ("recall", "mrr"),
        "recall.ndcg": ("recall", "ndcg"),
        "coverage.concepts": ("coverage", "concepts", "value"),
        "coverage.labels": ("coverage", "labels", "value"),
        "coverage.associations": ("coverage", "associations", "value"),
        "citations.recall": ("citations", "recall", "value"),
        "citations.locator_validity": ("citations", "validity", "value"),
        "latency.passage_ms": ("passage", "latency_ms"),
        "diversity.sources": ("diversity_sources",),
        "answers.in_context": ("answer_in_context",),
    }
    path = paths.get(metric)
    return None if path is None else _number(_get(block, *path))


def dump_json(value: Any) -> str:
    """Pretty-printed JSON text (UTF-8 raw, two-space indent, trailing newline)."""
    return json.dumps(value, ensure_ascii=False, indent=2) + "\n"


def write_text(path: str, text: str) -> None:
    """Write through a temporary file renamed into place: never a partial file."""
    with AtomicFile(path) as out:
        out.handle.write(text)
        out.commit()


def write_json(path: str, value: Any) -> None:
    """:func:`write_text` of :func:`dump_json`."""
    write_text(path, dump_json(value))


def write_lines(path: str, lines: Iterable[str]) -> None:
    """Write text lines (each given without its newline) atomically."""
    write_text(path, "".join(line + "\n" for line in lines))
