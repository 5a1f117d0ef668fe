"""``assembler evaluate`` (run), ``evaluate compare`` and ``evaluate sweep``: thin over the package.

Exit status: 0 done (a run without ``--thresholds`` always), 3 a threshold was violated (the
artifact is still written), 2 bad input or usage (nothing written), 1 an output could not be
written.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from assembler.cli.args import add_budget_flags, integer_at_least
from assembler.evaluate.artifact import check_writable, write_json, write_lines
from assembler.evaluate.compare import compare_paths, format_warnings
from assembler.evaluate.corpus import Corpus, load_corpus, preflight
from assembler.evaluate.dump import CaseLanes, file_digest, load_lanes
from assembler.evaluate.errors import EvaluateError
from assembler.evaluate.harness import RunConfig, run_artifact
from assembler.evaluate.loader import EvalSet, check_limits, load_eval
from assembler.evaluate.summary import run_summary, threshold_summary
from assembler.evaluate.thresholds import Thresholds, evaluate_gate, load_thresholds
from assembler.run.paths import refuse_same_files
from assembler.selection import get_policy, policies

__all__ = ["register"]

PREFIX = "assembler: evaluate: "
_BUDGET_FLAGS = ("max_items", "max_bytes", "max_tokens")


class _Once(argparse.Action):
    """Store a flag's value, refusing the flag a second time (``--out given twice``)."""

    def __call__(
        self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any, option: str | None = None
    ) -> None:
        marker = f"_given_{self.dest}"
        if getattr(namespace, marker, False):
            parser.error(f"{option} given twice")
        setattr(namespace, marker, True)
        setattr(namespace, self.dest, self.const if self.nargs == 0 else values)


_positive = integer_at_least(1, "needs a positive integer")


def _stderr(lines: Sequence[str]) -> None:
    for line in lines:
        print(line, file=sys.stderr)


def _guarded(command: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    """Print every line of an input error (exit 2) and a write failure (exit 1); no traceback."""

    def run(args: argparse.Namespace) -> int:
        try:
            return command(args)
        except EvaluateError as exc:
            _stderr([f"assembler: error: {line}" for line in exc.lines])
            return 2
        except OSError as exc:
            _stderr([f"assembler: error: the run could not complete: {exc}"])
            return 1

    return run


def _overrides(args: argparse.Namespace) -> dict[str, int]:
    return {key: getattr(args, key) for key in _BUDGET_FLAGS if getattr(args, key, None) is not None}


@dataclass(frozen=True)
class _Inputs:
    evalset: EvalSet
    thresholds: Thresholds | None
    lanes: CaseLanes
    corpus: Corpus
    corpus_paths: dict[str, str]


def _inputs(args: argparse.Namespace) -> _Inputs:
    """Checks in the spec's order: eval file, limits, thresholds file, the lane dump and the corpus
    snapshot (in place of the server), then the source preflight."""
    evalset = load_eval(args.eval)
    check_limits(evalset)
    thresholds = None
    if getattr(args, "thresholds", None):
        thresholds = load_thresholds(args.thresholds, [case.case_id for case in evalset.cases])
    lanes = load_lanes(args.lanes, evalset)
    corpus = load_corpus(args.sources, args.citations)
    paths: dict[str, str] = {}
    for name in ("sources", "citations"):
        path = getattr(args, name)
        if path is not None:
            paths[name] = path
            paths[f"{name}_sha256"] = file_digest(path)
    if args.sources is not None:
        preflight(evalset, lanes, corpus, args.sources)
    return _Inputs(evalset, thresholds, lanes, corpus, paths)


def _warnings(evalset: EvalSet, lanes: CaseLanes) -> list[str]:
    warnings = []
    for case in evalset.cases:
        filters = case.options.retrieval_filters()
        if filters:
            warnings.append(
                f"case '{case.case_id}': options.{'/'.join(filters)} not applied: an offline run uses the lane "
                "dump's lanes as dumped"
            )
    if lanes.unused:
        warnings.append(f"{lanes.unused} lane-dump record(s) in {lanes.path} match no case and were ignored")
    return warnings


def _require(args: argparse.Namespace, command: str) -> None:
    for flag in ("eval", "lanes"):
        if getattr(args, flag, None) is None:
            raise EvaluateError(f"--{flag} FILE is required — try 'assembler {command} --help'")


def _cmd_run(args: argparse.Namespace) -> int:
    _require(args, "evaluate")
    if args.policy is not None and not args.assembly:
        raise EvaluateError("--policy requires --assembly (the baseline has no selection policy)")
    policy = args.policy or "contract"
    get_policy(policy)
    check_writable(args.out)
    refuse_same_files(_input_flags(args, "thresholds"), {"--out": args.out})
    given = _inputs(args)
    warnings = _warnings(given.evalset, given.lanes)
    _stderr([f"{PREFIX}warning: {warning}" for warning in warnings])
    if args.engine == "ray" and not args.assembly:
        raise EvaluateError("--engine ray runs the assembly side: it requires --assembly")
    if args.ray_address is not None and args.engine != "ray":
        raise EvaluateError("--ray-address needs --engine ray")
    config = RunConfig(
        assembly=args.assembly,
        policy=policy,
        overrides=_overrides(args),
        engine=args.engine,
        ray_address=args.ray_address,
    )
    artifact, _ = run_artifact(
        given.evalset,
        given.lanes,
        config,
        out=args.out,
        warnings=warnings,
        corpus=given.corpus,
        corpus_paths=given.corpus_paths,
    )
    if given.thresholds is not None:
        artifact["thresholds"] = evaluate_gate(given.thresholds, artifact)
    else:
        _stderr([f"{PREFIX}no --thresholds given — this run is report-only and always exits 0"])
    write_json(args.out, artifact)
    lines = [*run_summary(artifact), f"wrote {args.out}"]
    if artifact["thresholds"] is not None:
        lines.extend(threshold_summary(artifact["thresholds"]))
    (_stderr if args.out == "-" else _print)(lines)
    return 3 if artifact["thresholds"] is not None and not artifact["thresholds"]["passed"] else 0


def _print(lines: Sequence[str]) -> None:
    for line in lines:
        print(line)


def _input_flags(args: argparse.Namespace, *extra: str) -> dict[str, str | None]:
    """The input files of a run, by flag."""
    return {f"--{name}": getattr(args, name, None) for name in ("eval", "lanes", "sources", "citations", *extra)}


def _cmd_compare(args: argparse.Namespace) -> int:
    check_writable(args.out)
    refuse_same_files({"BASE": args.base, "HEAD": args.head}, {"--out": args.out})
    comparison = compare_paths(args.base, args.head)
    _stderr([f"{PREFIX}{line}" for line in format_warnings(comparison.warnings)])
    write_lines(args.out, comparison.lines())
    _print(comparison.summary(args.out))
    return 0


def _cmd_sweep(args: argparse.Namespace) -> int:
    from assembler.evaluate.sweep import MODES, parse_budgets, run_name, run_sweep, write_sweep

    _require(args, "evaluate sweep")
    policy = args.policy or "contract"
    get_policy(policy)
    budgets = parse_budgets(args.budgets, _overrides(args))
    if Path(args.out_dir).exists() and not Path(args.out_dir).is_dir():
        raise EvaluateError(f"cannot write under {args.out_dir}: it is not a folder")
    names = ["sweep.csv", "sweep.json", "sweep.png", "sweep.svg"]
    names += [run_name(budget, mode) for budget in budgets for mode in MODES]
    refuse_same_files(_input_flags(args), {"--out-dir": [str(Path(args.out_dir) / name) for name in names]})
    if not args.no_plot:
        from assembler.evaluate.plot import require_matplotlib

        require_matplotlib()
    given = _inputs(args)
    evalset = given.evalset
    _stderr([f"{PREFIX}warning: {warning}" for warning in _warnings(evalset, given.lanes)])
    result = run_sweep(
        evalset,
        given.lanes,
        budgets,
        policy,
        out_dir=args.out_dir,
        corpus=given.corpus,
        corpus_paths=given.corpus_paths,
    )
    figures: dict[str, bytes] = {}
    if not args.no_plot:
        from assembler.evaluate.plot import render_figures

        figures = render_figures(result, f"{evalset.name or evalset.path}: baseline vs assembly ({policy})")
    written = write_sweep(result, args.out_dir, figures)
    _print([*result.summary(), f"wrote {len(written)} file(s) under {args.out_dir}"])
    return 0


def _run_flags(parser: argparse.ArgumentParser, *, sweep: bool) -> None:
    # Required, but checked by _require: argparse's own `required` would also demand them of `compare`.
    required = parser.add_argument_group("required arguments")
    required.add_argument("--eval", action=_Once, metavar="EVAL.jsonl", help="eval file (taguru_eval: 1)")
    required.add_argument("--lanes", action=_Once, metavar="LANES", help="lane dump (.jsonl or .parquet)")
    parser.add_argument(
        "--policy",
        action=_Once,
        metavar="NAME",
        help=f"selection policy for assembly (default contract): {', '.join(sorted(policies()))}",
    )
    parser.add_argument(
        "--sources", action=_Once, metavar="FILE", help="corpus source list: source preflight, sources_count"
    )
    parser.add_argument(
        "--citations", action=_Once, metavar="FILE", help="corpus citations: the citation lane offline (validity)"
    )
    add_budget_flags(
        parser,
        "budget (equal for both modes)" if not sweep else "fixed limits for every budget of the sweep",
        value_type=_positive,
        action=_Once,
    )


def register(commands: Any) -> None:
    """Register ``evaluate`` (and its ``compare``/``sweep`` subcommands) on the top-level parser."""
    evaluate = commands.add_parser(
        "evaluate",
        usage="assembler evaluate --eval EVAL.jsonl --lanes LANES [options]\n"
        "       assembler evaluate {compare,sweep} ...",
        help="offline evaluation: baseline vs assembly on a labelled eval set",
        description="Score the passage lane (baseline) or the assembled package (--assembly) of every case. "
        "Exit 0 done, 3 threshold violated, 2 bad input, 1 cannot write.",
    )
    _run_flags(evaluate, sweep=False)
    evaluate.add_argument("--assembly", action=_Once, nargs=0, const=True, default=False, help="assemble each case")
    evaluate.add_argument("--thresholds", action=_Once, metavar="FILE", help="gate the run (exit 3 on violation)")
    evaluate.add_argument(
        "--engine", choices=("local", "ray"), default="local", help="assemble locally (default) or as one Ray job"
    )
    evaluate.add_argument("--ray-address", metavar="ADDRESS", help="with --engine ray: join this cluster")
    evaluate.add_argument(
        "--out", action=_Once, default="evaluation.json", metavar="RUN.json", help="artifact (default evaluation.json)"
    )
    evaluate.set_defaults(run=_guarded(_cmd_run))
    sub = evaluate.add_subparsers(dest="evaluate_command", metavar="{compare,sweep}")

    compare = sub.add_parser("compare", help="compare two run artifacts case by case")
    compare.add_argument("base", metavar="BASE.json")
    compare.add_argument("head", metavar="HEAD.json")
    compare.add_argument("--out", action=_Once, default="changes.jsonl", help="changes file (default changes.jsonl)")
    compare.set_defaults(run=_guarded(_cmd_compare))

    sweep = sub.add_parser(
        "sweep",
        help="baseline vs assembly over a list of budgets: table and plot",
        usage="assembler evaluate sweep --eval EVAL.jsonl --lanes LANES --budgets SPEC [options]",
    )
    _run_flags(sweep, sweep=True)
    sweep.add_argument(
        "--budgets",
        required=True,
        metavar="SPEC",
        help="e.g. 'tokens=500,1000,2000,4000' or 'items=5/tokens=1500,default,items=100/tokens=16000'",
    )
    sweep.add_argument("--out-dir", default="sweep", metavar="DIR", help="output folder (default sweep)")
    sweep.add_argument("--no-plot", action="store_true", help="write the table only (no matplotlib needed)")
    sweep.set_defaults(run=_guarded(_cmd_sweep))
