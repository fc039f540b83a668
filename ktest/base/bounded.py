"""Waits with a bound: a file lock, a thread, a future. Each ends, once its bound is over, in an
error that names what ktest waited for, so that a stuck helper or another process holding a lock
never hangs a test session without a word."""

from __future__ import annotations

import concurrent.futures
import contextlib
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")


@contextlib.contextmanager
def file_lock(
    path: Path,
    *,
    timeout: float,
    what: str,
    error: type[Exception],
    mode: int = 0o644,
    on_wait: Callable[[], object] | None = None,
) -> Iterator[None]:
    """Hold the file lock ``path`` (``what`` it guards, in words; created with ``mode``) for the
    block, waiting at most ``timeout`` s for another process to release it; ``error`` says so then.
    ``on_wait`` is called once if the lock is not free at once (to say that it waits)."""
    import filelock

    lock = filelock.FileLock(str(path), mode=mode)
    try:
        lock.acquire(timeout=0.2 if on_wait is not None else timeout)
    except filelock.Timeout as busy:
        if on_wait is None:
            raise error(_waited(timeout, path, what)) from busy
        on_wait()
        try:
            lock.acquire(timeout=timeout)
        except filelock.Timeout as timed_out:
            raise error(_waited(timeout, path, what)) from timed_out
    try:
        yield
    finally:
        lock.release()


def _waited(timeout: float, path: Path, what: str) -> str:
    return (
        f"waited {timeout:g} s for the lock {path} ({what}): another process holds it all that "
        "time. If it is a ktest process that is stuck, stop it and run again."
    )


def join_thread(thread: threading.Thread, timeout: float, what: str, error: type[Exception]) -> None:
    """Wait up to ``timeout`` s for ``thread`` (``what`` it does, in words) to end; ``error``
    naming it if it is still running then (it is left running: threads cannot be stopped)."""
    thread.join(timeout)
    if thread.is_alive():
        raise error(
            f"waited {timeout:g} s for {what} (thread {thread.name!r}) to end, and it still runs"
        )


def future_result(
    future: concurrent.futures.Future[T], timeout: float, what: str, error: type[Exception]
) -> T:
    """The result of ``future`` (``what`` it computes, in words) within ``timeout`` s; ``error``
    naming it otherwise."""
    try:
        return future.result(timeout)
    except concurrent.futures.TimeoutError as timed_out:
        future.cancel()
        raise error(f"waited {timeout:g} s for {what}, which did not finish") from timed_out
