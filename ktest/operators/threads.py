"""The threads (and event loop) an in-process operator runs in: start, signal, end, clean up.

Shared by the callable runner (``inprocess``) and the kopf runner, which both
run the operator in a daemon thread of its own, with log routing and thread
tracking (``ownership``) on while it runs, and stop, cancel or crash it from
the test's thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import threading
from collections.abc import Callable
from typing import Any

from ktest.operators import logs
from ktest.operators.run_threads import OperatorCrash, RunThreads, acquire_tracking, release_tracking


def start_operator_thread(
    thread: threading.Thread, started: threading.Event, log_level: int, threads: RunThreads
) -> None:
    """Turn on log routing and thread tracking, start ``thread`` (the run's main thread,
    adopted by ``threads``) and return once it set ``started``.

    The thread calls :func:`operator_thread_ended` when it ends; if it cannot start, that is done here.
    """
    threads.adopt(thread, quiet_crash=False)
    logs.acquire_routing(log_level)
    acquire_tracking()
    try:
        thread.start()
    except BaseException:
        operator_thread_ended()
        raise
    started.wait()


def operator_thread_ended() -> None:
    """Release what :func:`start_operator_thread` turned on (called last by the run's main thread)."""
    release_tracking()
    logs.release_routing()


def raise_in(thread: threading.Thread) -> None:
    """Raise OperatorCrash in ``thread`` at its next Python instruction (the closest thing to
    killing a thread; one blocked in a system call gets it when the call returns)."""
    if thread.ident is not None and thread.is_alive():
        ctypes.pythonapi.PyThreadState_SetAsyncExc(
            ctypes.c_ulong(thread.ident), ctypes.py_object(OperatorCrash)
        )


def crash_threads(
    threads: RunThreads, main: threading.Thread | None, timeout: float, log: logs.OperatorLog, name: str
) -> list[threading.Thread]:
    """Kill every thread of a crashed run but ``main`` (already told to end its own way), wait
    up to ``timeout`` s for all of them, and report in the log those still running; returns them."""
    threads.crashed = True
    for thread in threads.alive():
        if thread is not main:
            raise_in(thread)
    leaked = threads.join(timeout)
    if leaked:
        log.write(
            f"---- ktest: {len(leaked)} thread(s) of {name} still run {timeout:g} s after crash(): "
            f"{', '.join(t.name for t in leaked)}; they are blocked outside Python code, are left behind "
            "as daemon threads, and end with OperatorCrash at their next Python instruction ----"
        )
    return leaked


def report_leftovers(threads: RunThreads, timeout: float, log: logs.OperatorLog, name: str) -> None:
    """After a graceful stop: wait up to ``timeout`` s for threads the operator started and did
    not join; name in the log those still running."""
    leftover = threads.join(timeout)
    if leftover:
        log.write(
            f"---- ktest: {name} stopped but left {len(leftover)} thread(s) running: "
            f"{', '.join(t.name for t in leftover)} (an operator should join its threads before it "
            "returns) ----"
        )


def call_in_loop(loop: asyncio.AbstractEventLoop, callback: Callable[[], Any]) -> None:
    """Run ``callback`` in ``loop`` (owned by another thread); nothing if the loop is closed,
    since a closed loop means the run is over."""
    with contextlib.suppress(RuntimeError):
        loop.call_soon_threadsafe(callback)


def is_running(thread: threading.Thread | None) -> bool:
    """Whether the run's thread exists and has not ended."""
    return thread is not None and thread.is_alive()


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
