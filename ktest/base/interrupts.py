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
from collections.abc import Iterator
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
