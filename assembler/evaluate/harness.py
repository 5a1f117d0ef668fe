"""One evaluation run: every case through its passage lane (baseline or assembly), scored, aggregated.

:func:`evaluate_cases` is the per-case half, :func:`aggregate` the catalog half; both are pure
(no files). :func:`run_artifact` puts them together into the artifact of spec section 3.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from assembler.contract.jsontext import format_f32
from assembler.contract.request import Limits, resolve_limits
from assembler.errors import counted
from assembler.evaluate import metrics
from assembler.evaluate.answers import Answers, answers_block, evidence_text, in_context, item_text
from assembler.evaluate.artifact import generated_at
from assembler.evaluate.assembly import Assembled, assemble_case, assemble_cases, assemble_cases_on_ray, evidence_block
from assembler.evaluate.baseline import cut, truncate
from assembler.evaluate.catalog import METRICS, definitions_block
from assembler.evaluate.corpus import CitationCheck, Corpus, check_citation
from assembler.evaluate.dump import CaseLanes, DumpRecord, describe_contexts
from assembler.evaluate.loader import DEFAULT_LIMIT, EvalCase, EvalSet
from assembler.evaluate.structural import Structural, run_structural
from assembler.selection import get_policy

__all__ = [
    "CaseOutcome",
    "Progress",
    "RunConfig",
    "aggregate",
    "counter",
    "evaluate_cases",
    "resolve_budget",
    "run_artifact",
]

BUDGET_REASONS = ("budget_exceeded", "contradiction_group_exceeds_budget")
RESOLVE_LIMIT = 5

Progress = Callable[[str, int], "Callable[[int], None] | None"]
"""What reports the progress of a long step (the command line's progress bar): called with the
step's label and its total, it returns what to call with each number of units done, or None."""


def counter(progress: Progress | None, label: str, total: int) -> Callable[[int], None]:
    """The step's counter from ``progress``; one that does nothing without a ``progress``."""
    update = None if progress is None else progress(label, total)
    return update if update is not None else lambda done: None


@dataclass(frozen=True)
class RunConfig:
    """What a run was asked to do. ``overrides`` holds only the ``--max-*`` flags given."""

    assembly: bool = False
    policy: str = "contract"
    overrides: Mapping[str, int] = field(default_factory=dict)
    engine: str = "local"
    ray_address: str | None = None

    @property
    def mode(self) -> str:
        """``assembly`` or ``baseline``."""
        return "assembly" if self.assembly else "baseline"

    @property
    def budget(self) -> Limits | None:
        """The resolved limits, when the run has a budget (assembly, or any ``--max-*`` flag)."""
        return resolve_budget(self.assembly, self.overrides)


def resolve_budget(assembly: bool, overrides: Mapping[str, int]) -> Limits | None:
    """Defaults 40/65536/4000 for missing flags, ceilings 1000 items and 1 MiB; None if unbudgeted."""
    if not assembly and not overrides:
        return None
    return resolve_limits({}, dict(overrides))


def limits_json(limits: Limits) -> dict[str, int]:
    """``{max_items, max_bytes, max_tokens}``."""
    return {"max_items": limits.max_items, "max_bytes": limits.max_bytes, "max_tokens": limits.max_tokens}


@dataclass
class CaseOutcome:
    """One case's block and the samples it gives the aggregate metrics."""

    block: dict[str, Any]
    recall: dict[str, Any] | None = None
    coverage: dict[str, dict[str, Any]] = field(default_factory=dict)
    lane_cross: dict[str, bool] | None = None
    citation_recall: float | None = None
    citation_checks: list[CitationCheck] | None = None
    diversity: int | None = None
    passage_latency: float | None = None
    evidence_latency: float | None = None
    budget: dict[str, Any] | None = None
    budget_dropped: int = 0
    structural_ran: bool = False
    evidence_text: str = ""
    """The served evidence text (answer-in-context); never written to the artifact."""


def _hit_locator(hit: Mapping[str, Any]) -> dict[str, Any]:
    lanes = {
        name: {"rank": evidence["rank"], "score": float(format_f32(evidence["score"]))}
        for name in ("bm25", "vector")
        if (evidence := hit["lanes"].get(name)) is not None
    }
    return {
        "source": hit["source"],
        "paragraph": hit["paragraph"],
        "score": float(format_f32(hit["score"])),
        "lanes": lanes,
    }


def _baseline_lane(
    case: EvalCase, dump: DumpRecord, limits: Limits | None
) -> tuple[dict[str, Any], list[metrics.Hit], dict[str, Any] | None, int, str]:
    hits = cut(dump.passages(), case.limit)
    budget = None
    dropped = 0
    if limits is not None:
        outcome = truncate(dump.record.context, hits, limits)
        hits = [hits[i] for i in outcome.kept]
        budget = {
            "items_used": outcome.items_used,
            "bytes_used": outcome.bytes_used,
            "tokens_used": outcome.tokens_used,
            "limits": limits_json(limits),
            "omitted_total": outcome.omitted_total,
        }
        dropped = outcome.omitted_total
    block = {"outcome": "searched", "hits": [_hit_locator(hit) for hit in hits], "latency_ms": None}
    text = evidence_text([hit["text"] for hit in hits])
    return block, [(hit["source"], hit["paragraph"]) for hit in hits], budget, dropped, text


def _missed(
    case: EvalCase,
    hits: Sequence[metrics.Hit],
    structural: Structural | None,
    served: set[tuple[str, int]],
    checks: list[CitationCheck] | None,
) -> list[str]:
    missed = [
        f"expected_sources: '{entry.source}' not found among passage hits"
        for entry in case.evidence_sources
        if not any(metrics.satisfies(entry, hit) for hit in hits)
    ]
    if structural is not None:
        for concept in case.expected_concepts:
            if structural.concepts_matched([concept]) == 0:
                missed.append(f"expected_concepts: '{concept}' not resolved")
        for label in case.expected_labels:
            if structural.labels_matched([label]) == 0:
                missed.append(f"expected_labels: '{label}' not resolved")
        for probe in structural.probes:
            if not probe.covered:
                e = probe.expected
                missed.append(
                    f"expected_associations: ({e.subject}, {e.label}, {e.object}) no association in the lane dump's "
                    "graph lanes"
                )
    for i, citation in enumerate(case.expected_citations):
        locator = f"({citation.source}, {citation.paragraph})"
        if (citation.source, citation.paragraph) not in served:
            missed.append(f"expected_citations: {locator} not found among served results")
        if checks is not None and not checks[i].valid:
            missed.append(f"expected_citations: {locator} failed locator validity")
    return missed


def _citations_block(
    case: EvalCase, dump: DumpRecord, served: set[tuple[str, int]], corpus: Corpus | None, outcome: CaseOutcome
) -> dict[str, Any]:
    """Recall over the served set; validity and checks when the snapshot holds the citations."""
    bits = [(c.source, c.paragraph) in served for c in case.expected_citations]
    recall = metrics.citation_recall(bits)
    outcome.citation_recall = recall["value"]
    block: dict[str, Any] = {"recall": recall}
    if corpus is None or corpus.citations is None:
        block["checks"] = [
            {"source": c.source, "paragraph": c.paragraph, "served": bit}
            for c, bit in zip(case.expected_citations, bits, strict=True)
        ]
        return block
    context = dump.record.context
    checks = [check_citation(c, context, bit, corpus) for c, bit in zip(case.expected_citations, bits, strict=True)]
    outcome.citation_checks = checks
    valid = sum(check.valid for check in checks)
    block["validity"] = {"expected_total": len(checks), "valid": valid, "value": valid / len(checks)}
    block["checks"] = [check.block() for check in checks]
    return block


def evaluate_case(
    case: EvalCase,
    dump: DumpRecord,
    config: RunConfig,
    carries_graph: bool,
    corpus: Corpus | None = None,
    preassembled: Assembled | None = None,
    texts: bool = False,
) -> CaseOutcome:
    """Run and score one case (``preassembled``: its package, when another engine assembled it;
    ``texts``: keep the served evidence text, for answer-in-context)."""
    limits = config.budget
    outcome = CaseOutcome(block={})
    evidence = None
    if config.assembly:
        assert limits is not None
        assembled = preassembled or assemble_case(dump.raw, case.limit, limits, get_policy(config.policy))
        hits = assembled.hits
        latency = round(assembled.latency_ms, 3)
        passage = {
            "outcome": "searched",
            "hits": [{"source": s, "paragraph": p, "score": 0.0, "lanes": {}} for s, p in hits],
            "latency_ms": latency,
        }
        evidence = evidence_block(assembled)
        package_budget = assembled.package["budget"]
        by_reason = assembled.package.get("omitted_by_reason", {})
        outcome.budget = {**package_budget, "omitted_total": assembled.package["omitted_total"]}
        outcome.budget_dropped = sum(by_reason.get(reason, 0) for reason in BUDGET_REASONS)
        outcome.passage_latency = outcome.evidence_latency = latency
        if texts:
            outcome.evidence_text = evidence_text([item_text(item) for item in assembled.package["items"]])
    else:
        passage, hits, outcome.budget, outcome.budget_dropped, text = _baseline_lane(case, dump, limits)
        if texts:
            outcome.evidence_text = text

    structural = None
    if case.declares_structural and carries_graph:
        structural = run_structural(case, dump.record)
        outcome.structural_ran = True
    served = set(hits) | (structural.served() if structural is not None else set())

    outcome.recall = metrics.score_recall(case.expected_sources, hits)
    if structural is not None:
        parts = {
            "concepts": metrics.coverage_counts(
                len(case.expected_concepts), structural.concepts_matched(case.expected_concepts)
            ),
            "labels": metrics.coverage_counts(
                len(case.expected_labels), structural.labels_matched(case.expected_labels)
            ),
            "associations": metrics.coverage_counts(
                len(structural.probes), sum(1 for probe in structural.probes if probe.covered)
            ),
        }
        outcome.coverage = {name: part for name, part in parts.items() if part is not None}
        if outcome.recall is not None:
            outcome.lane_cross = {
                "structural_hit": any(part["matched"] > 0 for part in outcome.coverage.values()),
                "passage_hit": outcome.recall["matched"] > 0,
            }
    citations = _citations_block(case, dump, served, corpus, outcome) if case.expected_citations else None
    outcome.diversity = metrics.diversity(hits)
    missed, truncated = metrics.cap_missed(_missed(case, hits, structural, served, outcome.citation_checks))

    block: dict[str, Any] = {"case_id": case.case_id, "query": case.query}
    if case.cues:
        block["cues"] = list(case.cues)
    block["limit"] = case.limit
    block["passage"] = passage
    if structural is not None:
        block["structural"] = structural.block(case)
    if outcome.recall is not None:
        block["recall"] = outcome.recall
    if outcome.coverage:
        block["coverage"] = outcome.coverage
    if outcome.lane_cross is not None:
        block["lane_cross"] = outcome.lane_cross
    if citations is not None:
        block["citations"] = citations
    block["missed"] = missed
    block["missed_truncated"] = truncated
    if evidence is not None:
        block["evidence"] = evidence
    if outcome.budget is not None:
        block["budget"] = outcome.budget
    block["diversity_sources"] = outcome.diversity
    outcome.block = block
    return outcome


def evaluate_cases(
    evalset: EvalSet,
    lanes: CaseLanes,
    config: RunConfig,
    corpus: Corpus | None = None,
    keep_texts: bool = False,
    progress: Progress | None = None,
) -> list[CaseOutcome]:
    """Every case in eval order; the assembly side runs as one batch (``engine="ray"``: one Ray job).
    ``keep_texts``: keep each case's served evidence text (only what answer-in-context needs);
    ``progress``: the batch (one unit), then the cases scored."""
    pairs = list(zip(evalset.cases, lanes.records, strict=True))
    packages: list[Assembled | None] = [None] * len(pairs)
    if config.assembly:
        assert config.budget is not None
        assembled = counter(progress, f"assembling {counted(len(pairs), 'case')} in one batch", 1)
        batch = [(dump.raw, case.limit) for case, dump in pairs]
        if config.engine == "ray":
            packages = list(assemble_cases_on_ray(batch, config.budget, config.policy, config.ray_address))
        else:
            texts = [dump.text for _, dump in pairs]
            packages = list(assemble_cases(batch, config.budget, get_policy(config.policy), texts))
        assembled(1)
    scored = counter(progress, "cases scored", len(pairs))
    outcomes = []
    for (case, dump), package in zip(pairs, packages, strict=True):
        outcomes.append(evaluate_case(case, dump, config, lanes.carries_graph, corpus, package, keep_texts))
        scored(1)
    return outcomes


def _absent(value: dict[str, Any], reason: str) -> dict[str, Any]:
    """Mark a metric without samples with the reason it has none."""
    return {**value, "absent": reason} if value["n"] == 0 else value


_LIVE = "needs a live server ({}); a lane dump does not carry it"


def _citation_metrics(outcomes: Sequence[CaseOutcome], corpus: Corpus | None) -> dict[str, dict[str, Any]]:
    """Validity and the resolution ratios, from the snapshot's citation checks."""
    if corpus is None or corpus.citations is None:
        reason = _LIVE.format("POST /contexts/{ctx}/citations") + "; pass --citations FILE (a corpus snapshot)"
        values = {"citations.locator_validity": _absent(metrics.distribution([]), reason)}
        for name in ("resolved", "no_source", "no_paragraph", "other", "section_match", "quote_match"):
            values[f"citations.{name}"] = _absent(metrics.ratio(0, 0), reason)
        return values
    per_case = [o.citation_checks for o in outcomes if o.citation_checks]
    checks = [check for case_checks in per_case for check in case_checks]
    resolved = [check for check in checks if check.resolved]
    sections = [check for check in resolved if check.section_matched is not None]
    quotes = [check for check in resolved if check.quote_matched is not None]
    none = "no case declares expected_citations"
    return {
        "citations.locator_validity": _absent(
            metrics.distribution(sum(c.valid for c in case) / len(case) for case in per_case), none
        ),
        "citations.resolved": _absent(metrics.ratio(len(resolved), len(checks)), none),
        "citations.no_source": _absent(metrics.ratio(sum(c.code == "no_source" for c in checks), len(checks)), none),
        "citations.no_paragraph": _absent(
            metrics.ratio(sum(c.code == "no_paragraph" for c in checks), len(checks)), none
        ),
        "citations.other": _absent(
            metrics.ratio(
                sum(not c.resolved and c.code not in ("no_source", "no_paragraph") for c in checks), len(checks)
            ),
            none,
        ),
        "citations.section_match": _absent(
            metrics.ratio(sum(bool(c.section_matched) for c in sections), len(sections)),
            "no resolved citation check declared a section",
        ),
        "citations.quote_match": _absent(
            metrics.ratio(sum(bool(c.quote_matched) for c in quotes), len(quotes)),
            "no resolved citation check declared a quote",
        ),
    }


def aggregate(
    evalset: EvalSet,
    lanes: CaseLanes,
    config: RunConfig,
    outcomes: Sequence[CaseOutcome],
    corpus: Corpus | None = None,
) -> dict[str, dict[str, Any]]:
    """All 31 catalog metrics, sorted by key; every empty one says why it is empty."""
    n = len(outcomes)
    declares = any(case.declares_structural for case in evalset.cases)
    no_graph = "the lane dump carries no graph lane (graph_query/graph_activate are null in every record)"

    recall = [o.recall for o in outcomes if o.recall is not None]
    crosses = [o.lane_cross for o in outcomes if o.lane_cross is not None]
    budgets = [o for o in outcomes if o.budget is not None]
    no_recall = "no case has an expected_sources entry with relevance >= 1"
    no_cross = (
        no_graph
        if not lanes.carries_graph and declares
        else "no case declares both a structural expectation and an expected source"
    )
    no_budget = "no --max-* flag: the baseline is untruncated and has no budget"
    values: dict[str, dict[str, Any]] = {
        "latency.passage_ms": _absent(
            metrics.distribution(o.passage_latency for o in outcomes if o.passage_latency is not None),
            "offline baseline: no passage search call (the passage lane is read from the lane dump)"
            if not config.assembly
            else "no case",
        ),
        "latency.resolve_ms": _absent(metrics.distribution([]), _LIVE.format("POST /resolve, /resolve_label")),
        "latency.query_ms": _absent(metrics.distribution([]), _LIVE.format("POST /query")),
        "passage.failure_rate": metrics.ratio(0, n),
        "structural.case_rate": (
            _absent(metrics.ratio(0, 0), no_graph)
            if declares and not lanes.carries_graph
            else metrics.ratio(sum(o.structural_ran for o in outcomes), n)
        ),
        "recall.recall_at_k": _absent(metrics.distribution(r["recall_at_k"] for r in recall), no_recall),
        "recall.mrr": _absent(metrics.distribution(r["mrr"] for r in recall), no_recall),
        "recall.ndcg": _absent(metrics.distribution(r["ndcg"] for r in recall), no_recall),
        "citations.recall": _absent(
            metrics.distribution(o.citation_recall for o in outcomes if o.citation_recall is not None),
            "no case declares expected_citations",
        ),
        "latency.citation_ms": _absent(metrics.distribution([]), _LIVE.format("POST /contexts/{ctx}/citations")),
        "diversity.sources": metrics.distribution(o.diversity for o in outcomes if o.diversity is not None),
        "latency.evidence_ms": _absent(
            metrics.distribution(o.evidence_latency for o in outcomes if o.evidence_latency is not None),
            "baseline mode: no assembly step",
        ),
        "budget.items_used": _absent(
            metrics.distribution(o.budget["items_used"] for o in budgets if o.budget), no_budget
        ),
        "budget.bytes_used": _absent(
            metrics.distribution(o.budget["bytes_used"] for o in budgets if o.budget), no_budget
        ),
        "budget.tokens_used": _absent(
            metrics.distribution(o.budget["tokens_used"] for o in budgets if o.budget), no_budget
        ),
        "budget.omitted_rate": _absent(
            metrics.ratio(
                sum(o.budget_dropped for o in budgets),
                sum(o.budget["omitted_total"] + o.budget["items_used"] for o in budgets if o.budget),
            ),
            no_budget,
        ),
        "rerank.ran": _absent(metrics.ratio(0, 0), "offline runs have no reranker provider and take no --rerank"),
    }
    for name, field_name in (
        ("concepts", "expected_concepts"),
        ("labels", "expected_labels"),
        ("associations", "expected_associations"),
    ):
        declared = any(getattr(case, field_name) for case in evalset.cases)
        values[f"coverage.{name}"] = _absent(
            metrics.distribution(o.coverage[name]["value"] for o in outcomes if name in o.coverage),
            no_graph if declared else f"no case declares {field_name}",
        )
    values.update(_citation_metrics(outcomes, corpus))
    for name, predicate in (
        ("structural_hit", lambda c: c["structural_hit"]),
        ("passage_hit", lambda c: c["passage_hit"]),
        ("both", lambda c: c["structural_hit"] and c["passage_hit"]),
        ("neither", lambda c: not c["structural_hit"] and not c["passage_hit"]),
    ):
        values[f"lanes.{name}"] = _absent(
            metrics.ratio(sum(1 for c in crosses if predicate(c)), len(crosses)), no_cross
        )
    assert set(values) == set(METRICS), sorted(set(METRICS) ^ set(values))
    return {name: values[name] for name in METRICS}


def run_artifact(
    evalset: EvalSet,
    lanes: CaseLanes,
    config: RunConfig,
    *,
    out: str,
    warnings: Sequence[str] = (),
    corpus: Corpus | None = None,
    corpus_paths: Mapping[str, str] | None = None,
    answers: Answers | None = None,
    progress: Progress | None = None,
) -> tuple[dict[str, Any], list[CaseOutcome]]:
    """Evaluate every case and build the artifact (``thresholds`` left null for the gate to fill;
    ``progress``: as :func:`evaluate_cases` reports it).

    ``corpus_paths`` names the snapshot files (``sources``, ``citations``) and their SHA-256 digests
    (``sources_sha256``, ``citations_sha256``), recorded in ``inputs`` and the corpus revision.
    ``answers`` adds answer-in-context: ``answer_in_context`` (1 or 0) in each scored case block
    and the additive top-level ``answers`` block after ``metrics``
    (:mod:`assembler.evaluate.answers`); without it the artifact is as before.
    """
    outcomes = evaluate_cases(evalset, lanes, config, corpus, keep_texts=answers is not None, progress=progress)
    paths = dict(corpus_paths or {})
    inputs: dict[str, Any] = {
        "eval": {"path": evalset.path, "name": evalset.name, "cases": len(evalset.cases)},
        "lanes": {
            "path": lanes.path,
            "sha256": lanes.sha256,
            "records_used": len(lanes.records),
            "records_unused": lanes.unused,
        },
        **{name: paths[name] for name in ("sources", "citations") if name in paths},
        "context": describe_contexts(lanes.contexts),
        "out": out,
        "default_limit": DEFAULT_LIMIT,
        "resolve_limit": RESOLVE_LIMIT,
        "mode": config.mode,
    }
    if config.assembly:
        inputs["policy"] = config.policy
    if config.budget is not None:
        inputs["budget"] = limits_json(config.budget)
    revision: dict[str, str] = {
        "lanes_sha256": lanes.sha256,
        **{key: paths[key] for key in ("sources_sha256", "citations_sha256") if key in paths},
    }
    sources_count = corpus.sources_count(lanes.contexts) if corpus is not None else None
    artifact: dict[str, Any] = {
        "taguru_evaluation": 1,
        "generated_at": generated_at(),
        "matching": {
            "normalization": "assembler.contract.text.normalize_entry (taguru::context::normalize_entry)",
            "normalized": ["expected_concepts", "expected_labels", "expected_associations"],
            "sources": "exact (source, paragraph) match — no normalization",
        },
        "inputs": inputs,
        "corpus": {
            "revision_before": revision,
            "revision_after": revision,
            "stable": True,
            "sources_count": lanes.sources_count if sources_count is None else sources_count,
        },
        "thresholds": None,
        "definitions": definitions_block(),
    }
    if warnings:
        artifact["warnings"] = list(warnings)
    artifact["cases"] = [outcome.block for outcome in outcomes]
    artifact["metrics"] = aggregate(evalset, lanes, config, outcomes, corpus)
    if answers is not None:
        values = in_context(answers, [outcome.evidence_text for outcome in outcomes])
        for outcome, value in zip(outcomes, values, strict=True):
            if value is not None:
                outcome.block["answer_in_context"] = value
        artifact["answers"] = answers_block(answers, values)
    return artifact, outcomes
