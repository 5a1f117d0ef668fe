"""The one rule of when progress bars are drawn."""

from __future__ import annotations

import io
import sys

import pytest

from assembler.run.progress import progress_shown


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        if self.closed:
            raise ValueError("I/O operation on closed file")  # as a real closed stream does
        return True


def test_bars_are_drawn_on_a_terminal_unless_quiet(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "stderr", _Terminal())
    assert progress_shown(quiet=False)
    assert not progress_shown(quiet=True)


def test_no_bar_goes_to_a_file_or_pipe(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "stderr", io.StringIO())
    assert not progress_shown(quiet=False)


def test_a_closed_or_missing_standard_error_draws_no_bar(monkeypatch: pytest.MonkeyPatch) -> None:
    closed = _Terminal()
    closed.close()
    monkeypatch.setattr(sys, "stderr", closed)
    assert not progress_shown(quiet=False)
    monkeypatch.setattr(sys, "stderr", None)
    assert not progress_shown(quiet=False)
