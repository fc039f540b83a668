"""The threads of in-process operators: which run a thread belongs to, and how the test's thread
signals, crashes and cleans up after them.

To treat an in-process operator like a pod, ktest must know its threads: to route their output
to its log and to end them all on ``crash()``. While an operator runs, ``threading.Thread.start``
is wrapped so that a thread an operator's thread starts (a thread pool's too) belongs to the same
run; ktest's own helper threads (named ``ktest-...``) never do.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import logging
import threading
import time
import weakref
from collections.abc import Callable
from typing import Any

RecordSink = Callable[[logging.LogRecord, str], None]
"""Receives each record emitted by one in-process operator, with its formatted text."""

_ATTRIBUTE = "_ktest_operator_run"
_KTEST_THREAD_PREFIX = "ktest-"


class OperatorCrash(BaseException):
    """Raised inside an in-process operator's threads by ``crash()``; a BaseException so that
    ``except Exception`` in operator code does not swallow it."""


class RunThreads:
    """The threads of one run of an in-process operator, and where its output goes."""

    def __init__(self, sink: RecordSink) -> None:
        self.sink = sink
        self.kube: Any = None
        """The run's ``client_defaults.KubeRoute``: where its ``kubernetes`` defaults lead."""
        self.crashed = False
        """Set by ``crash()``: an OperatorCrash ending one of the run's threads is expected."""
        self._threads: weakref.WeakSet[threading.Thread] = weakref.WeakSet()
        self._lock = threading.Lock()

    def adopt(self, thread: threading.Thread, *, quiet_crash: bool = True) -> None:
        """Count ``thread`` (not started yet) as one of the run's; with ``quiet_crash``, an
        OperatorCrash ends it silently (no "exception in thread" report)."""
        setattr(thread, _ATTRIBUTE, self)
        if quiet_crash:
            body = thread.run

            def run() -> None:
                try:
                    body()
                except OperatorCrash:
                    if not self.crashed:
                        raise

            thread.run = run  # type: ignore[method-assign]
        with self._lock:
            self._threads.add(thread)

    def alive(self) -> list[threading.Thread]:
        """The run's threads that have started and not ended, the calling thread excluded."""
        me = threading.current_thread()
        with self._lock:
            threads = list(self._threads)
        return sorted((t for t in threads if t.is_alive() and t is not me), key=lambda t: t.ident or 0)

    def join(self, timeout: float) -> list[threading.Thread]:
        """Wait up to ``timeout`` s in all for every thread of the run; those still running."""
        deadline = time.monotonic() + timeout
        for thread in self.alive():
            thread.join(max(0.0, deadline - time.monotonic()))
        return self.alive()


def current_run() -> RunThreads | None:
    """The operator run the calling thread belongs to, or None (the test's own code)."""
    return getattr(threading.current_thread(), _ATTRIBUTE, None)


class _StartTracker:
    """Wraps ``threading.Thread.start`` while operators run (reference-counted)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.users = 0
        self.original: Callable[..., Any] | None = None

    def acquire(self) -> None:
        with self.lock:
            self.users += 1
            if self.original is None:
                original = self.original = threading.Thread.start

                def start(thread: threading.Thread) -> None:
                    run = current_run()
                    if (
                        run is not None
                        and getattr(thread, _ATTRIBUTE, None) is None
                        and not thread.name.startswith(_KTEST_THREAD_PREFIX)
                    ):
                        run.adopt(thread)
                    original(thread)

                threading.Thread.start = start  # type: ignore[method-assign,assignment]

    def release(self) -> None:
        with self.lock:
            self.users -= 1
            if self.users == 0 and self.original is not None:
                threading.Thread.start = self.original  # type: ignore[method-assign]
                self.original = None


thread_tracking = _StartTracker()
"""Tracks the threads operators start from ``acquire()`` to the matching ``release()``."""


# ------------------------------------------------------------ signalling and event loops


def raise_in(thread: threading.Thread) -> None:
    """Raise OperatorCrash in ``thread`` at its next Python instruction (the closest thing to
    killing a thread; one blocked in a system call gets it when the call returns)."""
    if thread.ident is not None and thread.is_alive():
        ctypes.pythonapi.PyThreadState_SetAsyncExc(
            ctypes.c_ulong(thread.ident), ctypes.py_object(OperatorCrash)
        )


def call_in_loop(loop: asyncio.AbstractEventLoop, callback: Callable[[], Any]) -> None:
    """Run ``callback`` in ``loop`` (owned by another thread); nothing if the loop is closed,
    since a closed loop means the run is over."""
    with contextlib.suppress(RuntimeError):
        loop.call_soon_threadsafe(callback)


def finish_off(task: asyncio.Task[Any]) -> None:
    """Close a cut-off task's coroutine now, in the run's own thread, its clean-up code cut short.

    Left to the garbage collector, the coroutine would run that code (an operator's ``finally``
    and ``except`` blocks, kopf's error logging with tracebacks) at any later collection, in
    whatever thread and test, even inside an ``ast.parse`` in progress, which Python 3.11 then
    fails ("SystemError: AST constructor recursion depth mismatch").
    """
    with contextlib.suppress(BaseException):  # whatever it raises has nowhere better to go
        task.get_coro().close()


def close_loop(loop: asyncio.AbstractEventLoop, *, wait: bool = True) -> None:
    """Cancel what the operator left running, then close its loop; ``wait=False`` (a crashed
    run) closes it without running the cancelled tasks to their end."""
    try:
        pending = [task for task in asyncio.all_tasks(loop) if not task.done()]
        for task in pending:
            task.cancel()
        if not wait:
            # Abandoned, not failed: no "Task was destroyed but it is pending" when they are freed.
            loop.set_exception_handler(lambda _loop, _context: None)
            for task in pending:
                finish_off(task)
            return
        if pending:
            loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
        loop.run_until_complete(loop.shutdown_asyncgens())
        loop.run_until_complete(loop.shutdown_default_executor())
    finally:
        asyncio.set_event_loop(None)
        loop.close()
