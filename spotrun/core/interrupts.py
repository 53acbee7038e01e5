"""Ctrl-C held back over a few steps that must not be cut in two.

SIGINT raises KeyboardInterrupt at whichever bytecode the main thread is on. Inside
`interrupts_deferred()` it is only noted; it is raised when the block ends (through the handler
that was there before, so an ignored SIGINT stays ignored). Keep such blocks short: a Ctrl-C
waits for them. Only the main thread receives KeyboardInterrupt, so elsewhere it does nothing.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable
from types import FrameType, TracebackType
from typing import Any

Handler = Callable[[int, FrameType | None], Any] | int | signal.Handlers | None


class DeferredInterrupts:
    """The context manager `interrupts_deferred()` returns."""

    def __init__(self) -> None:
        self._previous: Handler = None
        self._noted = False
        self._active = False

    def _note(self, _signum: int, _frame: FrameType | None) -> None:
        self._noted = True

    def __enter__(self) -> DeferredInterrupts:
        if threading.current_thread() is threading.main_thread():
            # Once this handler is in, a SIGINT (even one already pending) is only noted.
            self._previous = signal.signal(signal.SIGINT, self._note)
            self._active = True
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if not self._active:
            return
        self._active = False
        previous = signal.SIG_DFL if self._previous is None else self._previous
        signal.signal(signal.SIGINT, previous)
        if self._noted and exc_type is None:
            signal.raise_signal(signal.SIGINT)  # the previous handler decides: usually raise


def interrupts_deferred() -> DeferredInterrupts:
    """`with interrupts_deferred():` a Ctrl-C inside the block is raised when it ends."""
    return DeferredInterrupts()


def caused_by_interrupt(exc: BaseException) -> bool:
    """Whether a Ctrl-C lies under `exc`: one that came while a class was being made (an
    import) surfaces as a RuntimeError from type.__new__, the KeyboardInterrupt its cause."""
    seen: set[int] = set()
    cause: BaseException | None = exc
    while cause is not None and id(cause) not in seen:
        if isinstance(cause, KeyboardInterrupt):
            return True
        seen.add(id(cause))
        cause = cause.__cause__ or cause.__context__
    return False
