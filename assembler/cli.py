"""The command line, thin over the Python API: ``assemble``, ``explain``, ``convert``.

Exit status: 0 success, 2 bad input or usage (one clear line on stderr, never a traceback).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path
from typing import Literal

from assembler.argtypes import integer_at_least
from assembler.arrow import DEFAULT_CHUNK_BYTES
from assembler.assess import fixed_clock, run_assess
from assembler.engines.pool import usable_cpus
from assembler.errors import InputError, RecordError, UsageError
from assembler.evaluate.cli import add_evaluate_parser
from assembler.explain import render_explanation
from assembler.io import RawRecord, is_parquet, read_raw
from assembler.pipeline import assemble_records
from assembler.policy import get_policy
from assembler.rerank.options import add_rerank_flags, finish_rerank, reranker_from_args
from assembler.retrieval.command import register as register_lanes
from assembler.stream import DEFAULT_CHUNK_SIZE, RunSummary, convert, iter_records, run_assembly

__all__ = ["SAMPLE", "main"]

SAMPLE = Path(__file__).resolve().parent.parent / "data" / "sample" / "lanes.jsonl"


def _budget_flags(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("budget overrides (replace every request's budget, then ceilings apply)")
    for name in ("items", "bytes", "tokens"):
        group.add_argument(f"--max-{name}", type=_non_negative, metavar="N", dest=f"max_{name}")


_non_negative = integer_at_least(0, "must be a non-negative integer")


def _positive(text: str) -> int:
    value = _non_negative(text)
    if value == 0:
        raise argparse.ArgumentTypeError("must be at least 1")
    return value


def _overrides(args: argparse.Namespace) -> dict[str, int]:
    return {
        key: getattr(args, key) for key in ("max_items", "max_bytes", "max_tokens") if getattr(args, key) is not None
    }


def _inputs(args: argparse.Namespace) -> list[str]:
    if args.inputs:
        return list(args.inputs)
    if not SAMPLE.exists():
        raise UsageError("no INPUT given and the shipped sample data/sample/lanes.jsonl was not found")
    print(f"no INPUT given: assembling the shipped sample {SAMPLE}", file=sys.stderr)
    return [str(SAMPLE)]


def _errors_path(args: argparse.Namespace) -> str | None:
    if args.on_error != "skip":
        return None
    if args.errors:
        return str(args.errors)
    return "rejected.jsonl" if args.output == "-" else f"{args.output}.errors.jsonl"


def _progress(enabled: bool) -> tuple[Callable[[int], None] | None, Callable[[], None]]:
    if not enabled or not sys.stderr.isatty():
        return None, lambda: None
    from tqdm import tqdm

    bar = tqdm(unit=" queries", file=sys.stderr, leave=False)
    return bar.update, bar.close


def _engine(args: argparse.Namespace) -> Callable[..., RunSummary]:
    """``run_assembly``, or its Ray twin (imported only when asked for: Ray is an optional extra)."""
    if args.engine == "local":
        if args.ray_address is not None:
            raise UsageError("--ray-address needs --engine ray")
        # workers None: one per usable CPU
        return partial(run_assembly, workers=args.workers, chunk_bytes=args.chunk_bytes or DEFAULT_CHUNK_BYTES)
    if args.workers is not None:
        raise UsageError("--workers is for --engine local (with --engine ray, the Ray instance's CPUs work)")
    if args.chunk_bytes is not None:
        raise UsageError("--chunk-bytes is for --engine local (Ray splits the input by --chunk-size)")
    from assembler.engines.ray import run_ray_assembly

    return partial(run_ray_assembly, address=args.ray_address)


def _cmd_assemble(args: argparse.Namespace) -> int:
    output_format: Literal["jsonl", "parquet"] = args.format or ("parquet" if is_parquet(args.output) else "jsonl")
    if output_format == "parquet" and args.output == "-":
        raise UsageError("--format parquet needs -o FILE (Parquet cannot stream to standard output)")
    reranker = reranker_from_args(args)
    update, close = _progress(not args.quiet)
    try:
        summary = _engine(args)(
            _inputs(args),
            args.output,
            output_format=output_format,
            overrides=_overrides(args),
            on_error=args.on_error,
            errors_path=_errors_path(args),
            chunk_size=args.chunk_size,
            policy=get_policy(args.policy),
            progress=update,
            assess=args.assess,
            reranker=reranker,
        )
    finally:
        close()
    if not args.quiet:
        print(summary.line(), file=sys.stderr)
        if summary.rejected:
            print(f"{summary.rejected} rejected records written to {_errors_path(args)}", file=sys.stderr)
    finish_rerank(args, reranker, quiet=args.quiet)
    return 0


def _cmd_explain(args: argparse.Namespace) -> int:
    def stop(_raw: RawRecord, error: RecordError) -> None:
        raise InputError(error)

    wanted = [
        record
        for _, record in iter_records(read_raw(args.inputs), stop, _overrides(args))
        if record.query_id == args.query_id
    ]
    if not wanted:
        raise UsageError(f"query_id {args.query_id!r} is not in {', '.join(args.inputs)}")
    result = assemble_records(wanted, policy=get_policy(args.policy))
    print(render_explanation(result, args.query_id))
    return 0


def _cmd_assess(args: argparse.Namespace) -> int:
    summary = run_assess(
        args.inputs,
        args.output,
        on_error=args.on_error,
        errors_path=_errors_path(args),
        chunk_size=args.chunk_size,
        clock=fixed_clock(args.now),
    )
    print(summary.line(), file=sys.stderr)
    return 0


def _cmd_convert(args: argparse.Namespace) -> int:
    summary = convert(
        args.inputs, args.output, on_error=args.on_error, errors_path=_errors_path(args), chunk_size=args.chunk_size
    )
    print(f"converted {summary.queries} records, {summary.rejected} rejected", file=sys.stderr)
    return 0


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="assembler", description="Budgeted evidence assembly over lane dumps.")
    commands = parser.add_subparsers(dest="command", required=True)

    def errors_flags(sub: argparse.ArgumentParser) -> None:
        sub.add_argument(
            "--on-error",
            choices=("stop", "skip"),
            default="stop",
            help="stop at the first bad record (default), or skip it into the errors file",
        )
        sub.add_argument("--errors", help="errors file for --on-error skip (default: OUT.errors.jsonl)")
        sub.add_argument(
            "--chunk-size",
            type=_positive,
            default=DEFAULT_CHUNK_SIZE,
            help=f"queries per batch (default {DEFAULT_CHUNK_SIZE}; memory is bounded by it)",
        )

    assemble = commands.add_parser("assemble", help="assemble packages for every query of the input")
    assemble.add_argument("inputs", nargs="*", metavar="INPUT", help="lane dumps (.jsonl or .parquet; - = stdin)")
    assemble.add_argument("-o", "--output", default="-", help="output file (default -, standard output)")
    assemble.add_argument("--format", choices=("jsonl", "parquet"), help="output format (default: by extension)")
    assemble.add_argument(
        "--policy", default="contract", help="selection policy: contract (default), quality, or a quality ablation"
    )
    assemble.add_argument("-q", "--quiet", action="store_true", help="no progress bar and no summary line")
    assemble.add_argument(
        "--assess",
        action="store_true",
        help="add a support assessment beside each package (JSON Lines output only: with Parquet, exit 2)",
    )
    assemble.add_argument(
        "--engine", choices=("local", "ray"), default="local", help="local (default) or ray: Ray Data, docs/scaling.md"
    )
    assemble.add_argument("--ray-address", metavar="ADDRESS", help="join this Ray cluster (default: start a local one)")
    assemble.add_argument(
        "--chunk-bytes",
        type=_positive,
        metavar="N",
        help=f"--engine local: a JSON Lines chunk also ends at N bytes of input (default {DEFAULT_CHUNK_BYTES:,}: "
        "large records make smaller chunks)",
    )
    assemble.add_argument(
        "--workers",
        type=_positive,
        metavar="N",
        help=f"--engine local: processes assembling chunks (default: one per usable CPU, {usable_cpus()} here; "
        "1 = this process only, and always with a reranker); a pool starts only for a second chunk",
    )
    _budget_flags(assemble)
    errors_flags(assemble)
    add_rerank_flags(assemble)
    assemble.set_defaults(run=_cmd_assemble)

    explain = commands.add_parser("explain", help="show how one query's package was selected")
    explain.add_argument("inputs", nargs="+", metavar="INPUT")
    explain.add_argument("--query-id", required=True)
    explain.add_argument("--policy", default="contract")
    _budget_flags(explain)
    explain.set_defaults(run=_cmd_explain)

    conv = commands.add_parser("convert", help="lane dumps JSON Lines <-> Parquet (by OUTPUT's extension)")
    conv.add_argument("inputs", nargs="+", metavar="INPUT")
    conv.add_argument("-o", "--output", required=True)
    errors_flags(conv)
    conv.set_defaults(run=_cmd_convert)

    assess = commands.add_parser("assess", help="support assessment (Lexery U7) of run contexts, one per line")
    assess.add_argument("inputs", nargs="+", metavar="INPUT", help="run contexts (.jsonl; - = stdin)")
    assess.add_argument("-o", "--output", default="-", help="output file (default -, standard output)")
    assess.add_argument("--now", metavar="ISO8601", help="assembled_at of every result (default: the current time)")
    errors_flags(assess)
    assess.set_defaults(run=_cmd_assess)

    register_lanes(commands)  # `lanes build`: assembler/retrieval/command.py
    add_evaluate_parser(commands)  # `evaluate` (+ compare, sweep): assembler/evaluate/cli.py
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``assembler`` command; returns the exit status."""
    args = _parser().parse_args(argv)
    try:
        status: int = args.run(args)
    except (InputError, UsageError) as exc:
        print(f"assembler: error: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        return 0
    return status


if __name__ == "__main__":
    sys.exit(main())
