"""The package's layout as a contract: no import circles, lower floors never import higher ones,
and every public package says what it exports."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "assembler"

# Each folder may import only from itself and from the folders listed (``errors`` is the floor);
# the same order as README's "Layout" map. The command line (``cli``) may import anything.
_BELOW_RUN = {"errors", "contract", "stages", "selection", "assess", "pipeline"}
ALLOWED = {
    "errors": set(),
    "contract": {"errors"},
    "stages": {"errors", "contract"},
    "selection": {"errors", "contract", "stages"},
    "assess": {"errors", "contract", "stages"},
    "pipeline": {"errors", "contract", "stages", "selection"},
    "run": _BELOW_RUN,
    "rerank": {"errors", "contract", "stages", "run"},
    "retrieval": {"errors", "contract", "stages", "run"},
    "analysis": _BELOW_RUN | {"run"},
    "evaluate": _BELOW_RUN | {"run"},
    # Records from Python retrievers' results (the lanes build's fusion rule), packages back to them.
    "adapters": {"errors", "contract", "stages", "retrieval"},
}
NOBODY_IMPORTS = {"cli"}  # the top floor: only ``assembler.__main__`` imports it


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports_of(path: Path, modules: set[str]) -> set[str]:
    """The package modules ``path`` imports, lazy imports included: ``from X import Y`` counts as
    ``X.Y`` where that is a submodule and as ``X`` otherwise."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                submodule = f"{node.module}.{alias.name}"
                found.add(submodule if submodule in modules else node.module)
    return found & modules


def import_graph() -> dict[str, set[str]]:
    paths = {module_name(path): path for path in PACKAGE.rglob("*.py")}
    modules = set(paths)
    return {name: imports_of(path, modules) - {name} for name, path in paths.items()}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every strongly connected component of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for target in sorted(graph[node]):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def folder(module: str) -> str:
    return module.split(".")[1] if module.count(".") else ""


def test_the_package_has_no_import_circle() -> None:
    assert cycles(import_graph()) == []


def test_the_cycle_finder_finds_a_circle() -> None:
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_lower_floors_never_import_higher_ones() -> None:
    wrong = [
        (source, target)
        for source, targets in import_graph().items()
        for target in targets
        if folder(source) in ALLOWED and folder(target) not in ALLOWED[folder(source)] | {folder(source)}
    ]
    assert wrong == []


def test_only_the_entry_point_imports_the_command_line() -> None:
    wrong = [
        (source, target)
        for source, targets in import_graph().items()
        for target in targets
        if folder(target) in NOBODY_IMPORTS and folder(source) not in NOBODY_IMPORTS and source != "assembler.__main__"
    ]
    assert wrong == []


PUBLIC_PACKAGES = ["assembler", "assembler.selection", "assembler.analysis", "assembler.assess", "assembler.evaluate"]


@pytest.mark.parametrize("name", PUBLIC_PACKAGES)
def test_every_public_name_is_exported_and_every_export_exists(name: str) -> None:
    """As httpx checks: what a package's namespace offers is exactly its ``__all__`` (plus its
    submodules and ``__version__``), and every name in ``__all__`` resolves."""
    package = importlib.import_module(name)
    exported = set(package.__all__)
    assert all(hasattr(package, item) for item in exported)
    offered = {
        item
        for item, value in vars(package).items()
        if not item.startswith("_") and not (hasattr(value, "__spec__") and type(value).__name__ == "module")
    }
    assert offered - {"annotations"} == exported
