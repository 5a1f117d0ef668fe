"""Argument types and flag groups shared by the commands (``assemble``, ``evaluate``, ``lanes``, the rerank flags)."""

from __future__ import annotations

import argparse
from collections.abc import Callable

from assembler.errors import UsageError
from assembler.run.io import DEFAULT_MAX_RECORD_BYTES
from assembler.selection import SelectionPolicy, get_policy, load_policy_config

__all__ = [
    "BUDGET_KEYS",
    "add_budget_flags",
    "add_errors_flags",
    "add_on_error_flags",
    "budget_overrides",
    "errors_path",
    "integer_at_least",
    "non_negative_integer",
    "policy_from_flags",
    "positive_integer",
]


def integer_at_least(minimum: int, requirement: str) -> Callable[[str], int]:
    """An argparse type: an integer of at least ``minimum``; a bad value is refused with
    ``"<requirement>, got <value>"`` (each command keeps its own wording)."""

    def convert(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{requirement}, got {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"{requirement}, got {value}")
        return value

    return convert


positive_integer = integer_at_least(1, "must be a positive integer")
non_negative_integer = integer_at_least(0, "must be a non-negative integer")
BUDGET_KEYS = ("max_items", "max_bytes", "max_tokens")


def add_budget_flags(
    parser: argparse.ArgumentParser,
    title: str = "budget overrides (replace every request's budget, then ceilings apply)",
    *,
    value_type: Callable[[str], int] = non_negative_integer,
    action: type[argparse.Action] | None = None,
) -> None:
    """``--max-items/--max-bytes/--max-tokens`` in an argument group of their own."""
    group = parser.add_argument_group(title)
    extra = {} if action is None else {"action": action}
    for key in BUDGET_KEYS:
        flag = "--" + key.replace("_", "-")
        what = key.removeprefix("max_")
        estimate = " (estimated: one per non-ASCII character, one per 4 ASCII ones)" if what == "tokens" else ""
        help_text = f"at most N {what} per package{estimate}"
        group.add_argument(flag, type=value_type, metavar="N", dest=key, help=help_text, **extra)  # type: ignore[arg-type]


def budget_overrides(args: argparse.Namespace) -> dict[str, int]:
    """The budget flags given, as ``overrides`` for the Python API."""
    return {key: getattr(args, key) for key in BUDGET_KEYS if getattr(args, key, None) is not None}


def add_on_error_flags(parser: argparse.ArgumentParser, unit: str = "record") -> None:
    """``--on-error`` and ``--errors`` (read by :func:`errors_path`): stop at the first bad
    ``unit`` (a record, a line of a run), or skip it into the errors file."""
    parser.add_argument(
        "--on-error",
        choices=("stop", "skip"),
        default="stop",
        help=f"stop at the first bad {unit} (default), or skip it into the errors file",
    )
    parser.add_argument(
        "--errors",
        metavar="FILE",
        help="errors file for --on-error skip (default: OUT.errors.jsonl; required with -o -)",
    )


def add_errors_flags(parser: argparse.ArgumentParser, chunk_default: int) -> None:
    """``--on-error``, ``--errors``, ``--chunk-size`` and ``--max-record-bytes``: the streaming
    commands' error discipline."""
    add_on_error_flags(parser)
    parser.add_argument(
        "--chunk-size",
        type=positive_integer,
        default=chunk_default,
        metavar="N",
        help=f"records per batch (default {chunk_default}; memory is bounded by it)",
    )
    parser.add_argument(
        "--max-record-bytes",
        type=positive_integer,
        default=DEFAULT_MAX_RECORD_BYTES,
        metavar="N",
        help=f"a record (a JSON line, or a Parquet row decoded) of more than N bytes is a record error "
        f"(default {DEFAULT_MAX_RECORD_BYTES:,}: 64 MiB)",
    )


def errors_path(args: argparse.Namespace) -> str | None:
    """Where ``--on-error skip`` writes rejected records: ``--errors``, else ``OUT.errors.jsonl``.
    Standard output has no name to put ``.errors.jsonl`` after: with ``-o -``, ``--errors`` is
    required (a file in the working folder nobody asked for would be a surprise)."""
    if args.on_error != "skip":
        return None
    if args.errors:
        return str(args.errors)
    if args.output == "-":
        raise UsageError(
            "--on-error skip with -o - (standard output) needs --errors FILE: the default errors file "
            "is OUT.errors.jsonl, and standard output has no name"
        )
    return f"{args.output}.errors.jsonl"


def policy_from_flags(policy: str | None, policy_config: str | None) -> SelectionPolicy:
    """``--policy`` (default contract), or the tuned quality setting of ``--policy-config``, which
    tunes ``quality`` only."""
    if policy_config is None:
        return get_policy(policy or "contract")
    if policy not in (None, "quality"):
        raise UsageError(
            f"--policy-config tunes the quality policy: give --policy quality or leave --policy out, not {policy!r}"
        )
    return load_policy_config(policy_config)
