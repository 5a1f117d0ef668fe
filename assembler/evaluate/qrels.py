"""Standard labelled sets as eval cases: TREC or BEIR qrels plus a queries file, in place of ``--eval``.

**Qrels** (detected by content, gzip detected by its magic bytes): TREC ``qid iter docid rel``
(whitespace separated, ``iter`` ignored as trec_eval ignores it) or BEIR ``qrels/*.tsv``
(``query-id<TAB>corpus-id<TAB>score`` with that header line). **Queries**: BEIR ``queries.jsonl``
(one object per line with ``_id`` and ``text``, other keys ignored) or TSV ``qid<TAB>text``, read
by :func:`assembler.run.queries.read_queries` as ``lanes from-runs`` reads them.

How a qrels file becomes the cases of :mod:`assembler.evaluate.loader` (one rule per choice; the
documented list is ``docs/evaluate.md``, "Standard labelled sets"):

* a judged query with a text in the queries file is a case: ``case_id`` = the query id, ``query`` =
  its text, ``line`` = the qrels line of its first judgment, in the order of first appearance in
  the qrels file; ``options.limit`` = ``limit`` (default 10) for every case;
* a judgment of relevance >= 1 is an expected source: ``source`` = the document id (the default
  rule of ``lanes from-runs``: source = doc id, paragraph 0), no paragraph restriction (any
  paragraph of that source satisfies it), ``relevance`` = the grade, which is the nDCG gain
  (uncapped, as trec_eval's); a judgment of relevance <= 0 is dropped (non-relevant, as trec_eval
  treats it); an unjudged document is non-relevant;
* queries judged but without a text, and queries with a text but no judgment, are left out with a
  warning each (pass a queries file of a subset to evaluate that subset); every case must have a
  lane-dump record (the harness's rule for any eval set).

:func:`standard_scores` computes trec_eval's ``recall_k``, ``recip_rank`` (on the run cut at k)
and ``ndcg_cut_k`` from ranked document ids and judgments, vectorized with Polars; the
``evaluate`` artifact of a qrels run carries them per case and on average (:func:`qrels_block`).

>>> judged = parse_qrels("q1 0 d1 2\\nq1 0 d2 0\\nq1 0 d3 1\\n", "qrels.txt")
>>> judged.format, dict(judged.judgments["q1"])
('trec', {'d1': 2, 'd2': 0, 'd3': 1})
>>> scores = standard_scores([["d3", "x", "d1"]], [judged.judgments["q1"]], [10])
>>> float(scores["recall"][0]), float(scores["mrr"][0]), round(float(scores["ndcg"][0]), 4)
(1.0, 1.0, 0.7602)
"""

from __future__ import annotations

import gzip
import math
import re
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import polars as pl

from assembler.contract.text import is_blank
from assembler.errors import counted, shown
from assembler.evaluate.errors import EvaluateError
from assembler.evaluate.loader import MAX_LIMIT, CaseOptions, EvalCase, EvalSet, ExpectedSource
from assembler.run.paths import shown as shown_path
from assembler.run.queries import read_queries

__all__ = [
    "BEIR_HEADER",
    "Qrels",
    "QrelsSet",
    "load_qrels",
    "load_qrels_set",
    "parse_qrels",
    "qrels_block",
    "qrels_summary",
    "standard_scores",
]

BEIR_HEADER = ("query-id", "corpus-id", "score")
_FIELDS = re.compile(r"[ \t\r\f\v]+")  # the whitespace trec_eval splits on (ASCII only)
_INTEGER = re.compile(r"[+-]?[0-9]+")
_SHOWN_IDS = 3


@dataclass(frozen=True)
class Qrels:
    """A parsed qrels file: judgments per query (``{doc id: grade}``, every grade kept, in file
    order), the line of each query's first judgment, and the format found (``trec`` or ``beir``)."""

    path: str
    format: str
    judgments: dict[str, dict[str, int]]
    lines: dict[str, int]


@dataclass(frozen=True)
class QrelsSet(EvalSet):
    """The cases of a qrels file and a queries file (an :class:`EvalSet`, so every run takes it),
    with what was read and left out. ``path`` is the qrels file."""

    queries_path: str = ""
    format: str = "trec"
    judgments: Mapping[str, Mapping[str, int]] = field(default_factory=dict)
    warnings: tuple[str, ...] = ()


def _read_text(path: str) -> str:
    """The file's text: gunzipped when it starts with gzip's magic bytes, then UTF-8."""
    shown_name = shown_path(path)
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise EvaluateError(f"cannot read {shown_name}: {exc.strerror or exc}") from None
    if data[:2] == b"\x1f\x8b":
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError, zlib.error) as exc:
            raise EvaluateError(f"cannot read {shown_name}: not a valid gzip file ({exc})") from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise EvaluateError(f"cannot read {shown_name}: line {line}: not valid UTF-8 (byte {exc.start})") from None


def _lines(text: str) -> list[tuple[int, str]]:
    """Numbered non-blank lines, each without its line ending."""
    return [(n, line.rstrip("\r")) for n, line in enumerate(text.split("\n"), start=1) if not is_blank(line)]


def load_qrels(path: str) -> Qrels:
    """Read a TREC or BEIR qrels file (gzip or not); raise :class:`EvaluateError` at the first problem."""
    return parse_qrels(_read_text(path), path)


def parse_qrels(text: str, path: str) -> Qrels:
    """Parse qrels text named ``path`` (used in every message): the format is the first line's.

    A line of exactly three tab-separated fields makes the file BEIR (the first line must then be
    the header ``query-id<TAB>corpus-id<TAB>score``); otherwise four whitespace-separated fields make
    it TREC. The grade must be an integer (negative allowed: non-relevant). A (query, document)
    pair judged twice is refused: the two grades could disagree, and trec_eval keeps neither.
    """
    name = shown_path(path)
    lines = _lines(text)
    if not lines:
        raise EvaluateError(f"{name}: empty file: expected TREC qrels (qid iter docid rel) or BEIR qrels (a tsv)")
    first_number, first = lines[0]
    beir = len(first.split("\t")) == 3
    if beir:
        if tuple(first.split("\t")) != BEIR_HEADER:
            raise EvaluateError(
                f"{name}: line {first_number}: a tab-separated qrels file must start with the BEIR header "
                "'query-id<TAB>corpus-id<TAB>score'"
            )
        lines = lines[1:]
    elif len(_FIELDS.split(first.strip(" \t\f\v"))) != 4:
        raise EvaluateError(
            f"{name}: line {first_number}: not a qrels line: expected TREC 'qid iter docid rel' (4 fields "
            "separated by spaces or tabs) or BEIR 'query-id<TAB>corpus-id<TAB>score' (3 tab-separated fields "
            "after that header)"
        )
    judgments: dict[str, dict[str, int]] = {}
    first_lines: dict[str, int] = {}
    seen: dict[tuple[str, str], int] = {}
    for number, line in lines:
        where = f"{name}: line {number}"
        if beir:
            fields = line.split("\t")
            if len(fields) != 3:
                raise EvaluateError(
                    f"{where}: expected 3 tab-separated fields (query-id, corpus-id, score), got {len(fields)}"
                )
            qid, doc, grade_text = fields
            labels = BEIR_HEADER
        else:
            fields = _FIELDS.split(line.strip(" \t\f\v"))
            if len(fields) != 4:
                raise EvaluateError(f"{where}: expected 4 fields (qid iter docid rel), got {len(fields)}")
            qid, _, doc, grade_text = fields
            labels = ("qid", "docid", "rel")
        for label, value in zip(labels[:2], (qid, doc), strict=True):
            if is_blank(value):
                raise EvaluateError(f"{where}: {label} must not be empty")
        if not _INTEGER.fullmatch(grade_text):
            raise EvaluateError(f"{where}: {labels[2]} must be an integer, got '{shown(grade_text, 20)}'")
        pair = (qid, doc)
        if pair in seen:
            raise EvaluateError(
                f"{where}: query '{shown(qid)}' judges document '{shown(doc)}' a second time "
                f"(first at line {seen[pair]}): each pair may be judged once"
            )
        seen[pair] = number
        first_lines.setdefault(qid, number)
        judgments.setdefault(qid, {})[doc] = int(grade_text)
    if not judgments:
        raise EvaluateError(f"{name}: no judgments: expected at least one line after the header")
    return Qrels(path=path, format="beir" if beir else "trec", judgments=judgments, lines=first_lines)


def _some(ids: Sequence[str]) -> str:
    listed = ", ".join(f"'{shown(qid)}'" for qid in ids[:_SHOWN_IDS])
    return listed + (f" and {len(ids) - _SHOWN_IDS} more" if len(ids) > _SHOWN_IDS else "")


def load_qrels_set(qrels_path: str, queries_path: str, limit: int | None = None) -> QrelsSet:
    """The cases of ``qrels_path`` joined to the texts of ``queries_path`` (module docstring's rules);
    ``limit`` (1..=1000, default 10) is every case's ``options.limit``. A bad query line is the
    :class:`~assembler.errors.InputError` of :func:`~assembler.run.queries.read_queries` (a file
    that holds no queries, its :class:`~assembler.errors.UsageError`)."""
    if limit is not None and not 1 <= limit <= MAX_LIMIT:
        raise EvaluateError(f"limit must be 1..={MAX_LIMIT}, got {limit}")
    qrels = load_qrels(qrels_path)
    texts = dict(read_queries(queries_path))  # the one query-file reader (lanes from-runs, lanes build)
    qname, tname = shown_path(qrels_path), shown_path(queries_path)
    cases = []
    untexted = []
    unrelevant = []
    for qid, judged in qrels.judgments.items():
        if qid not in texts:
            untexted.append(qid)
            continue
        sources = tuple(ExpectedSource(doc, (), grade) for doc, grade in judged.items() if grade >= 1)
        if not sources:
            unrelevant.append(qid)
        cases.append(
            EvalCase(
                case_id=qid,
                query=texts[qid],
                line=qrels.lines[qid],
                expected_sources=sources,
                options=CaseOptions(limit=limit),
            )
        )
    if not cases:
        raise EvaluateError(f"{qname}: no judged query has a text in {tname}: nothing to evaluate")
    warnings = []
    if untexted:
        warnings.append(
            f"left out {counted(len(untexted), 'judged query id')} of {qname} without a text in {tname} "
            f"({_some(untexted)})"
        )
    unjudged = [qid for qid in texts if qid not in qrels.judgments]
    if unjudged:
        warnings.append(f"left out {counted(len(unjudged), 'query id')} of {tname} without a judgment in {qname}")
    if unrelevant:
        warnings.append(
            f"no document judged relevant (relevance >= 1) for {counted(len(unrelevant), 'case')}: no recall "
            f"block; the qrels block scores 0 there, as trec_eval does ({_some(unrelevant)})"
        )
    return QrelsSet(
        path=qrels_path,
        name=None,
        cases=tuple(cases),
        queries_path=queries_path,
        format=qrels.format,
        judgments={case.case_id: qrels.judgments[case.case_id] for case in cases},
        warnings=tuple(warnings),
    )


def standard_scores(
    runs: Sequence[Sequence[str]], judgments: Sequence[Mapping[str, int]], ks: Sequence[int]
) -> dict[str, npt.NDArray[np.float64]]:
    """trec_eval's ``recall_k``, ``recip_rank`` of the run cut at k (MRR@k) and ``ndcg_cut_k``, per query.

    ``runs[i]`` is query i's ranked document ids (a repeated id counts at its first position, and
    the ones after it move up, as on a run without repeats), ``judgments[i]`` its grades, ``ks[i]``
    its cut. Relevant = grade >= 1; the nDCG gain is the grade, the discount ``1/log2(rank + 1)``,
    the ideal is the top k grades. A query without a relevant document scores 0 on all three.
    """
    n = len(runs)
    hits = pl.DataFrame(
        {
            "q": np.repeat(np.arange(n, dtype=np.int64), [len(run) for run in runs]),
            "doc": [doc for run in runs for doc in run],
        },
        schema={"q": pl.Int64, "doc": pl.String},
    )
    grades = pl.DataFrame(
        {
            "q": np.repeat(np.arange(n, dtype=np.int64), [len(judged) for judged in judgments]),
            "doc": [doc for judged in judgments for doc in judged],
            "rel": [grade for judged in judgments for grade in judged.values()],
        },
        schema={"q": pl.Int64, "doc": pl.String, "rel": pl.Int64},
    ).filter(pl.col("rel") >= 1)
    cut = pl.DataFrame({"q": np.arange(n, dtype=np.int64), "k": np.asarray(ks, dtype=np.int64)})
    ranked = (
        hits.unique(subset=["q", "doc"], keep="first", maintain_order=True)
        .with_columns(rank=pl.int_range(1, pl.len() + 1).over("q"))
        .join(cut, on="q")
        .filter(pl.col("rank") <= pl.col("k"))
        .join(grades, on=["q", "doc"], how="left")
        .filter(pl.col("rel").is_not_null())
        .group_by("q")
        .agg(
            found=pl.len(),
            first=pl.col("rank").min(),
            dcg=(pl.col("rel") / (pl.col("rank") + 1).log(2)).sum(),
        )
    )
    ideal = (
        grades.sort(["q", "rel"], descending=[False, True])
        .with_columns(rank=pl.int_range(1, pl.len() + 1).over("q"))
        .join(cut, on="q")
        .group_by("q")
        .agg(
            relevant=pl.len(),
            idcg=(pl.col("rel") / (pl.col("rank") + 1).log(2)).filter(pl.col("rank") <= pl.col("k")).sum(),
        )
    )
    table = (
        cut.join(ranked, on="q", how="left")
        .join(ideal, on="q", how="left")
        .sort("q")
        .with_columns(pl.col("found", "relevant").fill_null(0), pl.col("dcg", "idcg").fill_null(0.0))
    )
    relevant = table["relevant"].to_numpy().astype(np.float64)
    found = table["found"].to_numpy().astype(np.float64)
    first = table["first"].fill_null(0).to_numpy().astype(np.float64)
    dcg, idcg = table["dcg"].to_numpy(), table["idcg"].to_numpy()
    with np.errstate(divide="ignore", invalid="ignore"):
        return {
            "recall": np.where(relevant > 0, found / relevant, 0.0),
            "mrr": np.where(first > 0, 1.0 / first, 0.0),
            "ndcg": np.where(idcg > 0, dcg / idcg, 0.0),
        }


def qrels_block(qset: QrelsSet, artifact: Mapping[str, Any]) -> dict[str, Any]:
    """The artifact's ``qrels`` extra: trec_eval's recall@k, MRR@k and nDCG@k of every case's hits
    (their sources as document ids, in hit order), per case and averaged over every case."""
    blocks = artifact["cases"]
    runs = [[hit["source"] for hit in block["passage"]["hits"]] for block in blocks]
    ks = [case.limit for case in qset.cases]
    scores = standard_scores(runs, [qset.judgments[case.case_id] for case in qset.cases], ks)
    k = ks[0] if len(set(ks)) == 1 else None
    label = {key: f"{key}@{k if k is not None else 'k'}" for key in ("recall", "mrr", "ndcg")}
    return {
        "path": qset.path,
        "format": qset.format,
        "queries": qset.queries_path,
        "k": k,
        "definition": (
            "trec_eval (pytrec_eval) recall_k, recip_rank on the run cut at k, ndcg_cut_k; the run is each "
            "case's passage hits as document ids (their sources) in hit order, a repeated id counted once at its "
            "first position; relevance >= 1 is relevant and the grade is the gain; every case counts (a case "
            "without a relevant document scores 0), as trec_eval -c over the cases"
        ),
        "metrics": {label[key]: math.fsum(scores[key].tolist()) / len(blocks) for key in ("ndcg", "recall", "mrr")},
        "cases": [
            {"case_id": block["case_id"], **{label[key]: float(scores[key][i]) for key in ("recall", "mrr", "ndcg")}}
            for i, block in enumerate(blocks)
        ],
    }


def qrels_summary(block: Mapping[str, Any] | None) -> list[str]:
    """The terminal line of a ``qrels`` block (none without one)."""
    if block is None:
        return []
    scores = ", ".join(f"{name} {value:.3f}" for name, value in block["metrics"].items())
    return [f"qrels (trec_eval definitions) over {counted(len(block['cases']), 'case')}: {scores}"]
