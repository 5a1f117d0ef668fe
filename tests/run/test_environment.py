"""Environment defaults a run sets for itself and the processes it starts."""

from __future__ import annotations

import gc
import os
import subprocess
import sys
from pathlib import Path

import pytest

from assembler.run.environment import environment_defaults, frozen_once_loaded

SAMPLE = Path(__file__).resolve().parent.parent.parent / "data" / "sample" / "lanes.jsonl"


def test_a_value_already_set_is_kept_and_left_in_place(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ASSEMBLER_TEST_GIVEN", "mine")
    monkeypatch.delenv("ASSEMBLER_TEST_ADDED", raising=False)
    with environment_defaults({"ASSEMBLER_TEST_GIVEN": "1", "ASSEMBLER_TEST_ADDED": "1"}):
        assert os.environ["ASSEMBLER_TEST_GIVEN"] == "mine"
        assert os.environ["ASSEMBLER_TEST_ADDED"] == "1"
    assert os.environ["ASSEMBLER_TEST_GIVEN"] == "mine"
    assert "ASSEMBLER_TEST_ADDED" not in os.environ


def test_the_defaults_are_removed_when_the_body_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ASSEMBLER_TEST_ADDED", raising=False)
    with pytest.raises(KeyboardInterrupt), environment_defaults({"ASSEMBLER_TEST_ADDED": "1"}):
        raise KeyboardInterrupt
    assert "ASSEMBLER_TEST_ADDED" not in os.environ


def test_what_loads_is_frozen_and_the_collector_resumes_even_after_a_failure() -> None:
    assert gc.isenabled()
    try:
        with pytest.raises(ImportError), frozen_once_loaded():
            assert not gc.isenabled()
            made = [[] for _ in range(1000)]
            raise ImportError("a library that fails to load")
        assert gc.isenabled() and gc.get_freeze_count() >= len(made)
    finally:
        gc.unfreeze()


def test_a_collector_the_caller_disabled_stays_disabled() -> None:
    gc.disable()
    try:
        with frozen_once_loaded():
            pass
        assert not gc.isenabled()
    finally:
        gc.unfreeze()
        gc.enable()


@pytest.mark.parametrize("own_process", [True, False])
def test_only_the_executable_freezes_what_the_command_loaded(tmp_path: Path, own_process: bool) -> None:
    """The executable (``own_process``) freezes the libraries it loads; the Python API leaves the
    caller's collector alone."""
    code = (
        "import gc, sys; from assembler.cli import main; "
        f"status = main(['assemble', sys.argv[1], '-o', sys.argv[2], '-q'], own_process={own_process}); "
        "print(status, gc.isenabled(), gc.get_freeze_count() > 0)"
    )
    shown = subprocess.run(
        [sys.executable, "-c", code, str(SAMPLE), str(tmp_path / "out.jsonl")],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    assert shown == ["0", "True", str(own_process)]
