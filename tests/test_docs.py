"""The documentation stands alone: its links stay inside the repository, and its examples are real.

* Every relative link in README.md and docs/*.md points at a file or folder of this repository
  (no ``../shared/``, nothing outside the tree); absolute web links are not checked.
* In docs/contract.md and docs/package.md, a ```` ```json ```` block that directly follows a
  ```` ```jsonl ```` block (only prose between them) is a checked example: the jsonl block holds one
  lane-dump record, which is assembled; the json block shows part of the resulting package. Every
  key it shows must be in the package, in the package's order, with the same value; lists must
  have the same length; numbers must be written exactly as on the wire (``0.00001``, not
  ``1e-05``). Keys may be left out, so a section can show only what it is about.
"""

from __future__ import annotations

import itertools
import json
import re
from pathlib import Path
from typing import Any

import pytest

from assembler import assemble

ROOT = Path(__file__).resolve().parent.parent
DOCS = sorted([ROOT / "README.md", *(ROOT / "docs").glob("*.md")])
CHECKED = [ROOT / "docs" / "contract.md", ROOT / "docs" / "package.md"]

_LINK = re.compile(r"\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
_FENCE = re.compile(r"^```([A-Za-z0-9_-]*)\s*$")


class Number(str):
    """A JSON number kept as the text it was written with."""


def _parse(text: str) -> Any:
    return json.loads(text, parse_float=Number, parse_int=Number, object_pairs_hook=list)


def _links(path: Path) -> list[tuple[int, str]]:
    found: list[tuple[int, str]] = []
    in_code = False
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if _FENCE.match(line):
            in_code = not in_code
            continue
        if in_code:
            continue
        found.extend((number, target) for target in _LINK.findall(re.sub(r"`[^`]*`", "", line)))
    return found


def _blocks(path: Path) -> list[tuple[int, str, str]]:
    """Fenced blocks of a markdown file: ``(first line number, language, text)``."""
    blocks: list[tuple[int, str, str]] = []
    lines = path.read_text(encoding="utf-8").splitlines()
    start = None
    language = ""
    body: list[str] = []
    for number, line in enumerate(lines, start=1):
        fence = _FENCE.match(line)
        if start is None and fence:
            start, language, body = number, fence.group(1), []
        elif start is not None and line.strip() == "```":
            blocks.append((start, language, "\n".join(body)))
            start = None
        elif start is not None:
            body.append(line)
    return blocks


def _examples(path: Path) -> list[tuple[str, str, str]]:
    """``(where, lane-dump line, shown package)`` for each checked example of a file."""
    blocks = _blocks(path)
    return [
        (f"{path.name}:{shown_line}", dump, shown)
        for (_, dump_lang, dump), (shown_line, shown_lang, shown) in itertools.pairwise(blocks)
        if dump_lang == "jsonl" and shown_lang == "json"
    ]


def _covers(shown: Any, actual: Any, where: str) -> None:
    """``shown`` is ``actual`` with some object keys left out (keys in order, everything else equal)."""
    if isinstance(shown, list) and shown and isinstance(shown[0], tuple):  # an object (list of pairs)
        assert isinstance(actual, list) and all(isinstance(pair, tuple) for pair in actual), f"{where}: not an object"
        keys = [key for key, _ in actual]
        position = 0
        for key, value in shown:
            assert key in keys[position:], f"{where}: key {key!r} is not in the package (or out of order)"
            position = keys.index(key, position)
            _covers(value, actual[position][1], f"{where}.{key}")
            position += 1
        return
    if isinstance(shown, list):
        assert isinstance(actual, list), f"{where}: expected a list"
        if actual and isinstance(actual[0], tuple):  # a non-empty object shown as {}
            raise AssertionError(f"{where}: an object is shown empty")
        assert len(shown) == len(actual), f"{where}: {len(shown)} elements shown, the package has {len(actual)}"
        for index, (item, real) in enumerate(zip(shown, actual, strict=True)):
            _covers(item, real, f"{where}[{index}]")
        return
    assert type(shown) is type(actual) and shown == actual, f"{where}: shown {shown!r}, the package has {actual!r}"


@pytest.mark.parametrize("path", DOCS, ids=lambda p: p.name)
def test_doc_links_stay_in_the_repository_and_exist(path: Path) -> None:
    for line, target in _links(path):
        if re.match(r"^[a-z]+:", target) or target.startswith("#"):
            continue  # a web link or an anchor in the same file
        relative = target.split("#", 1)[0]
        resolved = (path.parent / relative).resolve()
        assert resolved.is_relative_to(ROOT), f"{path.name}:{line}: {target} leaves the repository"
        assert resolved.exists(), f"{path.name}:{line}: {target} does not exist"


@pytest.mark.parametrize("path", DOCS, ids=lambda p: p.name)
def test_docs_do_not_point_at_the_shared_folder(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    assert "../shared" not in text, f"{path.name} names ../shared, which a clone or a wheel does not have"


def test_docs_have_checked_examples() -> None:
    counts = {path.name: len(_examples(path)) for path in CHECKED}
    assert counts["contract.md"] >= 10, counts
    assert counts["package.md"] >= 1, counts


@pytest.mark.parametrize(
    ("where", "dump", "shown"),
    [example for path in CHECKED if path.exists() for example in _examples(path)],
    ids=lambda value: value if isinstance(value, str) and ":" in value and "{" not in value else "",
)
def test_doc_example_is_the_assembled_package(where: str, dump: str, shown: str) -> None:
    lines = [line for line in dump.splitlines() if line.strip()]
    assert len(lines) == 1, f"{where}: a checked lane dump holds exactly one record"
    package = assemble(json.loads(lines[0]))
    _covers(_parse(shown), _parse(package), where)


def test_covers_rejects_a_wrong_number_text() -> None:
    with pytest.raises(AssertionError):
        _covers(_parse('{"weight": 1e-05}'), _parse('{"weight":0.00001}'), "x")
    with pytest.raises(AssertionError):
        _covers(_parse('{"b": 1, "a": 2}'), _parse('{"a":2,"b":1}'), "x")
    _covers(_parse('{"b": 1}'), _parse('{"a":2,"b":1}'), "x")
