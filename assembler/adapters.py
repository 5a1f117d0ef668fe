"""Lane-dump records from ranked lists of Python retrievers, and packages back as their documents.

**In**: :func:`lane_record` turns ranked hits, per passage lane (``bm25``, ``vector``), into the
minimal valid lane-dump record (``docs/lane-dump.md``): ``query_id``, ``context``, ``request``
with ``origins`` (and the query as ``text_fallback_query``), and a ``passages`` lane whose every
hit has an integer ``paragraph``, a ``lanes`` object with its rank and score in each lane it came
from, and, as its own ``score``, the reciprocal-rank fusion of ``assembler lanes build``
(:func:`assembler.retrieval.hybrid.fuse_hits`: ``1/(60 + bm25_rank) + 1/(60 + vector_rank)``,
f32), the list ordered by that score, ties by ``(source, paragraph)``. A hit is any of, told
apart by duck typing (no framework is imported):

* a tuple ``(id, text, score)`` or ``(id, text, score, metadata)``, or ``(document, score)`` with a
  framework document below;
* a dict with ``id``, ``text`` and optionally ``score`` and ``metadata``;
* a LangChain ``Document`` (``id``, ``page_content``, ``metadata``; no score);
* a LlamaIndex ``NodeWithScore`` (``node.node_id``, ``node.text``, ``node.metadata``, ``score``);
* a Haystack ``Document`` (``id``, ``content``, ``meta``, ``score``).

Lists are ranked: position = lane rank (1-based), as a retriever returns them. A hit's locator is
``(source, paragraph)`` = ``(id, 0)``, the default rule of ``assembler lanes from-runs``, unless
``locate`` maps it otherwise; a missing score is written as 0.0 in its lane (fusion reads ranks).
:func:`record_line` writes a record as a lane-dump line for ``assembler assemble`` and ``evaluate``.

**Out**: :func:`package_documents` reads a package (its text, the parsed object, or an output line
``{"query_id", "package"}``) and gives each admitted item, in package order, as ``{id, text, score,
metadata}``; :func:`to_langchain`, :func:`to_llama_index` and :func:`to_haystack` build that
framework's documents from them, importing it only then. Guide: ``docs/adapters.md``.

>>> record = lane_record("q1", {"bm25": [("a", "Aomine was founded in 1902.", 7.5), ("b", "Takase.", 3.0)],
...                             "vector": [("b", "Takase.", 0.9)]}, query="When was Aomine founded?")
>>> [(p["source"], p["paragraph"], p["lanes"]) for p in record["lanes"]["passages"]]
[('b', 0, {'bm25': {'rank': 2, 'score': 3.0}, 'vector': {'rank': 1, 'score': 0.8999999761581421}}), \
('a', 0, {'bm25': {'rank': 1, 'score': 7.5}})]
>>> record["request"]
{'origins': [], 'text_fallback_query': 'When was Aomine founded?', 'search_limit': 2}
"""

from __future__ import annotations

import importlib
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from assembler.contract.jsoninput import read_json
from assembler.contract.jsontext import to_f32
from assembler.contract.request import MAX_SEARCH_LIMIT
from assembler.contract.wire import ShapeError
from assembler.errors import UsageError, shown
from assembler.retrieval.build import record_text
from assembler.retrieval.hybrid import fuse_hits
from assembler.stages.lanes import parse_record

__all__ = [
    "LANES",
    "Hit",
    "as_hit",
    "fused_passages",
    "lane_record",
    "package_documents",
    "record_line",
    "to_haystack",
    "to_langchain",
    "to_llama_index",
]

LANES = ("bm25", "vector")
"""The passage lanes a hit can come from (a passage hit's ``lanes`` keys)."""

_U32_MAX = 2**32 - 1
_DICT_KEYS = ("id", "text", "score", "metadata")

Locator = tuple[str, int]


@dataclass(frozen=True)
class Hit:
    """One ranked hit, whatever it came from: its id, text, score (None when it has none) and metadata."""

    id: str
    text: str
    score: float | None = None
    metadata: Mapping[str, Any] = field(default_factory=dict)


def _problem(where: str, rule: str) -> UsageError:
    return UsageError(f"{where}: {rule}")


def _id(value: Any, where: str) -> str:
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    if not isinstance(value, str) or not value:
        raise _problem(where, "has no id (a non-empty string): give the documents ids, or pass locate=")
    return value


def _text(value: Any, where: str) -> str:
    if not isinstance(value, str):
        raise _problem(where, f"text must be a string, got {type(value).__name__}")
    return value


def _score(value: Any, where: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or (not isinstance(value, (int, float)) and not hasattr(value, "__float__")):
        raise _problem(where, f"score must be a number, got {type(value).__name__}")
    try:
        number = float(value)
    except OverflowError:  # an integer past a float's range
        rule = "score must be a finite number that fits an f32, got an integer past a float's range"
        raise _problem(where, rule) from None
    if not math.isfinite(number) or not math.isfinite(to_f32(number)):
        raise _problem(where, f"score must be a finite number that fits an f32, got {number!r}")
    return number


def _metadata(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def as_hit(value: Any, where: str = "hit") -> Hit:
    """The :class:`Hit` of one ranked entry (the shapes of the module docstring); ``where`` names
    it in an error (:class:`~assembler.errors.UsageError`)."""
    if isinstance(value, Hit):
        return value
    if isinstance(value, (tuple, list)):
        if len(value) == 2 and not isinstance(value[0], (str, int)):
            inner = as_hit(value[0], where)
            return Hit(inner.id, inner.text, _score(value[1], where), inner.metadata)
        if len(value) in (3, 4):
            metadata = _metadata(value[3]) if len(value) == 4 else {}
            return Hit(_id(value[0], where), _text(value[1], where), _score(value[2], where), metadata)
        raise _problem(
            where, f"a tuple must be (id, text, score[, metadata]) or (document, score), got {len(value)} items"
        )
    if isinstance(value, Mapping):
        unknown = [str(key) for key in value if key not in _DICT_KEYS]
        if unknown:
            raise _problem(where, f"unknown key '{shown(unknown[0])}' (known: {', '.join(_DICT_KEYS)})")
        if "text" not in value:
            raise _problem(where, "text is required")
        return Hit(
            _id(value.get("id"), where),
            _text(value["text"], where),
            _score(value.get("score"), where),
            _metadata(value.get("metadata")),
        )
    node = getattr(value, "node", None)
    if node is not None:  # LlamaIndex NodeWithScore
        ident = getattr(node, "node_id", None) or getattr(node, "id_", None)
        return Hit(
            _id(ident, where),
            _text(getattr(node, "text", None), where),
            _score(getattr(value, "score", None), where),
            _metadata(getattr(node, "metadata", None)),
        )
    if hasattr(value, "page_content"):  # LangChain Document
        return Hit(
            _id(getattr(value, "id", None), where),
            _text(value.page_content, where),
            None,
            _metadata(getattr(value, "metadata", None)),
        )
    if hasattr(value, "content") and hasattr(value, "meta"):  # Haystack Document
        return Hit(
            _id(getattr(value, "id", None), where),
            _text(value.content, where),
            _score(getattr(value, "score", None), where),
            _metadata(value.meta),
        )
    raise _problem(
        where,
        f"cannot read a {type(value).__name__}: expected a tuple, a dict, a LangChain Document, "
        "a LlamaIndex NodeWithScore or a Haystack Document",
    )


def _default_locate(hit: Hit) -> Locator:
    return hit.id, 0


def _locator(value: Any, where: str) -> Locator:
    ok = isinstance(value, tuple) and len(value) == 2 and isinstance(value[0], str)
    paragraph = value[1] if ok else None
    if not ok or isinstance(paragraph, bool) or not isinstance(paragraph, int) or not 0 <= paragraph <= _U32_MAX:
        raise _problem(where, "locate must return (source: str, paragraph: an integer from 0 to 2**32 - 1)")
    return value[0], paragraph


def fused_passages(
    lanes: Mapping[str, Iterable[Any]], *, locate: Callable[[Hit], Locator] | None = None
) -> list[dict[str, Any]]:
    """The ``passages`` lane of ranked ``lanes`` (``bm25`` and/or ``vector``): one passage hit per
    locator, fused and ordered by :func:`assembler.retrieval.hybrid.fuse_hits`.

    A locator may appear once per lane (a second time is an error: its rank would be ambiguous),
    and with one text across the lanes (another text is an error: two passages were mapped to one
    locator, which the contract would merge)."""
    unknown = [name for name in lanes if name not in LANES]
    if unknown:
        raise UsageError(f"lanes: unknown lane '{shown(str(unknown[0]))}' (passage lanes: {', '.join(LANES)})")
    place = locate or _default_locate
    keys: list[Locator] = []
    texts: list[str] = []
    index: dict[Locator, int] = {}
    entries: dict[str, list[tuple[int, float]]] = {name: [] for name in LANES}
    for name in LANES:
        seen: dict[Locator, int] = {}
        for rank, value in enumerate(lanes.get(name, ()), start=1):
            where = f"lanes['{name}'][{rank - 1}]"
            hit = as_hit(value, where)
            key = _locator(place(hit), where)
            shown_key = f"({shown(key[0])!s}, {key[1]})"
            if key in seen:
                raise _problem(where, f"{shown_key} is already at rank {seen[key]} of this lane")
            seen[key] = rank
            if key not in index:
                index[key] = len(keys)
                keys.append(key)
                texts.append(hit.text)
            elif texts[index[key]] != hit.text:
                raise _problem(
                    where, f"{shown_key} has another text in another lane: map each passage to its own locator"
                )
            score = 0.0 if hit.score is None else hit.score
            entries[name].append((index[key], to_f32(score)))
    passages = []
    for fused in fuse_hits(entries["bm25"], entries["vector"], keys):
        evidence: dict[str, Any] = {}
        for name, lane in (("bm25", fused.bm25), ("vector", fused.vector)):
            if lane is not None:
                evidence[name] = {"rank": lane[0], "score": lane[1]}
        source, paragraph = keys[fused.doc]
        passages.append(
            {
                "source": source,
                "paragraph": paragraph,
                "score": fused.score,
                "text": texts[fused.doc],
                "lanes": evidence,
            }
        )
    return passages


def lane_record(
    query_id: str,
    lanes: Mapping[str, Iterable[Any]],
    *,
    context: str = "default",
    query: str | None = None,
    origins: str | Sequence[str] = (),
    search_limit: int | None = None,
    budget: Mapping[str, int] | None = None,
    locate: Callable[[Hit], Locator] | None = None,
) -> dict[str, Any]:
    """A valid lane-dump record of ranked passage ``lanes`` (checked by the assembler's own parser).

    ``query`` becomes ``request.text_fallback_query`` (the query a reranker reads); ``origins`` the
    graph anchors (none: the resolve lane did not run); ``search_limit`` defaults to the number of
    fused passages (at most 200, the contract's ceiling; omitted when there are none, so the
    contract's default applies); ``budget`` is ``request.budget`` (``max_items``, ``max_bytes``,
    ``max_tokens``); ``context`` is embedded in every candidate id.
    """
    passages = fused_passages(lanes, locate=locate)
    request: dict[str, Any] = {"origins": [origins] if isinstance(origins, str) else list(origins)}
    if query is not None:
        request["text_fallback_query"] = query
    if search_limit is not None:
        request["search_limit"] = search_limit
    elif passages:
        request["search_limit"] = min(len(passages), MAX_SEARCH_LIMIT)
    if budget is not None:
        request["budget"] = dict(budget)
    record = {"query_id": query_id, "context": context, "request": request, "lanes": {"passages": passages}}
    parse_record(record, file="<lane_record>")
    return record


def record_line(record: Mapping[str, Any]) -> str:
    """A :func:`lane_record` as one lane-dump line (no newline), written as ``assembler lanes build``
    writes its lines: wire objects in contract field order, f32 scores in their shortest digits."""
    return record_text(record["query_id"], record["context"], record["request"], record["lanes"])


def _package(package: str | Mapping[str, Any]) -> Mapping[str, Any]:
    value: Any = _parsed(package) if isinstance(package, str) else package
    if isinstance(value, Mapping) and "items" not in value and "package" in value:
        inner = value["package"]
        value = _parsed(inner) if isinstance(inner, str) else inner
    if not isinstance(value, Mapping) or not isinstance(value.get("items"), list):
        raise UsageError("package: expected a package (its JSON text or object) or an output line with 'package'")
    return value


def _parsed(text: str) -> Any:
    """Package text through the guarded JSON reader: text that is not JSON is a :class:`UsageError`."""
    try:
        return read_json(text)
    except ShapeError as exc:
        raise UsageError(f"package: {exc}") from None


def package_documents(package: str | Mapping[str, Any]) -> list[dict[str, Any]]:
    """The package's admitted items in package (admission) order, each ``{id, text, score, metadata}``.

    * ``text``: a passage's or community's text; an association's ``subject label object``.
    * ``id``: a passage's ``source`` (the inverse of the default locator; its paragraph is in the
      metadata); otherwise the candidate id with its NUL separators written as ``:``.
    * ``score``: the passage's or community's score; ``None`` for an association.
    * ``metadata``: ``kind``, ``fused_rank``, ``candidate_id`` (exact), ``source`` and ``paragraph``
      (the item's own locator: a passage's, a community's paragraph with source
      ``community:<name>``, ``None`` for an association), ``lane_ranks``, ``contradicts``, and
      ``citations``: the package's citation entries of the item's ``citation_refs``, each
      ``{source, paragraph, text, section, locator}``.
    """
    parsed = _package(package)
    entries = {(entry["source"], entry["paragraph"]): entry for entry in parsed.get("citations", [])}
    documents = []
    for item in parsed["items"]:
        kind = item["kind"]
        candidate_id = item["candidate_id"]
        source: str | None = None
        paragraph: int | None = None
        score: float | None = None
        if kind == "passage":
            payload = item["passage"]
            source, paragraph, score, text = payload["source"], payload["paragraph"], payload["score"], payload["text"]
            ident = source
        elif kind == "community":
            payload = item["community"]
            source, paragraph = "community:" + payload["community"], payload["paragraph"]
            score, text = payload["score"], payload["text"]
            ident = candidate_id.replace("\x00", ":")
        else:
            payload = item["association"]
            text = f"{payload['subject']} {payload['label']} {payload['object']}"
            ident = candidate_id.replace("\x00", ":")
        citations = []
        for ref in item.get("citation_refs", []):
            entry = entries.get((ref["source"], ref["paragraph"]))
            if entry is not None:
                citation = entry["citation"]
                citations.append(
                    {
                        "source": ref["source"],
                        "paragraph": ref["paragraph"],
                        "text": citation["text"],
                        "section": citation.get("section"),
                        "locator": citation.get("locator"),
                    }
                )
        metadata = {
            "kind": kind,
            "fused_rank": item["fused_rank"],
            "candidate_id": candidate_id,
            "source": source,
            "paragraph": paragraph,
            "lane_ranks": [dict(lane) for lane in item.get("lane_ranks", [])],
            "contradicts": list(item.get("contradicts", [])),
            "citations": citations,
        }
        documents.append({"id": ident, "text": text, "score": score, "metadata": metadata})
    return documents


def _framework(module: str, extra: str) -> Any:
    try:
        return importlib.import_module(module)
    except ImportError:
        raise UsageError(f"this needs {extra} (pip install {extra})") from None


def to_langchain(package: str | Mapping[str, Any]) -> list[Any]:
    """The package's items as LangChain ``Document`` objects (``id``, ``page_content``, ``metadata``)."""
    documents = _framework("langchain_core.documents", "langchain-core")
    return [
        documents.Document(page_content=doc["text"], metadata=doc["metadata"], id=doc["id"])
        for doc in package_documents(package)
    ]


def to_llama_index(package: str | Mapping[str, Any]) -> list[Any]:
    """The package's items as LlamaIndex ``NodeWithScore`` objects around ``TextNode`` nodes."""
    schema = _framework("llama_index.core.schema", "llama-index-core")
    return [
        schema.NodeWithScore(
            node=schema.TextNode(id_=doc["id"], text=doc["text"], metadata=doc["metadata"]), score=doc["score"]
        )
        for doc in package_documents(package)
    ]


def to_haystack(package: str | Mapping[str, Any]) -> list[Any]:
    """The package's items as Haystack ``Document`` objects (``id``, ``content``, ``meta``, ``score``)."""
    haystack = _framework("haystack", "haystack-ai")
    return [
        haystack.Document(id=doc["id"], content=doc["text"], meta=doc["metadata"], score=doc["score"])
        for doc in package_documents(package)
    ]
