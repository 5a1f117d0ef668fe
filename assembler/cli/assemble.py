"""``assembler assemble``, ``explain`` and ``convert``: lane dumps in, thin over the Python API."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from assembler.analysis.explain import render_explanation
from assembler.cli.args import add_budget_flags, add_errors_flags, budget_overrides, errors_path, positive_integer
from assembler.cli.rerank import add_rerank_flags, finish_rerank, reranker_from_args
from assembler.errors import UsageError
from assembler.pipeline import assemble_records
from assembler.run.io import is_parquet, read_raw
from assembler.run.local import convert, run_assembly
from assembler.run.options import DEFAULT_CHUNK_BYTES, DEFAULT_CHUNK_SIZE, OutputFormat, RunOptions
from assembler.run.outputs import RunSummary
from assembler.run.paths import refuse_same_files
from assembler.run.pool import usable_cpus
from assembler.run.records import iter_records, stop_at_first
from assembler.selection import get_policy, policies

if TYPE_CHECKING:
    from assembler.rerank.reranker import ProviderReranker

__all__ = ["SAMPLE", "register"]

SAMPLE = Path(__file__).resolve().parent.parent.parent / "data" / "sample" / "lanes.jsonl"


def _inputs(args: argparse.Namespace) -> list[str]:
    if args.inputs:
        return list(args.inputs)
    if not SAMPLE.exists():
        raise UsageError("no INPUT given and the shipped sample data/sample/lanes.jsonl was not found")
    print(f"no INPUT given: assembling the shipped sample {SAMPLE}", file=sys.stderr)
    return [str(SAMPLE)]


def _progress(enabled: bool) -> tuple[Callable[[int], None] | None, Callable[[], None]]:
    if not enabled or not sys.stderr.isatty():
        return None, lambda: None
    from tqdm import tqdm

    bar = tqdm(unit=" queries", file=sys.stderr, leave=False)
    return bar.update, bar.close


def _options(args: argparse.Namespace, output_format: OutputFormat, reranker: ProviderReranker | None) -> RunOptions:
    """The run's options; the checks that name command-line flags come first."""
    if args.assess and output_format == "parquet":
        raise UsageError("--assess writes JSON Lines only; it cannot be combined with Parquet output")
    if args.engine == "local" and args.ray_address is not None:
        raise UsageError("--ray-address needs --engine ray")
    if args.engine == "ray" and args.workers is not None:
        raise UsageError("--workers is for --engine local (with --engine ray, the Ray instance's CPUs work)")
    if args.engine == "ray" and args.chunk_bytes is not None:
        raise UsageError("--chunk-bytes is for --engine local (Ray splits the input by --chunk-size)")
    if reranker is not None and args.workers not in (None, 1):
        raise UsageError(
            "--workers above 1 cannot be combined with a reranker (one HTTP client and circuit breaker "
            "serve the whole run); use --workers 1"
        )
    return RunOptions(
        output_format=output_format,
        overrides=budget_overrides(args),
        on_error=args.on_error,
        errors_path=errors_path(args),
        chunk_size=args.chunk_size,
        chunk_bytes=args.chunk_bytes or DEFAULT_CHUNK_BYTES,
        policy=get_policy(args.policy),
        assess=args.assess,
        reranker=reranker,
        workers=args.workers,  # None: one per usable CPU
    )


def _cmd_assemble(args: argparse.Namespace) -> int:
    output_format: OutputFormat = args.format or ("parquet" if is_parquet(args.output) else "jsonl")
    if output_format == "parquet" and args.output == "-":
        raise UsageError("--format parquet needs -o FILE (Parquet cannot stream to standard output)")
    inputs = _inputs(args)
    refuse_same_files(
        {"input": inputs},
        {"-o": args.output, "--errors": errors_path(args), "--metrics-out": args.metrics_out},
    )
    reranker = reranker_from_args(args)
    options = _options(args, output_format, reranker)
    update, close = _progress(not args.quiet)
    try:
        summary: RunSummary
        if args.engine == "ray":
            from assembler.run.ray import run_ray_assembly  # Ray is an optional extra

            summary = run_ray_assembly(inputs, args.output, options, progress=update, address=args.ray_address)
        else:
            summary = run_assembly(inputs, args.output, options, progress=update)
    finally:
        close()
    if not args.quiet:
        print(summary.line(), file=sys.stderr)
        if summary.rejected:
            print(f"{summary.rejected} rejected records written to {errors_path(args)}", file=sys.stderr)
    finish_rerank(args, reranker, quiet=args.quiet)
    return 0


def _cmd_explain(args: argparse.Namespace) -> int:
    records = iter_records(read_raw(args.inputs), stop_at_first, budget_overrides(args))
    wanted = [record for _, record in records if record.query_id == args.query_id]
    if not wanted:
        raise UsageError(f"query_id {args.query_id!r} is not in {', '.join(args.inputs)}")
    result = assemble_records(wanted, policy=get_policy(args.policy))
    print(render_explanation(result, args.query_id))
    return 0


def _cmd_convert(args: argparse.Namespace) -> int:
    refuse_same_files({"input": args.inputs}, {"-o": args.output, "--errors": errors_path(args)})
    summary = convert(
        args.inputs, args.output, on_error=args.on_error, errors_path=errors_path(args), chunk_size=args.chunk_size
    )
    print(f"converted {summary.queries} records, {summary.rejected} rejected", file=sys.stderr)
    return 0


def _policy_flag(parser: argparse.ArgumentParser) -> None:
    names = ", ".join(sorted(policies()))
    parser.add_argument(
        "--policy", default="contract", metavar="NAME", help=f"selection policy (default contract): {names}"
    )


def register(commands: Any) -> None:
    """Add ``assemble``, ``explain`` and ``convert`` to the ``assembler`` command's subparsers."""
    assemble = commands.add_parser("assemble", help="assemble packages for every query of the input")
    assemble.add_argument("inputs", nargs="*", metavar="INPUT", help="lane dumps (.jsonl or .parquet; - = stdin)")
    assemble.add_argument("-o", "--output", default="-", help="output file (default -, standard output)")
    assemble.add_argument("--format", choices=("jsonl", "parquet"), help="output format (default: by extension)")
    _policy_flag(assemble)
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
        type=positive_integer,
        metavar="N",
        help=f"--engine local: a JSON Lines chunk also ends at N bytes of input (default {DEFAULT_CHUNK_BYTES:,}: "
        "large records make smaller chunks)",
    )
    assemble.add_argument(
        "--workers",
        type=positive_integer,
        metavar="N",
        help=f"--engine local: processes assembling chunks (default: one per usable CPU, {usable_cpus()} here; "
        "1 = this process only, and always with a reranker); a pool starts only for a second chunk",
    )
    add_budget_flags(assemble)
    add_errors_flags(assemble, DEFAULT_CHUNK_SIZE)
    add_rerank_flags(assemble)
    assemble.set_defaults(run=_cmd_assemble)

    explain = commands.add_parser("explain", help="show how one query's package was selected")
    explain.add_argument("inputs", nargs="+", metavar="INPUT", help="lane dumps (.jsonl or .parquet; - = stdin)")
    explain.add_argument("--query-id", required=True, help="the query to explain")
    _policy_flag(explain)
    add_budget_flags(explain)
    explain.set_defaults(run=_cmd_explain)

    conv = commands.add_parser("convert", help="lane dumps JSON Lines <-> Parquet (by OUTPUT's extension)")
    conv.add_argument("inputs", nargs="+", metavar="INPUT", help="lane dumps (.jsonl or .parquet; - = stdin)")
    conv.add_argument("-o", "--output", required=True, help="output file: .parquet, or JSON Lines")
    add_errors_flags(conv, DEFAULT_CHUNK_SIZE)
    conv.set_defaults(run=_cmd_convert)
