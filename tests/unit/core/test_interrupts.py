"""Ctrl-C held back over steps that must not be cut in two (spotrun/core/interrupts.py), with
real SIGINTs sent to this process; and a Ctrl-C that came while a class was being made (an
import) still known as one (spotrun/core/interrupts.py)."""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator

import pytest

from spotrun.core.interrupts import caused_by_interrupt, interrupts_deferred


@pytest.fixture(autouse=True)
def python_default_sigint() -> Iterator[None]:
    """Each test starts from Python's own SIGINT handler, whatever the test runner's process
    had (a pytest-xdist worker may have its own), and gets the old one back after."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def test_a_sigint_inside_the_block_is_raised_when_it_ends() -> None:
    done = []
    with pytest.raises(KeyboardInterrupt), interrupts_deferred():
        signal.raise_signal(signal.SIGINT)
        done.append("the rest of the block")
    assert done == ["the rest of the block"]
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_no_sigint_no_interrupt_and_an_ignored_sigint_stays_ignored() -> None:
    with interrupts_deferred():
        pass
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        with interrupts_deferred():
            signal.raise_signal(signal.SIGINT)
        assert signal.getsignal(signal.SIGINT) == signal.SIG_IGN
    finally:
        signal.signal(signal.SIGINT, previous)


def test_an_error_inside_the_block_goes_on_and_the_handler_comes_back() -> None:
    with pytest.raises(ValueError), interrupts_deferred():
        signal.raise_signal(signal.SIGINT)
        raise ValueError("the block's own error")
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_outside_the_main_thread_it_changes_nothing() -> None:
    seen = []

    def body() -> None:
        with interrupts_deferred():
            seen.append(signal.getsignal(signal.SIGINT))

    thread = threading.Thread(target=body)
    thread.start()
    thread.join()
    assert seen == [signal.default_int_handler]


class _Descriptor:
    def __set_name__(self, owner: type, name: str) -> None:
        raise KeyboardInterrupt  # as a Ctrl-C would arrive while pydantic builds a model


def test_a_ctrl_c_while_a_class_is_made_is_still_an_interrupt() -> None:
    with pytest.raises(RuntimeError) as caught:

        class _Model:
            field = _Descriptor()

    assert caused_by_interrupt(caught.value)
    assert not caused_by_interrupt(RuntimeError("a plain error"))
