"""Environment variables a run sets for itself and the processes it starts (stdlib only: the
command line uses it before Polars loads)."""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager

__all__ = ["environment_defaults"]


@contextmanager
def environment_defaults(values: Mapping[str, str]) -> Iterator[None]:
    """Set each of ``values`` that the environment does not set already; on exit, remove the ones
    set here, so that a caller's process gets its environment back.

    >>> import os
    >>> with environment_defaults({"ASSEMBLER_DOCTEST": "1"}):
    ...     os.environ["ASSEMBLER_DOCTEST"]
    '1'
    >>> "ASSEMBLER_DOCTEST" in os.environ
    False
    """
    added = [name for name in values if name not in os.environ]
    os.environ.update({name: values[name] for name in added})
    try:
        yield
    finally:
        for name in added:
            os.environ.pop(name, None)
