"""Helpers for the evaluation tests: the committed mini data set and small record builders."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

DATA = Path(__file__).resolve().parent / "data"
EVAL = DATA / "eval.jsonl"
LANES = DATA / "lanes.jsonl"

Writer = Callable[..., Path]


def dumps(value: Any) -> str:
    """Compact JSON, non-ASCII raw."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def passage(
    source: str, paragraph: int, text: str = "本文", score: float = 1.0, vector: bool = False
) -> dict[str, Any]:
    """A PassageHit."""
    lanes: dict[str, Any] = {"bm25": {"rank": 1, "score": score}}
    if vector:
        lanes["vector"] = {"rank": 2, "score": 0.5}
    return {"source": source, "paragraph": paragraph, "score": score, "text": text, "lanes": lanes}


def association(subject: str, label: str, obj: str, *locators: tuple[str, int]) -> dict[str, Any]:
    """An AssociationOut attributed to the given locators."""
    return {
        "subject": subject,
        "label": label,
        "object": obj,
        "weight": 1.0,
        "count": len(locators),
        "attributions": [
            {"source": s, "weight": 1.0, "count": 1, "paragraph": p, "section": None, "locator": None}
            for s, p in locators
        ],
    }


def record(query_id: str, passages: Sequence[dict[str, Any]], **lanes: Any) -> dict[str, Any]:
    """A lane-dump record with the given passage lane (and any other lanes)."""
    return {
        "query_id": query_id,
        "context": "ctx",
        "request": {"origins": [query_id]},
        "lanes": {"passages": list(passages), **lanes},
    }
