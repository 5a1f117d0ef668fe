"""The notebooks run top to bottom on the committed data and are committed without outputs.

Running them needs the ``notebooks`` extra (nbclient, nbformat, ipykernel, matplotlib); without
it those tests are skipped. The structure checks read the files as plain JSON.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from assembler.analysis import notebooks

ROOT = Path(__file__).resolve().parent.parent.parent
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))


def test_there_are_four_notebooks() -> None:
    assert [path.stem for path in NOTEBOOKS] == [
        "01-fusion",
        "02-budgets",
        "03-near-duplicates",
        "04-diversity-and-contradictions",
    ]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[path.stem for path in NOTEBOOKS])
def test_notebook_is_committed_clean_with_question_and_findings(path: Path) -> None:
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    code = [cell for cell in cells if cell["cell_type"] == "code"]
    assert code and all(cell["outputs"] == [] and cell["execution_count"] is None for cell in code)
    first, last = "".join(cells[0]["source"]), "".join(cells[-1]["source"])
    assert cells[0]["cell_type"] == "markdown" and "**Question:**" in first
    assert cells[-1]["cell_type"] == "markdown" and last.startswith("## Findings (committed data)")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[path.stem for path in NOTEBOOKS])
def test_notebook_runs_top_to_bottom_and_clears_back_to_the_committed_file(path: Path, tmp_path: Path) -> None:
    for module in ("nbclient", "nbformat", "ipykernel", "matplotlib"):
        pytest.importorskip(module)
    import nbformat

    notebook, seconds = notebooks.run_notebook(path, timeout=300)
    errors = [out for cell in notebook.cells for out in cell.get("outputs", []) if out.get("output_type") == "error"]
    assert not errors
    assert seconds > 0
    cleared = tmp_path / path.name  # what `--execute` then `--clear` leaves in the tree
    nbformat.write(notebooks.clear_outputs(notebook), cleared)
    assert cleared.read_bytes() == path.read_bytes()


def test_without_the_extra_the_command_says_so_in_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def missing(name: str) -> None:
        raise ImportError(name)

    monkeypatch.setattr(notebooks.importlib, "import_module", missing)
    assert notebooks.main(["--clear", str(NOTEBOOKS[0])]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "install the 'notebooks' extra" in err


def test_clear_strips_outputs(tmp_path: Path) -> None:
    nbformat = pytest.importorskip("nbformat")
    copy = tmp_path / NOTEBOOKS[0].name
    shutil.copy(NOTEBOOKS[0], copy)
    notebook = nbformat.read(copy, as_version=4)
    notebook.cells[1].outputs = [nbformat.v4.new_output("stream", text="x")]
    notebook.cells[1].execution_count = 3
    nbformat.write(notebook, copy)
    assert notebooks.main(["--clear", str(copy)]) == 0
    assert copy.read_text(encoding="utf-8") == NOTEBOOKS[0].read_text(encoding="utf-8")
