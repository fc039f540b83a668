"""The thread (and event loop) an in-process operator runs in: start, signal, end, clean up.

Shared by the callable runner (``inprocess``) and the kopf runner, which both
run the operator in a daemon thread of its own, with log routing on while it
runs, and stop or cancel it from the test's thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable
from typing import Any

from ktest.operators import logs


def start_operator_thread(thread: threading.Thread, started: threading.Event, log_level: int) -> None:
    """Turn on log routing, start ``thread`` and return once it set ``started``.

    The thread releases the routing when it ends; if it cannot start, it is released here.
    """
    logs.acquire_routing(log_level)
    try:
        thread.start()
    except BaseException:
        logs.release_routing()
        raise
    started.wait()


def call_in_loop(loop: asyncio.AbstractEventLoop, callback: Callable[[], Any]) -> None:
    """Run ``callback`` in ``loop`` (owned by another thread); nothing if the loop is closed,
    since a closed loop means the run is over."""
    with contextlib.suppress(RuntimeError):
        loop.call_soon_threadsafe(callback)


def is_running(thread: threading.Thread | None) -> bool:
    """Whether the run's thread exists and has not ended."""
    return thread is not None and thread.is_alive()


def join_or_report(thread: threading.Thread, timeout: float, log: logs.OperatorLog, report: str) -> None:
    """Wait up to ``timeout`` s for a crashed run's thread; write ``report`` to the log if it
    is still running (a daemon thread left behind)."""
    thread.join(timeout)
    if thread.is_alive():
        log.write(report)


def close_loop(loop: asyncio.AbstractEventLoop) -> None:
    """Cancel what the operator left running, then close its loop."""
    try:
        pending = [task for task in asyncio.all_tasks(loop) if not task.done()]
        for task in pending:
            task.cancel()
        if pending:
            loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
        loop.run_until_complete(loop.shutdown_asyncgens())
        loop.run_until_complete(loop.shutdown_default_executor())
    finally:
        asyncio.set_event_loop(None)
        loop.close()
