"""Signals held while a chunk is assembled (assembler/run/signals.py)."""

from __future__ import annotations

import os
import signal
import threading
import time

import pytest

from assembler.run.signals import TERMINAL, held_signals


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_during_the_block_is_delivered_after_it(signum: int) -> None:
    delivered: list[int] = []

    def record(number: int, frame: object) -> None:
        delivered.append(number)

    previous = signal.signal(signum, record)
    try:
        with held_signals():
            os.kill(os.getpid(), signum)
            time.sleep(0.05)  # a handler in place would have run by now
            assert delivered == []
        time.sleep(0.05)
        assert delivered == [signum]
        assert signal.getsignal(signum) is record  # the handler in place before is back
    finally:
        signal.signal(signum, previous)


def test_ctrl_c_held_in_the_block_raises_after_it() -> None:
    finished = []
    with pytest.raises(KeyboardInterrupt):
        with held_signals():
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(0.05)
            finished.append(True)
        time.sleep(0.05)
    assert finished == [True]


def test_outside_the_main_thread_nothing_changes() -> None:
    handlers = []

    def run() -> None:
        with held_signals():
            handlers.append(signal.getsignal(signal.SIGINT))

    thread = threading.Thread(target=run)
    thread.start()
    thread.join()
    assert handlers == [signal.getsignal(signal.SIGINT)]


def test_ignore_interrupt_ignores_ctrl_c_and_still_holds_sigterm() -> None:
    """The window where a worker process is started: a Ctrl-C is ignored (the new process inherits
    that), a SIGTERM is delivered after it."""
    delivered: list[int] = []

    def record(number: int, frame: object) -> None:
        delivered.append(number)

    previous = {signum: signal.signal(signum, record) for signum in (signal.SIGINT, signal.SIGTERM)}
    try:
        with held_signals(ignore_interrupt=True):
            assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
            os.kill(os.getpid(), signal.SIGINT)
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(0.05)
            assert delivered == []
        time.sleep(0.05)
        assert delivered == [signal.SIGTERM]
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


@pytest.mark.parametrize("signum", [signal.SIGHUP, signal.SIGQUIT])
def test_a_hang_up_or_quit_during_the_block_is_delivered_after_it(signum: int) -> None:
    delivered: list[int] = []

    def record(number: int, frame: object) -> None:
        delivered.append(number)

    previous = signal.signal(signum, record)
    try:
        with held_signals():
            os.kill(os.getpid(), signum)
            time.sleep(0.05)
            assert delivered == []
        time.sleep(0.05)
        assert delivered == [signum]
    finally:
        signal.signal(signum, previous)


def test_ignore_interrupt_ignores_the_terminals_signals() -> None:
    """A worker started in the block inherits SIG_IGN for Ctrl-C, a hang-up and Ctrl-\\: the
    command, which gets them too, ends it."""
    with held_signals(ignore_interrupt=True):
        assert [signal.getsignal(signum) for signum in TERMINAL] == [signal.SIG_IGN] * len(TERMINAL)
    assert set(TERMINAL) == {signal.SIGINT, signal.SIGHUP, signal.SIGQUIT}
