"""Fuse an eval set's lane dumps once, then select under many policies: the search behind
``assembler evaluate tune``.

The lanes are fixed, so everything before selection (parsing, fusion, the citation lookup) is
the same for every policy at one budget; :func:`prepare` does it once and :func:`policy_hits`
runs only the policy's selection and projects the admitted items to the hit list ``evaluate
--assembly`` scores (:func:`assembler.evaluate.assembly.project`), without rendering packages.
The hit lists equal those of :func:`assembler.evaluate.assembly.assemble_case` (tested).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import polars as pl

from assembler.contract.request import Limits
from assembler.evaluate.answers import evidence_text
from assembler.evaluate.assembly import case_request, limit_overrides
from assembler.evaluate.baseline import cut, truncate
from assembler.evaluate.dump import CaseLanes
from assembler.evaluate.loader import EvalSet
from assembler.evaluate.metrics import Hit
from assembler.pipeline import fuse_batch
from assembler.selection import QualityPolicy, SelectionInputs, SelectionPolicy
from assembler.stages.lanes import build_batch, parse_record
from assembler.stages.reorder import RerankStage

__all__ = [
    "Prepared",
    "admitted_hits",
    "baseline_hits",
    "baseline_served",
    "policy_admitted",
    "policy_hits",
    "prepare",
]


@dataclass(frozen=True)
class Prepared:
    """One budget's fused candidates and selection inputs for every case (``q`` = case index)."""

    limits: Limits
    fused: pl.DataFrame
    inputs: SelectionInputs
    case_limits: tuple[int, ...]
    suppressed: dict[bool, pl.DataFrame] = field(default_factory=dict, compare=False, repr=False)
    """The quality policy's near-duplicate verdicts by its ``words`` setting, computed once."""


def prepare(evalset: EvalSet, lanes: CaseLanes, limits: Limits) -> Prepared:
    """Parse and fuse every case's record as ``evaluate --assembly`` requests it at ``limits``."""
    overrides = limit_overrides(limits)
    records = [
        parse_record(case_request(dump.raw, case.limit), overrides=overrides)
        for case, dump in zip(evalset.cases, lanes.records, strict=True)
    ]
    fused = fuse_batch(build_batch(records), RerankStage(records, None, {}))
    return Prepared(limits, fused.candidates, fused.inputs, tuple(case.limit for case in evalset.cases))


def policy_admitted(prepared: Prepared, policy: SelectionPolicy) -> pl.DataFrame:
    """The decisions of the items ``policy`` admits, in package order (``q``, then ``walk_step``)."""
    if isinstance(policy, QualityPolicy):
        if policy.words not in prepared.suppressed:
            prepared.suppressed[policy.words] = policy.suppressed(prepared.fused)
        decisions = policy.select_suppressed(prepared.suppressed[policy.words], prepared.inputs).decisions
    else:
        decisions = policy.select(prepared.fused, prepared.inputs).decisions
    return decisions.filter("admitted").sort("q", "walk_step")


def policy_hits(prepared: Prepared, policy: SelectionPolicy) -> list[list[Hit]]:
    """Each case's hit list under ``policy``: the admitted items in package order, each item's own
    locator (passages and communities) then its citation refs in ``(source, paragraph)`` order,
    cut at the case limit."""
    return admitted_hits(prepared, policy_admitted(prepared, policy))


def admitted_hits(prepared: Prepared, admitted: pl.DataFrame) -> list[list[Hit]]:
    """:func:`policy_hits` of the admitted decisions :func:`policy_admitted` returned."""
    locators = prepared.inputs.citations
    refs = (
        admitted.select("q", "walk_step", "citation_ids")
        .explode("citation_ids")
        .drop_nulls("citation_ids")
        .join(locators, left_on=["q", "citation_ids"], right_on=["q", "citation_id"])
        .sort("q", "walk_step", "source", "paragraph")
        .group_by("q", "walk_step", maintain_order=True)
        .agg(ref_sources=pl.col("source"), ref_paragraphs=pl.col("paragraph"))
    )
    rows = admitted.select("q", "walk_step", "kind", "source", "paragraph").join(
        refs, on=["q", "walk_step"], how="left", maintain_order="left"
    )
    hits: list[list[Hit]] = [[] for _ in prepared.case_limits]
    for q, _, kind, source, paragraph, ref_sources, ref_paragraphs in rows.iter_rows():
        found = hits[q]
        limit = prepared.case_limits[q]
        if kind != "association" and len(found) < limit:
            found.append((source, paragraph))
        for ref in zip(ref_sources or (), ref_paragraphs or (), strict=True):
            if len(found) >= limit:
                break
            found.append(ref)
    return hits


def baseline_hits(evalset: EvalSet, lanes: CaseLanes, limits: Limits) -> list[list[Hit]]:
    """Each case's baseline hit list: the passage lane cut at the case limit, truncated to ``limits``."""
    return baseline_served(evalset, lanes, limits)[0]


def baseline_served(evalset: EvalSet, lanes: CaseLanes, limits: Limits) -> tuple[list[list[Hit]], list[str]]:
    """:func:`baseline_hits` and each case's evidence text (the kept passages' texts, joined by a
    newline, as the harness serves them)."""
    result: list[list[Hit]] = []
    texts: list[str] = []
    for case, dump in zip(evalset.cases, lanes.records, strict=True):
        hits = cut(dump.passages(), case.limit)
        kept = truncate(dump.record.context, hits, limits).kept
        result.append([(hits[i]["source"], hits[i]["paragraph"]) for i in kept])
        texts.append(evidence_text([hits[i]["text"] for i in kept]))
    return result, texts


def hit_lists(prepared: Prepared, policies: Sequence[SelectionPolicy]) -> list[list[list[Hit]]]:
    """:func:`policy_hits` for several policies over one preparation."""
    return [policy_hits(prepared, policy) for policy in policies]
