"""Every shell and Python example in README.md and docs/ is run, or says why it is not.

A fenced block in ``sh``, ``console`` or ``python`` is an example. It runs in a fresh folder where
``data/``, ``docs/``, ``scripts/`` and ``benchmarks/`` of this checkout are linked, so the paths the
docs use resolve and nothing is written into the checkout:

* ``python`` with ``>>>`` lines is a doctest (its output must match); other ``python`` is run as a
  script and must not raise.
* ``console`` (and ``sh`` with ``$ `` lines): each ``$ `` line is a command run by bash (``\\``
  continues it); the lines after it, up to the next ``$ ``, are its output: each shown line must
  appear in what the command printed (stdout then stderr), in order; a line ``...`` stands for
  anything. The command must exit 0 unless the shown output says ``(exit N)`` on a line of its own.
* ``sh``: the whole block runs as one bash script (``set -e``) and must exit 0.

Install commands (``python -m pip install ... &&``, ``pip install ...``) are taken out of the
lines: the test environment has every extra installed. A block that cannot run here (it needs a cluster, a live
service, an hour, or a file of the reader's own) is preceded by ``<!-- not run: REASON -->`` on the
line before its opening fence; the reason may not be empty.
"""

from __future__ import annotations

import doctest
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
HISTORY = {"performance-history.md"}
"""Pages of record: their commands ran at the commits they name, and are not run again."""
PAGES = sorted([ROOT / "README.md", *(page for page in (ROOT / "docs").glob("*.md") if page.name not in HISTORY)])
LANGUAGES = {"sh", "console", "python"}
LINKED = ("data", "docs", "scripts", "benchmarks", "notebooks")
_FENCE = re.compile(r"^```([A-Za-z0-9_-]*)\s*$")
_NOT_RUN = re.compile(r"^<!--\s*not run:\s*(.*?)\s*-->\s*$")
_INSTALL = re.compile(r"^\s*(python3? -m )?pip install [^&]*(&&\s*)?")
_EXIT = re.compile(r"^\(exit (\d+)\)$")
TIMEOUT = 300


@dataclass(frozen=True)
class Example:
    page: str
    line: int
    language: str
    text: str
    not_run: str | None

    @property
    def name(self) -> str:
        return f"{self.page}:{self.line}"


def examples(path: Path) -> list[Example]:
    """The example blocks of one Markdown page, with the reason it is not run where it says so."""
    found: list[Example] = []
    lines = path.read_text(encoding="utf-8").splitlines()
    start: int | None = None
    language = ""
    body: list[str] = []
    for number, line in enumerate(lines, start=1):
        fence = _FENCE.match(line)
        if start is None and fence:
            start, language, body = number, fence.group(1), []
        elif start is not None and line.strip() == "```":
            if language in LANGUAGES:
                marker = _NOT_RUN.match(lines[start - 2]) if start >= 2 else None
                reason = marker.group(1) if marker else None
                found.append(Example(path.relative_to(ROOT).as_posix(), start, language, "\n".join(body), reason))
            start = None
        elif start is not None:
            body.append(line)
    return found


ALL = [example for page in PAGES for example in examples(page)]


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    for name in LINKED:
        if (ROOT / name).exists():
            (tmp_path / name).symlink_to(ROOT / name)
    return tmp_path


def _environment() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    env.setdefault("COLUMNS", "100")
    return env


def _bash(script: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", "-c", script],
        cwd=cwd,
        env=_environment(),
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        stdin=subprocess.DEVNULL,
    )


def _without_installs(lines: list[str]) -> list[str]:
    """The lines with their install commands taken out (``pip install X && cmd`` keeps ``cmd``)."""
    kept = [_INSTALL.sub("", line, count=1) for line in lines]
    return [line for line in kept if line.strip()]


def _console_steps(text: str) -> list[tuple[str, list[str]]]:
    """``(command, shown output)`` for each ``$ `` line of a console block."""
    steps: list[tuple[list[str], list[str]]] = []
    for line in text.splitlines():
        if line.startswith("$ "):
            steps.append(([line[2:]], []))
        elif steps and steps[-1][0][-1].endswith("\\") and not steps[-1][1]:
            steps[-1][0].append(line)
        elif steps:
            steps[-1][1].append(line)
    return [("\n".join(command), shown) for command, shown in steps]


def _shown_in(shown: list[str], printed: list[str]) -> str | None:
    """Where ``shown`` is not a subsequence of ``printed`` (``...`` matching anything), or None."""
    position = 0
    for line in shown:
        if line.strip() in ("", "...") or _EXIT.match(line.strip()):
            continue
        while position < len(printed) and printed[position].rstrip() != line.rstrip():
            position += 1
        if position == len(printed):
            return line
        position += 1
    return None


def _run_console(example: Example, cwd: Path) -> None:
    for command, shown in _console_steps(example.text):
        command = "\n".join(_without_installs(command.splitlines()))
        if not command:
            continue
        done = _bash(command, cwd)
        statuses = [int(m.group(1)) for line in shown if (m := _EXIT.match(line.strip()))]
        expected = statuses[0] if statuses else 0
        printed = (done.stdout + done.stderr).splitlines()
        assert done.returncode == expected, (
            f"{example.name}: `{command}` exited {done.returncode}, not {expected}:\n{done.stderr[-2000:]}"
        )
        missing = _shown_in(shown, printed)
        assert missing is None, f"{example.name}: `{command}` did not print {missing!r}; it printed:\n" + "\n".join(
            printed[:60]
        )


def _run_python(example: Example, cwd: Path) -> None:
    if ">>>" in example.text:
        test = doctest.DocTestParser().get_doctest(example.text, {}, example.name, example.page, example.line)
        runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
        previous = Path.cwd()
        os.chdir(cwd)
        try:
            result = runner.run(test, out=lambda text: None)
        finally:
            os.chdir(previous)
        if result.failed:  # run again to show the failure
            report: list[str] = []
            os.chdir(cwd)
            try:
                doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE).run(
                    test, out=report.append
                )
            finally:
                os.chdir(previous)
            pytest.fail(f"{example.name}: doctest failed\n" + "".join(report))
        return
    script = cwd / "example.py"
    script.write_text(example.text, encoding="utf-8")
    done = subprocess.run(
        [sys.executable, str(script)], cwd=cwd, env=_environment(), capture_output=True, text=True, timeout=TIMEOUT
    )
    assert done.returncode == 0, f"{example.name}: the Python example failed:\n{done.stderr[-3000:]}"


@pytest.mark.parametrize("example", [e for e in ALL if e.not_run is None], ids=lambda e: e.name)
def test_doc_example_runs(example: Example, workdir: Path) -> None:
    if example.language == "python":
        _run_python(example, workdir)
    elif example.language == "console" or any(line.startswith("$ ") for line in example.text.splitlines()):
        _run_console(example, workdir)
    else:
        script = "\n".join(_without_installs(example.text.splitlines()))
        done = _bash("set -euo pipefail\n" + script, workdir)
        assert done.returncode == 0, f"{example.name}: the shell example failed:\n{done.stderr[-3000:]}"


@pytest.mark.parametrize("example", [e for e in ALL if e.not_run is not None], ids=lambda e: e.name)
def test_an_example_not_run_says_why(example: Example) -> None:
    assert example.not_run, f"{example.name}: '<!-- not run: -->' needs a reason"


def test_examples_are_found() -> None:
    assert any(e.page == "README.md" and e.not_run is None for e in ALL)
    assert _shown_in(["a", "...", "c"], ["a", "b", "c"]) is None
    assert _shown_in(["c", "a"], ["a", "b", "c"]) == "a"
