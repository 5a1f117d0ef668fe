"""Answer-in-context: whether a gold answer survives into the evidence a mode serves.

recall@k says whether a gold *source* is among the hits; a reader can only answer from the text
it is given. Per case the score is 1 when any gold answer, normalized, is a substring of the
normalized evidence text, else 0 (a case without answers has no score).

* **The answers file** (``--answers FILE``): JSON Lines, ``{"case_id": string, "answers":
  [string, ...]}`` per line, a sidecar to the eval file (which stays as Taguru reads it). Read with
  the project's guarded JSON parsing; every problem is an exit-2 error naming the file, the line,
  the case and the field (never an answer). A ``case_id`` the eval file does not have is ignored
  and counted (an answers file may cover a larger set than the eval file run); an eval case
  without a line has no score and is counted too; a file that gives no case of the eval file an
  answer is refused.
* **The evidence text** of a package is its admitted items' texts in package order joined by a
  newline: a passage's and a community's ``text``, an association's ``subject``, ``label`` and
  ``object`` joined by spaces (an activation: its association). The baseline's is its served
  passages' texts: the passage lane cut at the case limit and, with a budget, the hits the
  truncation keeps (:func:`assembler.evaluate.baseline.truncate`).
* **Normalization** (:func:`normalized`, the one rule, as a Polars expression): English as the
  official SQuAD v1.1 script (lowercase; ASCII punctuation removed; the articles a, an, the
  removed; whitespace collapsed). A case whose query or answers hold kana or CJK ideographs
  (Japanese, written without spaces between words) takes the ``ja`` rule instead: NFKC, lowercase,
  Unicode and ASCII punctuation removed, every whitespace removed, no article step.

>>> normalize_text("The Cat's  hat, a-b!")
'cats hat ab'
>>> normalize_text("「東京」は、日本の 首都。" + chr(0xFF21), japanese=True)  # full-width A
'東京は日本の首都a'
>>> item_text({"kind": "association", "association": {"subject": "s", "label": "l", "object": "o"}})
's l o'
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl

from assembler.contract.jsoninput import read_json
from assembler.contract.text import is_blank
from assembler.contract.wire import ShapeError, check_duplicates
from assembler.errors import counted, shown
from assembler.evaluate import metrics
from assembler.evaluate.errors import EvaluateError
from assembler.evaluate.loader import EvalSet
from assembler.run.paths import shown as shown_path

__all__ = [
    "DEFINITION",
    "METRIC",
    "Answers",
    "answers_block",
    "evidence_text",
    "in_context",
    "in_context_frame",
    "item_text",
    "items_in_context",
    "japanese_case",
    "load_answers",
    "normalize_text",
    "normalized",
    "normalized_items",
]

METRIC = "answers.in_context"
"""The metric's name in the artifact's ``answers`` block and in ``compare``."""

_ASCII_PUNCTUATION = r"\x21-\x2F\x3A-\x40\x5B-\x60\x7B-\x7E"  # exactly Python's string.punctuation
_JAPANESE = re.compile("[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uff66-\uff9f]")
_KEYS = ("case_id", "answers")

NORMALIZATION = {
    "en": "SQuAD v1.1 official script: lowercase, ASCII punctuation removed, articles a/an/the removed, "
    "whitespace collapsed",
    "ja": "for a case whose query or answers hold kana or CJK ideographs: NFKC, lowercase, Unicode and ASCII "
    "punctuation removed, whitespace removed, no article step",
}
EVIDENCE = (
    "baseline: the served passages' texts (the passage lane cut at the case limit, then truncated to the budget); "
    "assembly: the admitted items' texts in package order (passage and community text; association subject, "
    "label and object joined by spaces), joined by a newline"
)
DEFINITION = {
    "unit": "ratio",
    "statistic": "distribution",
    "scopes": ["case"],
    "description": "per case: 1 when any gold answer, normalized, is a substring of the normalized evidence text "
    "the mode serves, else 0",
    "source": "--answers FILE (JSON Lines {case_id, answers}) and the served evidence text",
    "caveat": "only cases with an answers line are scored; a substring test, so a short answer (a number, a "
    "year) can match by chance and a paraphrased answer never does",
}


def normalized(text: pl.Expr, *, japanese: bool = False) -> pl.Expr:
    """The normalization rule as a Polars expression (see the module docstring)."""
    if japanese:
        return (
            text.str.normalize("NFKC")
            .str.to_lowercase()
            .str.replace_all(rf"[\p{{P}}{_ASCII_PUNCTUATION}]", "")
            .str.replace_all(r"\s+", "")
        )
    return (
        text.str.to_lowercase()
        .str.replace_all(f"[{_ASCII_PUNCTUATION}]", "")
        .str.replace_all(r"\b(a|an|the)\b", " ")
        .str.replace_all(r"\s+", " ")
        .str.strip_chars()
    )


def normalize_text(text: str, *, japanese: bool = False) -> str:
    """:func:`normalized` of one string."""
    value: str = pl.select(normalized(pl.lit(text, dtype=pl.String), japanese=japanese)).item()
    return value


def japanese_case(query: str, answers: Sequence[str]) -> bool:
    """Whether a case takes the ``ja`` rule: its query or an answer holds kana or CJK ideographs."""
    return any(_JAPANESE.search(text) for text in (query, *answers))


def item_text(item: Mapping[str, Any]) -> str:
    """One package item's evidence text."""
    kind = item.get("kind")
    if kind == "association":
        assoc = item["association"]
        return f"{assoc['subject']} {assoc['label']} {assoc['object']}"
    return str(item[kind]["text"]) if kind in ("passage", "community") else ""


def evidence_text(texts: Sequence[str]) -> str:
    """The evidence text of the served items' texts, in order."""
    return "\n".join(texts)


@dataclass(frozen=True)
class Answers:
    """A loaded answers file, joined to an eval set: the answers of each case (None = no line)."""

    path: str
    sha256: str
    by_case: tuple[tuple[str, ...] | None, ...]
    japanese: tuple[bool, ...]
    unknown: int

    @property
    def scored(self) -> int:
        """Cases with answers."""
        return sum(1 for answers in self.by_case if answers is not None)

    @property
    def missing(self) -> int:
        """Eval cases without an answers line."""
        return len(self.by_case) - self.scored

    def warnings(self) -> list[str]:
        """What the join left out (counts only: never an answer, never a case id list)."""
        found = []
        name = shown_path(self.path)
        if self.unknown:
            found.append(
                f"ignored {counted(self.unknown, 'line')} of {name} naming a case_id the eval file does not have"
            )
        if self.missing:
            found.append(
                f"no line in {name} for {counted(self.missing, 'case')}: answer-in-context is scored over "
                f"{counted(self.scored, 'case')}"
            )
        return found

    def frame(self) -> pl.DataFrame:
        """One row per (case, answer): ``q`` (case index), ``ja``, ``answer`` (normalized)."""
        rows = [
            (q, self.japanese[q], answer)
            for q, answers in enumerate(self.by_case)
            if answers is not None
            for answer in answers
        ]
        frame = pl.DataFrame(rows, schema={"q": pl.UInt32, "ja": pl.Boolean, "answer": pl.String}, orient="row")
        return _normalize_column(frame, "answer")


def _normalize_column(frame: pl.DataFrame, column: str) -> pl.DataFrame:
    """``column`` normalized row by row under each row's rule (``ja``), rows kept in order."""
    parts = [
        frame.with_row_index("_row")
        .filter(pl.col("ja") == japanese)
        .with_columns(normalized(pl.col(column), japanese=japanese))
        for japanese in (False, True)
    ]
    return pl.concat(parts).sort("_row").drop("_row")


def _problem(path: str, line: int, what: str) -> EvaluateError:
    return EvaluateError(f"{shown_path(path)}: line {line}: {what}")


def load_answers(path: str, evalset: EvalSet) -> Answers:
    """Read ``path`` (see the module docstring) and join it to ``evalset``'s cases."""
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise EvaluateError(f"cannot read {shown_path(path)}: {exc.strerror or exc}") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise _problem(path, line, f"not valid UTF-8 (byte {exc.start})") from None
    index = {case.case_id: i for i, case in enumerate(evalset.cases)}
    by_case: list[tuple[str, ...] | None] = [None] * len(evalset.cases)
    lines: list[int] = [0] * len(evalset.cases)
    seen: dict[str, int] = {}
    unknown = 0
    for number, raw in enumerate(text.split("\n"), start=1):
        if is_blank(raw):
            continue
        case_id, answers = _entry(raw, path, number)
        if case_id in seen:
            raise _problem(path, number, f"case '{shown(case_id)}': duplicate case_id (first on line {seen[case_id]})")
        seen[case_id] = number
        if case_id not in index:
            unknown += 1
            continue
        by_case[index[case_id]] = answers
        lines[index[case_id]] = number
    if all(answers is None for answers in by_case):
        raise EvaluateError(
            f"{shown_path(path)}: no line names a case of the eval file {shown_path(evalset.path)} "
            "(an answers file for another set?)"
        )
    japanese = tuple(
        answers is not None and japanese_case(case.query, answers)
        for case, answers in zip(evalset.cases, by_case, strict=True)
    )
    loaded = Answers(path, hashlib.sha256(data).hexdigest(), tuple(by_case), japanese, unknown)
    empty = loaded.frame().with_columns(position=pl.int_range(pl.len()).over("q")).filter(pl.col("answer") == "")
    if empty.height:
        q, position = empty.row(0, named=True)["q"], empty.row(0, named=True)["position"]
        raise _problem(
            path,
            lines[q],
            f"case '{shown(evalset.cases[q].case_id)}': field answers[{position}]: must not be empty after "
            "normalization (punctuation, articles and spaces only)",
        )
    return loaded


def _entry(raw: str, path: str, number: int) -> tuple[str, tuple[str, ...]]:
    try:
        value = read_json(raw.strip())  # the strict reader of every input: no repeated key, no lone surrogate
    except ShapeError as exc:
        raise _problem(path, number, f"field {exc.path}: {exc.rule}" if exc.path else exc.rule) from None
    if not isinstance(value, dict):
        raise _problem(path, number, 'must be an object {"case_id": ..., "answers": [...]}')
    try:
        check_duplicates(value, _KEYS, "")
    except ShapeError as exc:
        raise _problem(path, number, f"field {exc.path}: {exc.rule}") from None
    for key in value:
        if key not in _KEYS:
            raise _problem(path, number, f"unknown field '{shown(key)}' (known: {', '.join(_KEYS)})")
    case_id = value.get("case_id")
    if not isinstance(case_id, str) or is_blank(case_id):
        raise _problem(path, number, "field case_id: must be a non-blank string")
    where = f"case '{shown(case_id)}': field answers"
    answers = value.get("answers")
    if not isinstance(answers, list) or not answers:
        raise _problem(path, number, f"{where}: must be a non-empty array of strings")
    for i, answer in enumerate(answers):
        if not isinstance(answer, str) or is_blank(answer):
            raise _problem(path, number, f"{where}[{i}]: must be a non-blank string")
    return case_id, tuple(answers)


def in_context_frame(answers: Answers, evidence: pl.DataFrame) -> pl.DataFrame:
    """Per case with answers: ``q`` and ``hit`` (1 or 0); ``evidence`` has columns ``q`` and
    ``text``, the normalized evidence text under the case's rule (a case without a row is served
    nothing). One ``str.contains(literal=True)`` over every (case, answer) pair."""
    pairs = (
        answers.frame()
        .join(evidence.select("q", "text"), on="q", how="left")
        .with_columns(pl.col("text").fill_null(""))
    )
    return (
        pairs.with_columns(hit=pl.col("text").str.contains(pl.col("answer"), literal=True))
        .group_by("q")
        .agg(pl.col("hit").any().cast(pl.Int8))
        .sort("q")
    )


def in_context(answers: Answers, texts: Sequence[str]) -> list[int | None]:
    """Per case (eval order): 1 or 0, None where the case has no answers; ``texts`` are the
    cases' evidence texts (:func:`evidence_text`)."""
    frame = pl.DataFrame(
        {"q": range(len(texts)), "ja": answers.japanese, "text": list(texts)},
        schema={"q": pl.UInt32, "ja": pl.Boolean, "text": pl.String},
    )
    scored = in_context_frame(answers, _normalize_column(frame, "text"))
    values: list[int | None] = [None] * len(texts)
    for q, hit in scored.iter_rows():
        values[q] = int(hit)
    return values


def normalized_items(answers: Answers, items: pl.DataFrame) -> pl.DataFrame:
    """Candidate texts normalized once, for scoring many selections of them
    (:func:`items_in_context`): ``items`` has ``q``, ``candidate_id`` and ``text``; the result keeps
    the cases with answers and the items whose normalized text is not empty."""
    flags = pl.DataFrame(
        {"q": range(len(answers.japanese)), "ja": answers.japanese}, schema={"q": pl.UInt32, "ja": pl.Boolean}
    )
    scored = pl.DataFrame({"q": [q for q, a in enumerate(answers.by_case) if a is not None]}, schema={"q": pl.UInt32})
    frame = items.select(pl.col("q").cast(pl.UInt32), "candidate_id", "text").join(scored, on="q").join(flags, on="q")
    return _normalize_column(frame, "text").filter(pl.col("text") != "")


def items_in_context(answers: Answers, admitted: pl.DataFrame, items: pl.DataFrame) -> list[int | None]:
    """:func:`in_context` of the packages whose admitted items (``q``, ``walk_step``,
    ``candidate_id``, in package order) are among ``items`` (:func:`normalized_items`). The
    normalized items are joined by a space (``ja``: by nothing), which equals normalizing their
    texts joined by a newline: the newline is whitespace, and no rule step reaches across it."""
    served = (
        admitted.select(pl.col("q").cast(pl.UInt32), "walk_step", "candidate_id")
        .join(items, on=["q", "candidate_id"], how="inner")
        .sort("q", "walk_step")
        .group_by("q", maintain_order=True)
        .agg(pl.col("ja").first(), pl.col("text"))
        .with_columns(
            text=pl.when(pl.col("ja")).then(pl.col("text").list.join("")).otherwise(pl.col("text").list.join(" "))
        )
    )
    values: list[int | None] = [None] * len(answers.by_case)
    for q, hit in in_context_frame(answers, served).iter_rows():
        values[q] = int(hit)
    return values


def answers_block(answers: Answers, values: Sequence[int | None]) -> dict[str, Any]:
    """The artifact's additive ``answers`` block: inputs, rules, and the metric over the scored cases."""
    value = metrics.distribution(float(v) for v in values if v is not None)
    if value["n"] == 0:
        value["absent"] = "no case has an answers line"
    return {
        "path": answers.path,
        "sha256": answers.sha256,
        "cases": answers.scored,
        "cases_without_answers": answers.missing,
        "unknown_case_ids": answers.unknown,
        "normalization": dict(NORMALIZATION),
        "evidence": EVIDENCE,
        "definitions": {METRIC: dict(DEFINITION)},
        "metrics": {METRIC: value},
    }
