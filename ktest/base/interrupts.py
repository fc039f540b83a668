"""Ctrl-C held back while something outside the process is being created.

A KeyboardInterrupt raised while a request that creates a container is in flight leaves the
container made but its handle unknown, so the caller's clean-up cannot remove it. Inside
:func:`interrupts_held` a SIGINT is recorded and handed to the previous handler once the block
ends, when the caller knows what to clean up.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Callable, Iterator
from types import FrameType


@contextlib.contextmanager
def interrupts_held() -> Iterator[None]:
    """Deliver a SIGINT that arrives inside the block only when the block ends.

    Only the main thread receives signals, so elsewhere (and where SIGINT is ignored or left to
    the default action) the block runs as it is.
    """
    previous = signal.getsignal(signal.SIGINT)
    if threading.current_thread() is not threading.main_thread() or not callable(previous):
        yield
        return
    held: list[tuple[int, FrameType | None]] = []
    signal.signal(signal.SIGINT, lambda signum, frame: held.append((signum, frame)))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
        if held:
            previous(*held[0])


def witness_interrupts(on_interrupt: Callable[[], object]) -> Callable[[], None]:
    """Call ``on_interrupt`` for every SIGINT, then the previous handler; return the undo.

    The previous handler (Python's: raise KeyboardInterrupt) runs as before, but its exception
    can be lost: raised inside a ``__del__`` or a weakref callback that the garbage collector
    happens to run (pytest collects garbage as the session ends), it is printed as "Exception
    ignored" and dropped, and a run the user stopped with Ctrl-C would end as if it had passed.
    ``on_interrupt`` records the Ctrl-C where nothing drops it (the pytest plugin: the session's
    exit status). Outside the main thread, or where SIGINT is ignored or left to the default
    action, nothing is installed.
    """
    previous = signal.getsignal(signal.SIGINT)
    if threading.current_thread() is not threading.main_thread() or not callable(previous):
        return lambda: None

    def witnessed(signum: int, frame: FrameType | None) -> None:
        on_interrupt()
        previous(signum, frame)

    signal.signal(signal.SIGINT, witnessed)

    def undo() -> None:
        if signal.getsignal(signal.SIGINT) is witnessed:
            signal.signal(signal.SIGINT, previous)

    return undo
