"""Environment defaults a run sets for itself and the processes it starts."""

from __future__ import annotations

import os

import pytest

from assembler.run.environment import environment_defaults


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
