"""``evaluate sweep``: baseline versus assembly over a list of budgets, as one table and one plot.

Budget list grammar (``--budgets``): entries separated by ``,``; an entry is ``default`` or one or
more ``KEY=N`` joined by ``/`` (KEY: ``items``, ``bytes``, ``tokens``, or the ``max_`` names), or a
bare ``N`` repeating the single key of the entry before it. Each entry is resolved like the flags
(missing keys take the defaults 40/65536/4000, ceilings apply) and the *same* resolved limits are
given to both modes, so the baseline is always truncated at exactly the assembly's budget.

>>> [b.label for b in parse_budgets("tokens=500,1000,default,items=5/tokens=1500")]
['tokens=500', 'tokens=1000', 'default', 'items=5/tokens=1500']
>>> parse_budgets("tokens=500,1000")[1].limits
Limits(max_items=40, max_bytes=65536, max_tokens=1000)
>>> swept_key(parse_budgets("tokens=500,1000"))
'max_tokens'
"""

from __future__ import annotations

import csv
import io
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from assembler.contract.request import Limits
from assembler.errors import shown
from assembler.evaluate.answers import METRIC as ANSWER_METRIC
from assembler.evaluate.answers import Answers
from assembler.evaluate.artifact import dump_json, scalar, write_json, write_text
from assembler.evaluate.catalog import DEFINITIONS
from assembler.evaluate.corpus import Corpus
from assembler.evaluate.dump import CaseLanes
from assembler.evaluate.errors import EvaluateError
from assembler.evaluate.harness import Progress, RunConfig, counter, limits_json, resolve_budget, run_artifact
from assembler.evaluate.loader import EvalSet
from assembler.run.atomic import AtomicFile

__all__ = ["MODES", "RUNS", "Budget", "SweepResult", "parse_budgets", "run_sweep", "swept_key", "write_sweep"]

_KEYS = {"items": "max_items", "bytes": "max_bytes", "tokens": "max_tokens"}
_SHORT = {value: key for key, value in _KEYS.items()}
MODES = ("baseline", "assembly")
RUNS = "runs"
"""The folder under ``--out-dir`` that holds each run's artifact."""
TABLE_COLUMNS = ("budget", "max_items", "max_bytes", "max_tokens", "mode", "policy", "metric", "value", "n")
SUMMARY_METRICS = (
    "recall.recall_at_k",
    "recall.ndcg",
    "recall.mrr",
    "citations.recall",
    "diversity.sources",
    "budget.omitted_rate",
)


@dataclass(frozen=True)
class Budget:
    """One budget of the sweep: its label, the keys it sets, and the resolved limits."""

    label: str
    overrides: dict[str, int]
    limits: Limits


def _key(name: str, spec: str) -> str:
    key = _KEYS.get(name, name)
    if key not in _SHORT:
        raise EvaluateError(
            f"--budgets '{shown(spec)}': unknown budget key '{shown(name)}' "
            "(use items, bytes, tokens or max_items, ...)"
        )
    return key


def _value(text: str, spec: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise EvaluateError(f"--budgets '{shown(spec)}': '{shown(text)}' is not a positive integer")
    return int(text)


def parse_budgets(spec: str, fixed: Mapping[str, int] | None = None) -> list[Budget]:
    """The budgets of ``spec``; ``fixed`` (the sweep's own ``--max-*`` flags) apply to every entry."""
    fixed = dict(fixed or {})
    budgets: list[Budget] = []
    previous: dict[str, int] | None = None
    for raw_entry in spec.split(","):
        entry = raw_entry.strip()
        if not entry:
            raise EvaluateError(f"--budgets '{shown(spec)}': empty entry")
        overrides: dict[str, int] = {}
        if entry == "default":
            pass
        elif entry.isdigit() or entry.startswith("-"):
            if previous is None or len(previous) != 1:
                raise EvaluateError(
                    f"--budgets '{shown(spec)}': a bare number ('{shown(entry)}') needs an entry with exactly one "
                    "KEY=N before it"
                )
            overrides = {next(iter(previous)): _value(entry, spec)}
        else:
            for part in entry.split("/"):
                name, sep, value = part.partition("=")
                if not sep:
                    raise EvaluateError(f"--budgets '{shown(spec)}': '{shown(part)}' is not KEY=N")
                key = _key(name.strip(), spec)
                if key in overrides:
                    raise EvaluateError(f"--budgets '{shown(spec)}': '{shown(name)}' given twice in '{shown(entry)}'")
                overrides[key] = _value(value.strip(), spec)
        clash = sorted(set(overrides) & set(fixed))
        if clash:
            raise EvaluateError(
                f"--budgets '{shown(spec)}': {clash[0]} is swept and also fixed by --{clash[0].replace('_', '-')}"
            )
        previous = overrides if overrides else None
        label = "default" if not overrides else "/".join(f"{_SHORT[k]}={v}" for k, v in overrides.items())
        limits = resolve_budget(True, {**fixed, **overrides})
        assert limits is not None
        budgets.append(Budget(label, overrides, limits))
    return budgets


def swept_key(budgets: Sequence[Budget]) -> str | None:
    """The one limit every budget sets alone (a numeric x axis), or None (categorical axis)."""
    keys = {tuple(budget.overrides) for budget in budgets}
    if len(keys) == 1 and len(next(iter(keys))) == 1:
        return next(iter(keys))[0]
    return None


@dataclass
class SweepResult:
    """Every run's artifact and the long table (budget, mode, metric)."""

    budgets: list[Budget]
    policy: str
    artifacts: dict[tuple[str, str], dict[str, Any]]
    rows: list[dict[str, Any]]

    def value(self, budget: Budget, mode: str, metric: str) -> float | None:
        """A metric's scalar for one budget and mode (answer-in-context from the ``answers`` block)."""
        artifact = self.artifacts[(budget.label, mode)]
        if metric == ANSWER_METRIC:
            return scalar(artifact.get("answers", {}).get("metrics", {}).get(metric), "distribution")
        return scalar(artifact["metrics"][metric], DEFINITIONS[metric].statistic)

    @property
    def has_answers(self) -> bool:
        """Whether the runs scored answer-in-context (``--answers``)."""
        return any("answers" in artifact for artifact in self.artifacts.values())

    def summary(self) -> list[str]:
        """A fixed-width table of the headline metrics (and answer-in-context, with ``--answers``)."""
        names = ("recall@k", "nDCG", "MRR", "cit.rec", "sources", "omitted") + (("answer",) if self.has_answers else ())
        shown = SUMMARY_METRICS + ((ANSWER_METRIC,) if self.has_answers else ())
        width = max(len("budget"), *(len(b.label) for b in self.budgets))
        lines = [f"{'budget':<{width}}  {'mode':<8}  " + "  ".join(f"{n:>8}" for n in names)]
        missing = False
        for budget in self.budgets:
            for mode in MODES:
                values = [self.value(budget, mode, metric) for metric in shown]
                missing |= None in values
                cells = [f"{'n/a':>8}" if v is None else f"{v:>8.3f}" for v in values]
                lines.append(f"{budget.label:<{width}}  {mode:<8}  " + "  ".join(cells))
        if missing:
            lines.append(f"  n/a: that run has no sample of the metric (its artifact in {RUNS}/ says why)")
        return lines


def run_sweep(
    evalset: EvalSet,
    lanes: CaseLanes,
    budgets: Sequence[Budget],
    policy: str,
    *,
    out_dir: str,
    corpus: Corpus | None = None,
    corpus_paths: Mapping[str, str] | None = None,
    answers: Answers | None = None,
    progress: Progress | None = None,
) -> SweepResult:
    """Run baseline and assembly at every budget (``answers``: answer-in-context rows too;
    ``progress``: the runs done, of budgets x modes)."""
    artifacts: dict[tuple[str, str], dict[str, Any]] = {}
    rows: list[dict[str, Any]] = []
    done = counter(progress, "runs (budgets x baseline, assembly)", len(budgets) * len(MODES))
    for budget in budgets:
        overrides = limits_json(budget.limits)
        for mode in MODES:
            config = RunConfig(assembly=mode == "assembly", policy=policy, overrides=overrides)
            out = str(Path(out_dir) / run_name(budget, mode))
            artifact, _ = run_artifact(
                evalset, lanes, config, out=out, corpus=corpus, corpus_paths=corpus_paths, answers=answers
            )
            artifacts[(budget.label, mode)] = artifact
            values = dict(artifact["metrics"])
            if answers is not None:
                values[ANSWER_METRIC] = artifact["answers"]["metrics"][ANSWER_METRIC]
            for metric, value in values.items():
                statistic = "distribution" if metric == ANSWER_METRIC else DEFINITIONS[metric].statistic
                rows.append(
                    {
                        "budget": budget.label,
                        **limits_json(budget.limits),
                        "mode": mode,
                        "policy": policy if mode == "assembly" else None,
                        "metric": metric,
                        "value": scalar(value, statistic),
                        "n": value.get("n"),
                    }
                )
            done(1)
    return SweepResult(list(budgets), policy, artifacts, rows)


def run_name(budget: Budget, mode: str) -> str:
    """The file name of one run's artifact inside ``runs/``."""
    limits = budget.limits
    return f"{RUNS}/{mode}-items{limits.max_items}-bytes{limits.max_bytes}-tokens{limits.max_tokens}.json"


def table_csv(rows: Sequence[Mapping[str, Any]]) -> str:
    """The long table as CSV (empty cell = no value)."""
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=TABLE_COLUMNS, lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow({key: "" if row[key] is None else row[key] for key in TABLE_COLUMNS})
    return buffer.getvalue()


def write_sweep(result: SweepResult, out_dir: str, figures: Mapping[str, bytes]) -> list[str]:
    """Write the table (CSV, JSON), the figures and every run's artifact; return the paths. Within
    :func:`~assembler.run.atomic.commit_together` (as the command does) they land together."""
    base = Path(out_dir)
    (base / RUNS).mkdir(parents=True, exist_ok=True)
    written = []
    table = {
        "taguru_evaluation_sweep": 1,
        "policy": result.policy,
        "budgets": [{"budget": b.label, **limits_json(b.limits)} for b in result.budgets],
        "rows": result.rows,
    }
    for name, text in (("sweep.csv", table_csv(result.rows)), ("sweep.json", dump_json(table))):
        write_text(str(base / name), text)
        written.append(str(base / name))
    for name, data in figures.items():
        with AtomicFile(str(base / name), binary=True) as out:
            out.handle.write(data)
            out.commit()
        written.append(str(base / name))
    for budget in result.budgets:
        for mode in MODES:
            path = base / run_name(budget, mode)
            write_json(str(path), result.artifacts[(budget.label, mode)])
            written.append(str(path))
    return written
