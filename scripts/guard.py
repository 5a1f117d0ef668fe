"""What every data builder does before writing: refuse when its inputs are missing, and never
replace committed data with less (fewer records or fewer bytes) unless told to."""

from __future__ import annotations

import sys
from collections.abc import Iterable
from pathlib import Path

__all__ = ["require_inputs", "write_lines"]


def require_inputs(script: str, paths: Iterable[Path], hint: str) -> None:
    """Exit with status 2 and one line if any input is missing or an input folder is empty."""
    for path in paths:
        if not path.exists() or (path.is_dir() and not any(path.iterdir())):
            _refuse(f"{script}: error: missing input {path} ({hint}); nothing was written")


def write_lines(script: str, path: Path, lines: list[str], *, force: bool = False) -> None:
    """Write ``lines`` as JSON Lines; refuse (exit 2) to replace a file holding more lines or bytes."""
    text = "\n".join(lines) + "\n"
    if path.exists() and not force:
        old = path.read_text(encoding="utf-8")
        if len(lines) < len(old.splitlines()) or len(text.encode()) < len(old.encode()):
            _refuse(
                f"{script}: error: {path} would shrink from {len(old.splitlines())} lines / {len(old.encode())} bytes "
                f"to {len(lines)} / {len(text.encode())}; nothing was written (--force replaces it)"
            )
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def _refuse(message: str) -> None:
    print(message, file=sys.stderr)
    sys.exit(2)
