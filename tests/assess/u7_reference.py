"""A plain per-run implementation of the U7 rules, written from the spec alone: the test oracle.

Deliberately naive (one dict at a time, no Polars) so that it shares no code with
``assembler.assess.rules``; the property tests check the columnar batch against it.
"""

from __future__ import annotations

import re
import unicodedata
from typing import Any

# JavaScript's trim/\s set: WhiteSpace + LineTerminator (the U7 source is TypeScript).
JS_SPACE = set("\t\n\v\f\r \u00a0\u1680\u2028\u2029\u202f\u205f\u3000\ufeff") | {chr(c) for c in range(0x2000, 0x200B)}


def js_trim(text: str) -> str:
    start, end = 0, len(text)
    while start < end and text[start] in JS_SPACE:
        start += 1
    while end > start and text[end - 1] in JS_SPACE:
        end -= 1
    return text[start:end]


def _text(value: Any) -> str | None:
    if not isinstance(value, str):
        return None
    trimmed = js_trim(value)
    return trimmed or None


def _present(value: Any) -> bool:
    return _text(value) is not None


def normalize_path(path: str) -> str:
    text = unicodedata.normalize("NFC", path).lower()
    text = re.sub("[\u2013\u2014]", "-", text)
    text = "".join(" " if c in JS_SPACE else c for c in text)
    text = re.sub(" +", " ", text)
    return js_trim(text)


def reference(
    context: dict[str, Any], *, fall_through: bool = False, history: bool = False, normalize: bool = False
) -> dict[str, Any]:
    """The result without ``version``/``assembled_at`` (they are literals)."""
    raw = context.get("raw_hits")
    trace = (context.get("retrieval_trace") or {}).get("hits")
    hits = raw if raw is not None and (raw or not fall_through) else trace or []
    law = len(hits)
    memory = len(context.get("memory_items") or []) + len(context.get("memory_summaries") or [])
    hist = len(context.get("history") or [])
    docs = len(context.get("doc_snippets") or [])
    profile = context.get("query_profile") or {}
    mode_flag = (profile.get("routing_flags") or {}).get("context_mode")
    if mode_flag is None:
        mode_flag = profile.get("context_mode")
    if law > 0 and (memory > 0 or docs > 0):
        mode = "mixed"
    elif law > 0:
        mode = "law"
    elif docs > 0 and memory == 0:
        mode = "docs_only"
    else:
        mode = "memory_only"
    if mode_flag == "mixed" and law > 0:
        mode = "mixed"
    doclist = context.get("doclist_trace") or {}
    meta = (context.get("retrieval_trace") or {}).get("meta") or {}
    if _present(doclist.get("corpus_gap_status")):
        gap = doclist["corpus_gap_status"]
    elif _present(meta.get("coverage_gap")):
        gap = meta["coverage_gap"]
    else:
        gap = "none"
    gaps = []
    if gap != "none":
        gaps.append(f"coverage_gap:{gap}")
    if _present(doclist.get("reason_code")):
        gaps.append(f"doclist:{doclist['reason_code']}")
    if (context.get("clarification") or {}).get("status") == "pending":
        gaps.append("clarification_pending")
    evidence = law + memory + docs + (hist if history else 0)
    support = "strong" if law >= 3 and gap == "none" else "partial" if evidence > 0 else "weak"
    refs: list[str] = []
    keys: set[str] = set()
    for hit in hits:
        path = _text(hit.get("citation_path")) or _text((hit.get("metadata") or {}).get("citation_path"))
        if path is None:
            continue
        key = normalize_path(path) if normalize else path
        if key in keys:
            continue
        keys.add(key)
        refs.append(path)
        if len(refs) == 6:
            break
    return {
        "mode": mode,
        "source_counts": {"law": law, "memory": memory, "history": hist, "doc": docs},
        "coverage_gap_status": gap,
        "unresolved_gaps": gaps,
        "support_level": support,
        "required_citation_refs": refs,
    }
