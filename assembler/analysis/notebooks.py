"""Run the notebooks of ``notebooks/`` top to bottom (needs the ``notebooks`` extra).

``python -m assembler.analysis.notebooks`` executes each notebook in memory and prints its time
(what the tests do); ``--execute`` also writes the outputs, figures included, into the files;
``--clear`` strips outputs again (notebooks are committed without them). Notebooks run with
their own folder as the working directory.
"""

from __future__ import annotations

import argparse
import importlib
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from assembler.errors import install_hint

__all__ = ["clear_outputs", "main", "notebook_paths", "run_notebook"]

DEFAULT_DIR = Path("notebooks")


def notebook_paths(paths: Sequence[str | Path] = ()) -> list[Path]:
    """The given notebooks, or every ``*.ipynb`` of ``notebooks/`` in name order."""
    if paths:
        return [Path(p) for p in paths]
    return sorted(DEFAULT_DIR.glob("*.ipynb"))


def _module(name: str) -> Any:
    try:
        return importlib.import_module(name)
    except ImportError:
        raise ImportError(f"running notebooks needs {name}: {install_hint('notebooks')}") from None


def run_notebook(path: str | Path, *, timeout: int = 300) -> tuple[Any, float]:
    """Execute one notebook; return ``(notebook with outputs, seconds)``. A failing cell raises."""
    nbformat, nbclient = _module("nbformat"), _module("nbclient")
    path = Path(path)
    notebook = nbformat.read(path, as_version=4)
    client = nbclient.NotebookClient(
        notebook,
        timeout=timeout,
        kernel_name="python3",
        resources={"metadata": {"path": str(path.parent)}},
        # The kernel listens on loopback only; its warning about unencrypted TCP is noise here.
        extra_arguments=["--IPKernelApp.log_level=ERROR"],
    )
    start = time.perf_counter()
    client.execute()
    return notebook, time.perf_counter() - start


def clear_outputs(notebook: Any) -> Any:
    """Drop outputs, execution counts and execution metadata of every code cell, and what a run
    adds to the notebook's ``language_info`` (in place): ``--execute`` then ``--clear`` gives the
    committed file back."""
    for cell in notebook.cells:
        if cell.cell_type == "code":
            cell.outputs = []
            cell.execution_count = None
            cell.metadata.pop("execution", None)
    notebook.metadata.pop("widgets", None)
    if "language_info" in notebook.metadata:
        notebook.metadata["language_info"] = {"name": notebook.metadata["language_info"].get("name", "python")}
    return notebook


def main(argv: Sequence[str] | None = None) -> int:
    """Command line: run, ``--execute`` (write outputs) or ``--clear`` the notebooks."""
    parser = argparse.ArgumentParser(prog="python -m assembler.analysis.notebooks", description=__doc__)
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--execute", action="store_true", help="write the outputs into the notebooks")
    mode.add_argument("--clear", action="store_true", help="strip outputs (for commit)")
    parser.add_argument("--timeout", type=int, default=300, help="seconds per cell (default 300)")
    parser.add_argument("notebooks", nargs="*", help="default: notebooks/*.ipynb")
    args = parser.parse_args(argv)
    try:
        return _run(args)
    except ImportError as exc:
        print(f"assembler: error: {exc}", file=sys.stderr)
        return 2


def _run(args: argparse.Namespace) -> int:
    paths = notebook_paths(args.notebooks)
    if not paths:
        print(f"no notebooks found under {DEFAULT_DIR}/", file=sys.stderr)
        return 2
    nbformat = _module("nbformat")
    for path in paths:
        if args.clear:
            nbformat.write(clear_outputs(nbformat.read(path, as_version=4)), path)
            print(f"cleared {path}")
            continue
        notebook, seconds = run_notebook(path, timeout=args.timeout)
        if args.execute:
            nbformat.write(notebook, path)
        print(f"{path}: ran in {seconds:.1f} s{' (outputs written)' if args.execute else ''}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
