"""Lane dumps in: read, validate with the assembler's own rules, and join to cases by id.

A case is joined to the lane-dump record whose ``query_id`` equals its ``case_id``; a case without
one is an input error (every such case is named, with its eval line). Records no case asks for are
ignored (counted in :attr:`CaseLanes.unused`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from assembler.contract import wire
from assembler.errors import InputError, RecordError, shown, shown_path
from assembler.evaluate.errors import EvaluateError
from assembler.evaluate.loader import EvalSet
from assembler.run.io import read_raw
from assembler.stages.lanes import LaneRecord, parse_record

__all__ = ["CaseLanes", "DumpRecord", "describe_contexts", "file_digest", "load_lanes"]


@dataclass(frozen=True)
class DumpRecord:
    """One validated lane-dump record: the raw parsed object (for assembly), the validated one, and
    its JSON text as read (assembled as is when a case asks for the record's own search limit)."""

    raw: dict[str, Any]
    record: LaneRecord
    text: str

    def passages(self) -> list[dict[str, Any]]:
        """The whole passage lane as clean wire dicts (not cut at the request's ``search_limit``)."""
        entries = self.raw["lanes"].get("passages") or []
        return [wire.validate(wire.PASSAGE_HIT, entry, f"lanes.passages[{i}]") for i, entry in enumerate(entries)]

    def has_graph_lanes(self) -> bool:
        """Whether the record carries a graph lane (``graph_query`` or ``graph_activate`` as a list)."""
        lanes = self.record.lanes
        return lanes["graph_query"] is not None or lanes["graph_activate"] is not None


@dataclass(frozen=True)
class CaseLanes:
    """The dump records in case order, and what the dump looks like as a whole."""

    path: str
    sha256: str
    records: list[DumpRecord]
    unused: int
    contexts: list[str]
    carries_graph: bool
    sources_count: int


def file_digest(path: str) -> str:
    """SHA-256 (hex) of a file's bytes."""
    sha = hashlib.sha256()
    try:
        with open(path, "rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                sha.update(block)
    except OSError as exc:
        raise EvaluateError(f"cannot read {shown_path(path)}: {exc.strerror or exc}") from None
    return sha.hexdigest()


def _sources(record: LaneRecord) -> set[str]:
    lanes = record.lanes
    found = {hit["source"] for hit in lanes["passages"] or ()}
    found.update("community:" + hit["community"] for hit in lanes["communities"] or ())
    found.update(entry["source"] for entry in lanes["citations"] or ())
    associations = [*(lanes["graph_query"] or ()), *(act["association"] for act in lanes["graph_activate"] or ())]
    for assoc in associations:
        found.update(att["source"] for att in assoc["attributions"])
    return found


def load_lanes(path: str, evalset: EvalSet) -> CaseLanes:
    """Read the lane dump at ``path`` and return one record per case of ``evalset``, in order."""
    if not Path(path).exists() and path != "-":
        raise EvaluateError(f"cannot read {shown_path(path)}: no such file")
    digest = "" if path == "-" else file_digest(path)
    by_id: dict[str, DumpRecord] = {}
    for raw in read_raw([path]):
        if raw.error is not None:
            raise InputError(raw.error)
        record = parse_record(raw.value, file=raw.file, line=raw.line)
        if record.query_id in by_id:
            raise InputError(
                RecordError(
                    raw.file, raw.line, record.query_id, "query_id", "duplicate query_id (each query may appear once)"
                )
            )
        by_id[record.query_id] = DumpRecord(raw.value, record, raw.text)
    missing = [case for case in evalset.cases if case.case_id not in by_id]
    if missing:
        raise EvaluateError(
            [
                f"{shown_path(evalset.path)}: line {case.line}: case '{shown(case.case_id)}': no lane-dump record "
                f"with query_id '{shown(case.case_id)}' in {shown_path(path)}"
                for case in missing
            ]
        )
    records = [by_id[case.case_id] for case in evalset.cases]
    sources: set[str] = set()
    for item in records:
        sources |= _sources(item.record)
    return CaseLanes(
        path=path,
        sha256=digest,
        records=records,
        unused=len(by_id) - len(records),
        contexts=sorted({item.record.context for item in records}),
        carries_graph=any(item.has_graph_lanes() for item in records),
        sources_count=len(sources),
    )


def describe_contexts(contexts: Sequence[str]) -> str:
    """The ``inputs.context`` value: the one context name, or the names joined with ``,``."""
    return ",".join(contexts)
