"""``assembler evaluate`` (run), ``evaluate compare``, ``evaluate sweep`` and ``evaluate tune``: thin
over the package.

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

from assembler.cli import messages
from assembler.cli.args import add_budget_flags, integer_at_least, policy_from_flags
from assembler.errors import counted, shown, shown_path
from assembler.evaluate.answers import Answers, load_answers
from assembler.evaluate.artifact import write_json, write_lines
from assembler.evaluate.compare import compare_paths, format_warnings
from assembler.evaluate.corpus import Corpus, load_corpus, preflight
from assembler.evaluate.dump import CaseLanes, file_digest, load_lanes
from assembler.evaluate.errors import EvaluateError
from assembler.evaluate.harness import Progress, RunConfig, run_artifact
from assembler.evaluate.loader import MAX_LIMIT, EvalSet, check_limits, load_eval
from assembler.evaluate.qrels import QrelsSet, load_qrels_set, qrels_block, qrels_summary
from assembler.evaluate.summary import run_summary, threshold_summary
from assembler.evaluate.thresholds import Thresholds, evaluate_gate, load_thresholds
from assembler.run.atomic import commit_together
from assembler.run.paths import PathGroup, refuse_same_files
from assembler.run.progress import progress_shown
from assembler.selection import get_policy, policies, register_policy

__all__ = ["evaluate_flags"]

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
    """Each line on stderr, escaped and bounded (:mod:`assembler.cli.messages`)."""
    messages.lines(lines)


def _guarded(command: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    """Print every line of an input error (exit 2) and a write failure (exit 1); no traceback."""

    def run(args: argparse.Namespace) -> int:
        try:
            return command(args)
        except EvaluateError as exc:
            messages.error_lines(exc.lines)
            return 2
        except OSError as exc:
            messages.error(f"the run could not complete: {exc}")
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
    answers: Answers | None
    warnings: list[str]


def _read(args: argparse.Namespace, outputs: PathGroup, *inputs: str, makes_folders: bool = False) -> _Inputs:
    """What ``evaluate``, ``sweep`` and ``tune`` do before their work: refuse an output that is
    an input or cannot be written, read every input (:func:`_inputs`) and print its warnings.
    ``inputs`` names the command's inputs beyond those of every run (``thresholds``)."""
    refuse_same_files(_input_flags(args, *inputs), outputs, makes_folders=makes_folders)
    given = _inputs(args)
    _stderr([f"{PREFIX}warning: {warning}" for warning in given.warnings])
    return given


class _Bars:
    """The progress bars of a long run on stderr, as ``assemble`` shows its own (tqdm): only when
    standard error is a terminal and ``-q`` is not given, one bar per step, every bar closed on
    the way out (an error's line then starts a line of its own)."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.enabled = progress_shown(quiet=getattr(args, "quiet", False))
        self.bars: list[Any] = []

    def __enter__(self) -> Progress | None:
        return self.bar if self.enabled else None

    def __exit__(self, *exc: object) -> None:
        for bar in self.bars:
            bar.close()

    def bar(self, label: str, total: int) -> Callable[[int], None]:
        from tqdm import tqdm

        bar = tqdm(total=total, desc=label, file=sys.stderr, leave=False)
        self.bars.append(bar)

        def update(done: int) -> None:
            bar.update(done)
            if bar.n >= total:
                bar.close()

        return update


def _inputs(args: argparse.Namespace) -> _Inputs:
    """Checks in the spec's order: eval file, limits, thresholds file, the lane dump and the corpus
    snapshot (in place of the server), then the source preflight."""
    evalset = _cases(args)
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
    answers = load_answers(args.answers, evalset) if getattr(args, "answers", None) is not None else None
    return _Inputs(evalset, thresholds, lanes, corpus, paths, answers, _warnings(evalset, lanes, answers))


def _cases(args: argparse.Namespace) -> EvalSet:
    """The eval file's cases, or those of ``--qrels`` with ``--queries`` (``--limit`` each)."""
    if args.qrels is not None:
        return load_qrels_set(args.qrels, args.queries, args.limit)
    if args.limit is not None:
        raise EvaluateError("--limit needs --qrels (an eval file sets each case's options.limit)")
    return load_eval(args.eval)


def _warnings(evalset: EvalSet, lanes: CaseLanes, answers: Answers | None = None) -> list[str]:
    warnings = list(evalset.warnings) if isinstance(evalset, QrelsSet) else []
    if answers is not None:
        warnings.extend(answers.warnings())
    for case in evalset.cases:
        filters = case.options.retrieval_filters()
        if filters:
            warnings.append(
                f"case '{shown(case.case_id)}': options.{'/'.join(filters)} not applied: an offline run uses the lane "
                "dump's lanes as dumped"
            )
    if lanes.unused:
        warnings.append(
            f"ignored {counted(lanes.unused, 'lane-dump record')} of {shown_path(lanes.path)} that no case asks for"
        )
    return warnings


def _require(args: argparse.Namespace, command: str) -> None:
    if args.eval is not None and (args.qrels is not None or args.queries is not None):
        raise EvaluateError("--eval and --qrels/--queries are alternatives: give one or the other")
    if (args.qrels is None) != (args.queries is None):
        given, missing = ("--qrels", "--queries") if args.queries is None else ("--queries", "--qrels")
        raise EvaluateError(f"{given} needs {missing} FILE (judgments and query texts go together)")
    if args.eval is None and args.qrels is None:
        raise EvaluateError(
            f"--eval FILE is required (or --qrels FILE --queries FILE) (see `assembler {command} --help`)"
        )
    if args.lanes is None:
        raise EvaluateError(f"--lanes FILE is required (see `assembler {command} --help`)")


def _policy(args: argparse.Namespace) -> str:
    """The policy name to run: ``--policy`` (default contract), or the tuned setting of
    ``--policy-config`` (registered under its name; it tunes ``quality`` only)."""
    config = getattr(args, "policy_config", None)
    policy = policy_from_flags(args.policy, config)
    return policy.name if config is None else register_policy(policy)


def _cmd_run(args: argparse.Namespace) -> int:
    _require(args, "evaluate")
    for flag, value in (("--policy", args.policy), ("--policy-config", args.policy_config)):
        if value is not None and not args.assembly:
            raise EvaluateError(f"{flag} requires --assembly (the baseline has no selection policy)")
    if args.engine == "ray" and not args.assembly:
        raise EvaluateError("--engine ray runs the assembly side: it requires --assembly")
    if args.ray_address is not None and args.engine != "ray":
        raise EvaluateError("--ray-address needs --engine ray")
    policy = _policy(args)
    get_policy(policy)
    given = _read(args, {"--out": args.out}, "thresholds")
    config = RunConfig(
        assembly=args.assembly,
        policy=policy,
        overrides=_overrides(args),
        engine=args.engine,
        ray_address=args.ray_address,
    )
    with _Bars(args) as progress:
        artifact, _ = run_artifact(
            given.evalset,
            given.lanes,
            config,
            out=args.out,
            warnings=given.warnings,
            corpus=given.corpus,
            corpus_paths=given.corpus_paths,
            answers=given.answers,
            progress=progress,
        )
    if isinstance(given.evalset, QrelsSet):
        artifact["qrels"] = qrels_block(given.evalset, artifact)
    if given.thresholds is not None:
        artifact["thresholds"] = evaluate_gate(given.thresholds, artifact)
    else:
        _stderr([f"{PREFIX}no --thresholds given — this run is report-only and always exits 0"])
    write_json(args.out, artifact)
    lines = [*run_summary(artifact), *qrels_summary(artifact.get("qrels")), f"wrote {shown_path(args.out)}"]
    if artifact["thresholds"] is not None:
        lines.extend(threshold_summary(artifact["thresholds"]))
    (_stderr if args.out == "-" else _print)(lines)
    return 3 if artifact["thresholds"] is not None and not artifact["thresholds"]["passed"] else 0


def _print(lines: Sequence[str]) -> None:
    """Each line on stdout, escaped and bounded as messages are."""
    messages.lines(lines, sys.stdout)


def _input_flags(args: argparse.Namespace, *extra: str) -> dict[str, str | None]:
    """The input files of a run, by flag."""
    names = ("eval", "qrels", "queries", "lanes", "sources", "citations", "policy_config", "answers", *extra)
    return {"--" + name.replace("_", "-"): getattr(args, name, None) for name in names}


def _cmd_compare(args: argparse.Namespace) -> int:
    """The summary; the changes file only with ``--out`` (a comparison is mostly read, not kept)."""
    refuse_same_files({"BASE": args.base, "HEAD": args.head}, {"--out": args.out})
    comparison = compare_paths(args.base, args.head, resamples=args.resamples, seed=args.seed)
    _stderr([f"{PREFIX}{line}" for line in format_warnings(comparison.warnings, written=args.out is not None)])
    if args.out is not None:
        write_lines(args.out, comparison.lines())
    _print(comparison.summary(args.out))
    return 0


def _cmd_sweep(args: argparse.Namespace) -> int:
    from assembler.evaluate.sweep import MODES, RUNS, parse_budgets, run_name, run_sweep, write_sweep

    _require(args, "evaluate sweep")
    policy = _policy(args)
    get_policy(policy)
    budgets = parse_budgets(args.budgets, _overrides(args))
    if Path(args.out_dir).exists() and not Path(args.out_dir).is_dir():
        raise EvaluateError(f"cannot write under {shown_path(args.out_dir)}: it is not a folder")
    runs = Path(args.out_dir) / RUNS
    if runs.exists() and not runs.is_dir():
        raise EvaluateError(
            f"cannot write under {shown_path(str(runs))}: it is not a folder (the sweep writes each run's "
            f"artifact into --out-dir's {RUNS}/ folder); move it or give another --out-dir"
        )
    names = ["sweep.csv", "sweep.json", "sweep.png", "sweep.svg"]
    names += [run_name(budget, mode) for budget in budgets for mode in MODES]
    out_files = [str(Path(args.out_dir) / name) for name in names]
    if not args.no_plot:
        from assembler.evaluate.plot import require_matplotlib

        require_matplotlib()
    given = _read(args, {"--out-dir": out_files}, makes_folders=True)
    evalset = given.evalset
    with _Bars(args) as progress:
        result = run_sweep(
            evalset,
            given.lanes,
            budgets,
            policy,
            out_dir=args.out_dir,
            corpus=given.corpus,
            corpus_paths=given.corpus_paths,
            answers=given.answers,
            progress=progress,
        )
    figures: dict[str, bytes] = {}
    if not args.no_plot:
        from assembler.evaluate.plot import render_figures

        figures = render_figures(result, f"{evalset.name or evalset.path}: baseline vs assembly ({policy})")
    with commit_together():  # every file lands, or none is replaced
        written = write_sweep(result, args.out_dir, figures)
    _print([*result.summary(), f"wrote {counted(len(written), 'file')} under {shown_path(args.out_dir)}"])
    return 0


def _significance_flags(parser: argparse.ArgumentParser) -> None:
    from assembler.evaluate.compare import RESAMPLES

    parser.add_argument(
        "--seed",
        action=_Once,
        type=integer_at_least(0, "needs a non-negative integer"),
        default=0,
        metavar="N",
        help="seed of the bootstrap intervals and the randomization tests (default 0)",
    )
    parser.add_argument(
        "--resamples",
        action=_Once,
        type=integer_at_least(100, "needs an integer of at least 100"),
        default=RESAMPLES,
        metavar="N",
        help=f"resamples of the bootstrap and the randomization test (default {RESAMPLES})",
    )


def _policy_config_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--policy-config",
        action=_Once,
        metavar="TUNED.json",
        help="apply a tuned quality setting (as 'evaluate tune' writes it); implies --policy quality",
    )


def _case_limit(text: str) -> int:
    value = _positive(text)
    if value > MAX_LIMIT:
        raise argparse.ArgumentTypeError(f"needs an integer from 1 to {MAX_LIMIT}, got {value}")
    return value


def _qrels_flags(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("a standard labelled set in place of --eval (docs/evaluate.md)")
    group.add_argument("--qrels", action=_Once, metavar="QRELS", help="TREC or BEIR qrels (gzip accepted)")
    group.add_argument("--queries", action=_Once, metavar="QUERIES", help="BEIR queries.jsonl or qid<TAB>text lines")
    group.add_argument(
        "--limit",
        action=_Once,
        type=_case_limit,
        metavar="K",
        help="with --qrels: hits kept per case, the k of every @k (default 10)",
    )


def _corpus_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--sources", action=_Once, metavar="FILE", help="corpus source list: source preflight, sources_count"
    )
    parser.add_argument(
        "--citations", action=_Once, metavar="FILE", help="corpus citations: the citation lane offline (validity)"
    )
    _answers_flag(parser)


def _answers_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--answers",
        action=_Once,
        metavar="FILE",
        help="gold answers, JSON Lines {case_id, answers}: scores answer-in-context (is a normalized gold answer "
        "in the served evidence text)",
    )


def _numbers(kind: Callable[[str], Any], what: str) -> Callable[[str], list[Any]]:
    """An argparse type: a comma-separated list of ``kind`` values, ``none`` for None."""

    def convert(text: str) -> list[Any]:
        values: list[Any] = []
        for part in text.split(","):
            part = part.strip()
            try:
                values.append(None if part.lower() == "none" else kind(part))
            except ValueError:
                raise argparse.ArgumentTypeError(
                    f"needs a comma-separated list of {what} or none, got {part!r}"
                ) from None
        return values

    return convert


def _cmd_tune(args: argparse.Namespace) -> int:
    import time

    from assembler.evaluate.artifact import dump_json, write_text
    from assembler.evaluate.sweep import parse_budgets
    from assembler.evaluate.tune import parse_objective, tune

    _require(args, "evaluate tune")
    if args.metric is not None and args.objective is not None:
        raise EvaluateError("--metric and --objective name the same thing: give one")
    objective = args.objective or args.metric or "recall_at_k"
    parse_objective(objective, answers=args.answers is not None)  # before any file is read
    budgets = parse_budgets(args.budgets)
    for share in args.shares:
        if share is not None and share <= 0:
            raise EvaluateError(f"--shares: {share} is not a positive number")
    given = _read(args, {"--out": args.out})
    if args.folds > len(given.evalset.cases):
        raise EvaluateError(f"--folds {args.folds}: the eval set has only {counted(len(given.evalset.cases), 'case')}")
    start = time.perf_counter()
    with _Bars(args) as progress:
        result = tune(
            given.evalset,
            given.lanes,
            budgets,
            folds=args.folds,
            seed=args.seed,
            objective=objective,
            lags=args.lags,
            shares=args.shares,
            margin=args.margin,
            answers=given.answers,
            progress=progress,
        )
    elapsed = time.perf_counter() - start
    text = dump_json(result.to_json(given.evalset, given.lanes, given.answers))
    write_text(args.out, text)
    if not result.adopted and result.decision is not None:
        _stderr([f"{PREFIX}tune: wrote the untuned quality settings: {result.decision.reason}"])
    _print([*result.summary(), f"searched in {elapsed:.1f} s; wrote {shown_path(args.out)}"])
    return 0


def _margin(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"needs a number of at least 0, got {text!r}") from None
    if not value >= 0:
        raise argparse.ArgumentTypeError(f"needs a number of at least 0, got {text!r}")
    return value


def _tune_parser(sub: Any) -> None:
    from assembler.evaluate.tune import DEFAULT_LAGS, DEFAULT_MARGIN, DEFAULT_SHARES, METRICS

    def listed(values: Sequence[Any]) -> str:
        return ",".join("none" if value is None else f"{value:g}" for value in values)

    tune = sub.add_parser(
        "tune",
        help="choose the quality policy's settings on a labelled set, with held-out folds",
        usage="assembler evaluate tune --eval EVAL.jsonl --lanes LANES [options] --out TUNED.json",
        description="Grid-search the quality policy's fact lag, statement share and source guard against the "
        "eval set's labels; report train and held-out scores per fold against the untuned quality, the contract "
        "and the baseline. The file written is a policy config for --policy-config.",
    )
    required = tune.add_argument_group("required arguments")
    required.add_argument("--eval", action=_Once, metavar="EVAL.jsonl", help="eval file (taguru_eval: 1)")
    required.add_argument("--lanes", action=_Once, metavar="LANES", help="lane dump (.jsonl or .parquet)")
    _qrels_flags(tune)
    _corpus_flags(tune)
    tune.add_argument(
        "--budgets",
        action=_Once,
        default="items=5/tokens=1500,items=10/tokens=3000,default",
        metavar="SPEC",
        help="budgets scored (as for sweep; default 'items=5/tokens=1500,items=10/tokens=3000,default')",
    )
    tune.add_argument(
        "--folds",
        action=_Once,
        type=integer_at_least(2, "needs an integer of at least 2"),
        default=5,
        metavar="K",
        help="cross-validation folds (default 5)",
    )
    tune.add_argument(
        "--seed",
        action=_Once,
        type=integer_at_least(0, "needs a non-negative integer"),
        default=0,
        metavar="N",
        help="seed of the folds and the bootstrap (default 0)",
    )
    tune.add_argument(
        "--objective",
        action=_Once,
        metavar="SPEC",
        help="what is optimized: recall_at_k, ndcg, mrr, answer_in_context (needs --answers), or a weighted "
        "sum such as 'recall=0.5,ndcg=0.5' (default recall_at_k)",
    )
    tune.add_argument(
        "--metric",
        action=_Once,
        choices=METRICS,
        help="the older name of a one-metric --objective",
    )
    tune.add_argument(
        "--lags",
        action=_Once,
        type=_numbers(int, "integers"),
        default=list(DEFAULT_LAGS),
        metavar="LIST",
        help=f"fact lags searched, none = facts last (default {listed(DEFAULT_LAGS)})",
    )
    tune.add_argument(
        "--shares",
        action=_Once,
        type=_numbers(float, "numbers"),
        default=list(DEFAULT_SHARES),
        metavar="LIST",
        help=f"statement shares searched, none = no statement test (default {listed(DEFAULT_SHARES)})",
    )
    tune.add_argument(
        "--margin",
        action=_Once,
        type=_margin,
        default=DEFAULT_MARGIN,
        metavar="X",
        help="the held-out loss tolerated: the candidate is written only if, at every budget, its held-out gain "
        "over the untuned quality is positive with a 95%% bootstrap lower bound of at least -X, and it is not "
        f"more than X below the baseline held out (default {DEFAULT_MARGIN:g})",
    )
    tune.add_argument(
        "--out",
        action=_Once,
        default="tuned.json",
        metavar="TUNED.json",
        help="the tuned setting and its record (default tuned.json)",
    )
    tune.set_defaults(run=_guarded(_cmd_tune))


def _run_flags(parser: argparse.ArgumentParser, *, sweep: bool) -> None:
    # Required, but checked by _require: argparse's own `required` would also demand them of `compare`.
    required = parser.add_argument_group("required arguments")
    required.add_argument("--eval", action=_Once, metavar="EVAL.jsonl", help="eval file (taguru_eval: 1)")
    required.add_argument("--lanes", action=_Once, metavar="LANES", help="lane dump (.jsonl or .parquet)")
    _qrels_flags(parser)
    parser.add_argument(
        "--policy",
        action=_Once,
        metavar="NAME",
        help=f"selection policy for assembly (default contract): {', '.join(sorted(policies()))}",
    )
    _policy_config_flag(parser)
    _corpus_flags(parser)
    add_budget_flags(
        parser,
        "budget (equal for both modes)" if not sweep else "fixed limits for every budget of the sweep",
        value_type=_positive,
        action=_Once,
    )


def evaluate_flags(evaluate: argparse.ArgumentParser) -> None:
    """The flags of ``assembler evaluate`` and its ``compare``/``sweep``/``tune`` subcommands (its
    line in ``assembler --help``: :mod:`assembler.cli.commands`)."""
    evaluate.usage = (
        "assembler evaluate --eval EVAL.jsonl --lanes LANES [options]\n"
        "       assembler evaluate {compare,sweep,tune} ..."
    )
    evaluate.description = (
        "Score the passage lane (baseline) or the assembled package (--assembly) of every case. "
        "Exit 0 done, 3 threshold violated, 2 bad input, 1 cannot write."
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
    sub = evaluate.add_subparsers(  # prog: the subcommands' usage starts with it, not with the usage above
        dest="evaluate_command", metavar="{compare,sweep,tune}", prog=evaluate.prog, help="instead of a run"
    )

    compare = sub.add_parser("compare", help="compare two run artifacts case by case")
    compare.add_argument("base", metavar="BASE.json", help="the run compared against (its artifact, as --out wrote it)")
    compare.add_argument("head", metavar="HEAD.json", help="the run compared (differences are HEAD - BASE)")
    compare.add_argument("--out", action=_Once, metavar="FILE", help="write the per-case changes (none without it)")
    _significance_flags(compare)
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
    _tune_parser(sub)
    for parser in (evaluate, sweep, sub.choices["tune"]):
        parser.add_argument("-q", "--quiet", action="store_true", help="no progress bars on stderr")
