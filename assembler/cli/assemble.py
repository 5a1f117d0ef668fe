"""``assembler assemble``, ``explain`` and ``convert``: lane dumps in, thin over the Python API."""

from __future__ import annotations

import argparse
import os
import stat
import sys
from collections.abc import Callable, Sequence
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow as pa

from assembler.cli.args import (
    add_budget_flags,
    add_errors_flags,
    budget_overrides,
    errors_path,
    policy_from_flags,
    positive_integer,
)
from assembler.cli.messages import lines, warning
from assembler.cli.rerank import add_rerank_flags, finish_rerank, reranker_from_args, write_rerank_metrics
from assembler.contract.request import DEFAULT_SEARCH_LIMIT, MAX_SEARCH_LIMIT
from assembler.errors import UsageError, counted, shown_path
from assembler.pipeline import assemble_records
from assembler.run.atomic import commit_together
from assembler.run.io import is_parquet, open_input, parquet_file, read_raw
from assembler.run.local import convert, run_assembly
from assembler.run.options import DEFAULT_CHUNK_BYTES, DEFAULT_CHUNK_SIZE, OutputFormat, RunOptions
from assembler.run.outputs import RunSummary
from assembler.run.paths import output_format as choose_format
from assembler.run.paths import refuse_same_files
from assembler.run.progress import progress_shown
from assembler.run.records import iter_records, stop_at_first
from assembler.run.workers import capped_workers, usable_cpus
from assembler.selection import policies

if TYPE_CHECKING:
    from assembler.rerank.reranker import ProviderReranker

__all__ = ["SAMPLE", "assemble_flags", "convert_flags", "explain_flags"]

SAMPLE = Path(str(resources.files("assembler") / "sample" / "lanes.jsonl"))
"""30 Japanese queries shipped inside the package (``data/sample`` links to the same folder)."""


def _stdin_is_data() -> bool:
    """Standard input is a pipe or a regular file (``cat x | assembler``, ``assembler < x``); a
    terminal, ``/dev/null`` or a closed stdin (a scheduler's, CI's) is not."""
    try:
        mode = os.fstat(sys.stdin.fileno()).st_mode
    except (AttributeError, OSError, ValueError):  # no real file behind it
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISREG(mode)


def _inputs(args: argparse.Namespace) -> list[str]:
    """The INPUTs; without any, standard input when it is piped or a file, else the shipped sample."""
    if args.inputs:
        return list(args.inputs)
    if _stdin_is_data():
        return ["-"]
    if not SAMPLE.is_file():
        raise UsageError(f"no INPUT given and the shipped sample {SAMPLE} was not found")
    lines([f"no INPUT given: assembling the shipped sample {shown_path(SAMPLE)}"])
    return [str(SAMPLE)]


COUNT_LINES_UP_TO = 2 * 2**30
"""Inputs of up to 2 GiB of JSON Lines are counted before the run (about a second per GiB) so the
progress bar shows a total and an ETA; larger inputs show a count and a rate only."""


def count_records(paths: Sequence[str]) -> int | None:
    """The number of records of the input files (Parquet: from the footer; JSON Lines: non-blank
    lines), or ``None`` when that is not cheap to know (standard input, very large or compressed
    inputs)."""
    if "-" in paths:
        return None
    try:
        if sum(os.path.getsize(path) for path in paths if not is_parquet(path)) > COUNT_LINES_UP_TO:
            return None
        total = 0
        for path in paths:
            if is_parquet(path):
                total += parquet_file(path).metadata.num_rows
                continue
            with open_input(path) as handle:
                if handle.compression is not None:  # counting would decompress the input twice
                    return None
                total += sum(1 for line in handle if line.strip())
        return total
    except (OSError, ValueError, pa.ArrowException, UsageError):  # the run itself reports unreadable inputs
        return None


def _progress(enabled: bool, inputs: Sequence[str]) -> tuple[Callable[[int], None] | None, Callable[[], None]]:
    if not progress_shown(quiet=not enabled):
        return None, lambda: None
    from tqdm import tqdm

    bar = tqdm(total=count_records(inputs), unit=" queries", file=sys.stderr, leave=False)
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
        policy=policy_from_flags(args.policy, args.policy_config),
        assess=args.assess,
        reranker=reranker,
        workers=_capped_workers(args.workers),  # None: chosen from the input's size
        max_record_bytes=args.max_record_bytes,
    )


def _capped_workers(workers: int | None) -> int | None:
    """``--workers``, at most one per usable CPU: more processes than CPUs only compete (and each
    costs an interpreter's start and memory); a warning says so."""
    if workers is None:
        return None
    cpus = capped_workers(workers)
    if cpus < workers:
        warning(f"--workers {workers} is more than the {cpus} CPU(s) this process may use: using {cpus}")
    return cpus


def _refuse_a_terminal() -> None:
    """Packages are not written to a terminal unasked: without ``-o``, ``assembler assemble`` alone
    would print the whole sample's JSON (about 250 KB) on the screen. A file, a pipe, ``-o -`` or
    ``-o /dev/tty`` (asked for by name) is written."""
    try:
        terminal = sys.stdout.isatty()
    except (AttributeError, ValueError):  # no real stream behind it
        return
    if terminal:
        raise UsageError("not writing packages to a terminal: give -o FILE (such as -o packages.jsonl), or pipe them")


def _inputs_named(inputs: Sequence[str]) -> str:
    """The inputs as a message names them: one or a few by name, more by their count."""
    names = ["standard input" if path == "-" else shown_path(path) for path in inputs]
    if len(names) == 1:
        return names[0]
    return f"the inputs {', '.join(names)}" if len(names) <= 3 else f"the {len(names)} inputs"


def _warn(summary: RunSummary) -> None:
    """The run's warnings (ignored budget keys, clamped budgets), shown also with ``-q``."""
    for message in summary.warnings():
        warning(message)


def _report(args: argparse.Namespace, inputs: Sequence[str], summary: RunSummary) -> None:
    """The run's warnings (also with ``-q``), then its summary lines (not with ``-q``)."""
    _warn(summary)
    if summary.queries == 0 and summary.rejected == 0:
        warning(f"{_inputs_named(inputs)} held no records")
    if args.quiet:
        return
    said = [summary.line()]
    if summary.rejected:
        said.append(f"{counted(summary.rejected, 'rejected record')} written to {shown_path(str(errors_path(args)))}")
    lines(said)
    if summary.search_limit_cuts:
        warning(
            f"search_limit cut {counted(summary.search_limit_cuts, 'passage or community hit')} (request.search_limit: "
            f"default {DEFAULT_SEARCH_LIMIT}, at most {MAX_SEARCH_LIMIT}): set a higher search_limit in the lane "
            "dump's requests to keep them (lanes build and lanes from-runs write it with --search-limit)"
        )


def _cmd_assemble(args: argparse.Namespace) -> int:
    if args.output is None:  # no -o: standard output, unless that is a terminal
        _refuse_a_terminal()
        args.output = "-"
    inputs = _inputs(args)
    refuse_same_files(
        {"input": inputs, "--policy-config": args.policy_config},
        {"-o": args.output, "--errors": errors_path(args), "--metrics-out": args.metrics_out},
    )
    output_format = _output_format(args)
    reranker = reranker_from_args(args)
    options = _options(args, output_format, reranker)
    update, close = _progress(not args.quiet, inputs)
    try:
        summary: RunSummary
        with commit_together():  # packages, errors file and metrics land together, or none does
            if args.engine == "ray":
                from assembler.run.ray import run_ray_assembly  # Ray is an optional extra

                summary = run_ray_assembly(inputs, args.output, options, progress=update, address=args.ray_address)
            else:
                summary = run_assembly(inputs, args.output, options, progress=update)
            write_rerank_metrics(args, reranker)
    finally:
        close()
    _report(args, inputs, summary)
    finish_rerank(args, reranker, quiet=args.quiet)
    return 0


def _cmd_explain(args: argparse.Namespace) -> int:
    records = iter_records(read_raw(args.inputs), stop_at_first, budget_overrides(args))
    wanted = [record for _, record in records if record.query_id == args.query_id]
    if not wanted:
        raise UsageError(f"query_id {args.query_id!r} is not in {', '.join(args.inputs)}")
    from assembler.analysis.explain import render_explanation  # the explain view: only this command loads it

    result = assemble_records(wanted, policy=policy_from_flags(args.policy, args.policy_config))
    print(render_explanation(result, args.query_id))
    return 0


def _output_format(args: argparse.Namespace) -> OutputFormat:
    """``--format``, else the output's extension, as the Python API reads it
    (:func:`assembler.run.paths.output_format`: an extension that names no format is refused, a
    CSV name would otherwise get JSON Lines). Parquet cannot stream to standard output."""
    output_format = choose_format(args.output, args.format, label="-o", option="--format parquet or --format jsonl")
    if output_format == "parquet" and args.output == "-":
        raise UsageError("--format parquet needs -o FILE (Parquet cannot stream to standard output)")
    return output_format


def _cmd_convert(args: argparse.Namespace) -> int:
    refuse_same_files({"input": args.inputs}, {"-o": args.output, "--errors": errors_path(args)})
    output_format = _output_format(args)
    summary = convert(
        args.inputs,
        args.output,
        on_error=args.on_error,
        errors_path=errors_path(args),
        chunk_size=args.chunk_size,
        output_format=output_format,
        max_record_bytes=args.max_record_bytes,
    )
    _warn(summary)
    lines([f"converted {counted(summary.queries, 'record')}, {summary.rejected} rejected"])
    return 0


def _policy_flag(parser: argparse.ArgumentParser) -> None:
    names = ", ".join(sorted(policies()))
    parser.add_argument("--policy", metavar="NAME", help=f"selection policy (default contract): {names}")
    parser.add_argument(
        "--policy-config",
        metavar="TUNED.json",
        help="apply a tuned quality setting (as 'assembler evaluate tune' writes it); implies --policy quality",
    )


def assemble_flags(assemble: argparse.ArgumentParser) -> None:
    """The flags of ``assembler assemble`` (its line in ``assembler --help``: :mod:`assembler.cli.commands`)."""
    assemble.add_argument(
        "inputs",
        nargs="*",
        metavar="INPUT",
        help="lane dumps (.jsonl or .parquet; - = stdin). Without INPUT: standard input when it is "
        "piped or redirected from a file, else the shipped sample of 30 queries",
    )
    assemble.add_argument(
        "-o", "--output", help="output file (default -, standard output; not a terminal unless -o - is given)"
    )
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
        help=f"--engine local: a chunk also ends at N bytes of input, JSON Lines text or Parquet rows decoded "
        f"(default {DEFAULT_CHUNK_BYTES:,}: large records make smaller chunks)",
    )
    assemble.add_argument(
        "--workers",
        type=positive_integer,
        metavar="N",
        help="--engine local: processes assembling chunks (default: one per 80 MiB of input files, at most "
        f"one per usable CPU ({usable_cpus()} here), one for standard input and with a reranker; "
        "1 = this process only)",
    )
    add_budget_flags(assemble)
    add_errors_flags(assemble, DEFAULT_CHUNK_SIZE)
    add_rerank_flags(assemble)
    assemble.set_defaults(run=_cmd_assemble)


def explain_flags(explain: argparse.ArgumentParser) -> None:
    """The flags of ``assembler explain``."""
    explain.add_argument("inputs", nargs="+", metavar="INPUT", help="lane dumps (.jsonl or .parquet; - = stdin)")
    explain.add_argument("--query-id", required=True, help="the query to explain")
    _policy_flag(explain)
    add_budget_flags(explain)
    explain.set_defaults(run=_cmd_explain)


def convert_flags(conv: argparse.ArgumentParser) -> None:
    """The flags of ``assembler convert``."""
    conv.add_argument("inputs", nargs="+", metavar="INPUT", help="lane dumps (.jsonl or .parquet; - = stdin)")
    conv.add_argument("-o", "--output", required=True, help="output file (.parquet/.pq or .jsonl/.ndjson/.json)")
    conv.add_argument("--format", choices=("jsonl", "parquet"), help="output format (default: by OUTPUT's extension)")
    add_errors_flags(conv, DEFAULT_CHUNK_SIZE)
    conv.set_defaults(run=_cmd_convert)
