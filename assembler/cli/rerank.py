"""The reranker's command-line flags for ``assembler assemble`` (importable without the ``rerank`` extra).

Flags override the ``TAGURU_RERANK_*`` environment variables field by field. The API key is only
ever read from an environment variable (``--rerank-key-env NAME``, default
``TAGURU_RERANK_API_KEY``); no message ever repeats that name's value or the key. A URL or a key
no request could be sent with (:func:`~assembler.rerank.config.url_problem`,
:func:`~assembler.rerank.config.key_problem`) is a usage error naming the flag or the variable.
"""

from __future__ import annotations

import argparse
import logging
import math
import os
from collections.abc import Mapping
from typing import TYPE_CHECKING

from assembler.cli import messages
from assembler.cli.args import positive_integer
from assembler.errors import UsageError, install_hint, shown
from assembler.rerank.config import (
    ENV_API_KEY,
    ENV_MODEL,
    ENV_TIMEOUT,
    ENV_URL,
    RerankConfig,
    has_userinfo,
    key_problem,
    parse_timeout_secs,
    url_problem,
)

if TYPE_CHECKING:
    from assembler.rerank.reranker import ProviderReranker

__all__ = ["add_rerank_flags", "finish_rerank", "reranker_from_args", "write_rerank_metrics"]


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number of seconds, got {text!r}") from None
    if not (value > 0 and math.isfinite(value)):
        raise argparse.ArgumentTypeError(f"must be a positive number of seconds, got {text!r}")
    return value


_WARNING_PREFIX = "assembler: warning: "


class _StderrWarnings(logging.Handler):
    """The reranker's log warnings as ``assembler: warning: ...`` lines on the current ``sys.stderr``
    (one bounded line each, control characters escaped: :mod:`assembler.cli.messages`)."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            messages.warning(record.getMessage(), _WARNING_PREFIX)
        except Exception:  # a closed stderr must not end the run
            self.handleError(record)


def _show_rerank_warnings() -> None:
    """Print the ``assembler.rerank`` logger's warnings the command's way (installed once per process)."""
    logger = logging.getLogger("assembler.rerank")
    if not any(isinstance(handler, _StderrWarnings) for handler in logger.handlers):
        logger.addHandler(_StderrWarnings(logging.WARNING))


def add_rerank_flags(parser: argparse.ArgumentParser) -> None:
    """Add the ``--rerank-*`` and ``--metrics-out`` flags."""
    group = parser.add_argument_group(
        "reranker (contract section 11; each flag defaults to its TAGURU_RERANK_* environment variable)"
    )
    group.add_argument("--rerank-url", metavar="URL", help="the /rerank endpoint, used exactly as given")
    group.add_argument("--rerank-model", metavar="MODEL", help="the model identity sent and reported")
    group.add_argument(
        "--rerank-key-env",
        metavar="NAME",
        help=f"the environment variable holding the API key (default {ENV_API_KEY}); never the key itself",
    )
    group.add_argument("--rerank-timeout", type=_seconds, metavar="SECS", help="per-attempt timeout (default 5)")
    group.add_argument(
        "--rerank-deadline",
        type=_seconds,
        metavar="SECS",
        help="each query's deadline for the reranker, retry included (default: the timeout)",
    )
    group.add_argument(
        "--rerank-concurrency",
        type=positive_integer,
        default=8,
        metavar="N",
        help="queries reranked at once (default 8)",
    )
    group.add_argument("--metrics-out", metavar="FILE", help="write the reranker's Prometheus metrics at the end")


def reranker_from_args(args: argparse.Namespace, environ: Mapping[str, str] | None = None) -> ProviderReranker | None:
    """The reranker the flags and the environment configure, or None (raise ``UsageError`` if inconsistent)."""
    env = os.environ if environ is None else environ
    _show_rerank_warnings()
    if args.rerank_key_env is not None and args.rerank_key_env not in env:
        raise UsageError(
            "--rerank-key-env: no environment variable of that name is set "
            "(give the NAME of the variable that holds the key, never the key)"
        )
    if args.metrics_out == "-" and getattr(args, "output", None) == "-":
        raise UsageError("--metrics-out - would mix metrics into the packages on standard output; give a FILE")
    url = args.rerank_url if args.rerank_url is not None else env.get(ENV_URL)
    model = args.rerank_model if args.rerank_model is not None else env.get(ENV_MODEL)
    if url is None or model is None:
        if args.rerank_url is not None or args.rerank_model is not None:
            raise UsageError(f"--rerank-url and --rerank-model go together (or set {ENV_URL} and {ENV_MODEL})")
        RerankConfig.from_env(env)  # warns when only one of the two variables is set
        if args.metrics_out is not None:
            raise UsageError(f"--metrics-out needs a reranker (--rerank-url/--rerank-model or {ENV_URL}/{ENV_MODEL})")
        return None
    source = "--rerank-url" if args.rerank_url is not None else ENV_URL
    if has_userinfo(url):
        raise UsageError(
            f"{source}: must not carry userinfo (user:password@ before the host), which would replace the key; "
            f"put the key in the variable --rerank-key-env names (default {ENV_API_KEY})"
        )
    problem = url_problem(url)
    if problem is not None:
        raise UsageError(f"{source}: {problem}; no request could be sent")
    key = env.get(args.rerank_key_env or ENV_API_KEY)
    if key is not None and (problem := key_problem(key)) is not None:
        holder = ENV_API_KEY if args.rerank_key_env is None else f"--rerank-key-env {shown(args.rerank_key_env)}"
        raise UsageError(f"{holder}: the key {problem}; no request could be sent")
    timeout = args.rerank_timeout if args.rerank_timeout is not None else parse_timeout_secs(env.get(ENV_TIMEOUT))
    config = RerankConfig(url=url, model=model, api_key=key, timeout_secs=timeout)
    try:
        from assembler.rerank.reranker import build_reranker
    except ImportError:
        raise UsageError(f"the reranker needs httpx and prometheus_client: {install_hint('rerank')}") from None
    return build_reranker(config, concurrency=args.rerank_concurrency, deadline_secs=args.rerank_deadline)


def write_rerank_metrics(args: argparse.Namespace, reranker: ProviderReranker | None) -> None:
    """At the end of the run, before its outputs land: write ``--metrics-out`` (within the
    command's ``commit_together`` block, so that it lands with the packages or none does)."""
    if reranker is not None and args.metrics_out is not None:
        reranker.metrics.write(args.metrics_out)


def finish_rerank(args: argparse.Namespace, reranker: ProviderReranker | None, *, quiet: bool) -> None:
    """After a successful run (its outputs written): print the reranker's summary line."""
    if reranker is None:
        return
    if not quiet:
        messages.lines([reranker.summary_line()])
