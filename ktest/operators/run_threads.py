"""Which in-process operator run a thread belongs to: its own thread and every thread it starts.

An in-process operator is a process within the test process, so ktest needs to
know its threads to treat it like a pod: route their ``logging`` records and
``print()`` output to its log, signal and end them all on ``crash()``, and
refuse to start a new generation while an old one still runs. While at least
one in-process operator runs, ``threading.Thread.start`` is wrapped so that a
thread started by an operator's thread (directly or through a thread pool)
belongs to the same run. ktest's own helper threads (named ``ktest-...``)
never belong to an operator, even when an operator's call started them.
"""

from __future__ import annotations

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

    def __init__(self, name: str, sink: RecordSink) -> None:
        self.name = name
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


_tracker = _StartTracker()


def acquire_tracking() -> None:
    """Track the threads operators start until the matching :func:`release_tracking`."""
    _tracker.acquire()


def release_tracking() -> None:
    _tracker.release()
