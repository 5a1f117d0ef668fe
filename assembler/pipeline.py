"""The pipeline: lanes in, fuse, select (a policy), package out — for a whole batch at once."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import polars as pl

from assembler.contract.jsontext import quarters_expr, utf8_bytes_expr
from assembler.contract.request import check_overrides
from assembler.errors import InputError
from assembler.selection import CONTRACT, SelectionInputs, SelectionPolicy, get_policy
from assembler.stages.diversity import tier_width
from assembler.stages.fuse import fuse
from assembler.stages.lanes import LaneRecord, build_batch, drop_nulls, parse_record, repeated_query_id
from assembler.stages.package import QueryOutcome, omission_text, render_package
from assembler.stages.plan import lanes_plan_text
from assembler.stages.reorder import Reranker, RerankStage

__all__ = ["REASONS", "BatchResult", "assemble", "assemble_batch", "assemble_records"]

REASONS = ("budget_exceeded", "contradiction_group_exceeds_budget", "duplicate_passage", "evidence_in_passage")


@dataclass(frozen=True)
class BatchResult:
    """The packages of a batch, in input order, with what explains them.

    ``decisions`` has one row per fused candidate (``q`` indexes ``query_ids``): fused rank,
    near-duplicate verdict, unit, tier, walk step, admission and reason, running usage.
    ``summaries`` has one row per query: usage, omissions by reason, search-limit cuts.
    """

    query_ids: list[str]
    packages: list[str]
    decisions: pl.DataFrame
    summaries: pl.DataFrame


def assemble_records(
    records: Sequence[LaneRecord],
    *,
    policy: str | SelectionPolicy = CONTRACT,
    reorders: Mapping[str, Sequence[int]] | None = None,
    reranker: Reranker | None = None,
) -> BatchResult:
    """Assemble the package of every validated record.

    ``reranker`` is asked to reorder the survivors of every query whose request asked for a
    rerank (section 11). ``reorders`` maps a query id to a fixed permutation of its survivors
    (replaying a reranker's answer); an invalid one leaves the deterministic order.
    """
    batch = build_batch(records)
    fused, dedup = fuse(batch.candidates, batch.origins, batch.citations)
    citations = batch.citations.select(
        utf8_bytes_expr("entry_json").alias("bytes"), quarters_expr("entry_json").alias("quarters")
    )
    index = {record.query_id: q for q, record in enumerate(records)}
    rerank = RerankStage(
        records, reranker, {index[qid]: order for qid, order in (reorders or {}).items() if qid in index}
    )
    inputs = SelectionInputs(
        citations=batch.citations.select("q", "source", "paragraph").with_row_index("citation_id"),
        limits=[record.limits for record in records],
        tier_widths=[tier_width(record.limits.max_items) for record in records],
        citation_bytes=citations["bytes"].to_list(),
        citation_quarters=citations["quarters"].to_list(),
        reorder=rerank,
    )
    selection = get_policy(policy).select(fused, inputs)
    dedup_dropped = [0] * len(records)
    for q, dropped in dedup.iter_rows():
        dedup_dropped[q] = dropped
    items, omitted = _per_query_texts(selection.decisions, len(records))
    entries = batch.citations["entry_json"].to_list()
    sort_keys = list(zip(batch.citations["source"].to_list(), batch.citations["paragraph"].to_list(), strict=True))
    packages = []
    for q, record in enumerate(records):
        cited = sorted(selection.citation_ids[q], key=sort_keys.__getitem__)
        packages.append(
            render_package(
                QueryOutcome(
                    items=items[q],
                    citations=[entries[cid] for cid in cited],
                    items_used=selection.items_used[q],
                    bytes_used=selection.bytes_used[q],
                    tokens_used=selection.tokens_used[q],
                    limits=record.limits,
                    omitted=omitted[q],
                    lanes_plan=lanes_plan_text(record),
                    dedup_dropped=dedup_dropped[q],
                    contradiction_groups=selection.contradiction_groups[q],
                    tier_width=selection.tier_widths[q],
                    reranker_plan=rerank.plans[q],
                )
            )
        )
    return BatchResult(
        query_ids=[record.query_id for record in records],
        packages=packages,
        decisions=selection.decisions,
        summaries=_summaries(records, selection.items_used, selection.bytes_used, selection.tokens_used, omitted),
    )


def _per_query_texts(decisions: pl.DataFrame, n_queries: int) -> tuple[list[list[str]], list[list[tuple[str, str]]]]:
    """Admitted item texts in walk order; omissions: dropped before the walk (duplicates, in fused
    order), then refused by the walk (in walk order)."""
    items: list[list[str]] = [[] for _ in range(n_queries)]
    omitted: list[list[tuple[str, str]]] = [[] for _ in range(n_queries)]
    dropped = decisions.filter(pl.col("walk_step").is_null()).sort("q", "fused_rank")
    for q, id_json, kind, reason, dup_json in dropped.select(
        "q", "id_json", "kind", "reason", "duplicate_of_json"
    ).iter_rows():
        omitted[q].append((reason, omission_text(id_json, kind, reason, dup_json)))
    walked = decisions.filter(pl.col("walk_step").is_not_null()).sort("q", "walk_step")
    for q, admitted, item_json, id_json, kind, reason in walked.select(
        "q", "admitted", "item_json", "id_json", "kind", "reason"
    ).iter_rows():
        if admitted:
            items[q].append(item_json)
        else:
            omitted[q].append((reason, omission_text(id_json, kind, reason)))
    return items, omitted


def _summaries(
    records: Sequence[LaneRecord],
    items_used: Sequence[int],
    bytes_used: Sequence[int],
    tokens_used: Sequence[int],
    omitted: Sequence[Sequence[tuple[str, str]]],
) -> pl.DataFrame:
    columns: dict[str, Any] = {
        "query_id": [record.query_id for record in records],
        "items_used": list(items_used),
        "bytes_used": list(bytes_used),
        "tokens_used": list(tokens_used),
        "omitted_total": [len(entries) for entries in omitted],
    }
    for reason in REASONS:
        columns[f"omitted_{reason}"] = [sum(1 for r, _ in entries if r == reason) for entries in omitted]
    columns["search_limit_cuts"] = [record.search_limit_cuts for record in records]
    return pl.DataFrame(columns, schema_overrides={name: pl.Int64 for name in columns if name != "query_id"})


def assemble_batch(
    records: Iterable[Mapping[str, Any]] | pl.DataFrame,
    *,
    overrides: Mapping[str, int] | None = None,
    policy: str | SelectionPolicy = CONTRACT,
    reorders: Mapping[str, Sequence[int]] | None = None,
    reranker: Reranker | None = None,
) -> BatchResult:
    """Validate and assemble lane-dump records; raise ``InputError`` on the first bad one.

    ``records`` are parsed JSON objects, or a Polars frame of lane-dump rows (as read from the
    Parquet form, where null means absent); a query id may appear once. ``overrides``
    (``max_items``/``max_bytes``/``max_tokens``, non-negative integers) replace every request's
    budget. ``policy`` is a policy or a registered name.
    """
    if isinstance(records, pl.DataFrame):
        records = [drop_nulls(row) for row in records.iter_rows(named=True)]
    checked = check_overrides(overrides)
    parsed: list[LaneRecord] = []
    seen: set[str] = set()
    for line, value in enumerate(records, start=1):
        record = parse_record(value, line=line, overrides=checked)
        repeated = repeated_query_id(record, seen)
        if repeated is not None:
            raise InputError(repeated)
        parsed.append(record)
    return assemble_records(parsed, policy=get_policy(policy), reorders=reorders, reranker=reranker)


def assemble(
    record: Mapping[str, Any], *, overrides: Mapping[str, int] | None = None, policy: str | SelectionPolicy = CONTRACT
) -> str:
    """The package text of one parsed lane-dump object.

    >>> import json
    >>> text = assemble({"query_id": "q", "context": "c", "request": {"origins": []},
    ...                  "lanes": {"passages": []}})
    >>> json.loads(text)["budget"]["bytes_used"]
    4
    """
    return assemble_batch([record], overrides=overrides, policy=policy).packages[0]
