"""Run a Python callable as the operator under test, in its own thread.

A plain function runs in a thread; an ``async def`` function runs as the main
task of a fresh event loop in its own thread, so it never shares the test's
loop. Either receives an :class:`OperatorContext`: the kubeconfig of the
cluster it must use, a stop signal it must honour, and a ``ready()`` callback.
"""

from __future__ import annotations

import asyncio
import ctypes
import inspect
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ktest.errors import OperatorError
from ktest.operators import logs
from ktest.operators.handle import DEFAULT_READY_TIMEOUT, DEFAULT_STOP_TIMEOUT, OperatorHandle, launch
from ktest.operators.threads import (
    call_in_loop,
    close_loop,
    is_running,
    join_or_report,
    start_operator_thread,
)

if TYPE_CHECKING:
    from ktest.cluster import Cluster

ReadyCheck = Callable[[], bool]
"""Returns True (without raising) once the operator is ready."""


class OperatorCrash(BaseException):
    """Raised inside a sync operator's thread by ``crash()``; a BaseException so that
    ``except Exception`` in operator code does not swallow it."""


@dataclass
class OperatorContext:
    """What an in-process operator function receives.

    ``stop`` is a ``threading.Event`` for a plain function and an
    ``asyncio.Event`` (of the operator's own loop) for an ``async`` one; the
    function must return soon after it is set. Call ``ready()`` once the
    operator is watching (unless the handle was given a readiness check).
    """

    kubeconfig: Path
    stop: threading.Event | asyncio.Event
    ready: Callable[[], None]
    cluster: Cluster
    name: str

    @property
    def stopping(self) -> bool:
        return self.stop.is_set()


@dataclass
class _Run:
    thread: threading.Thread | None = None
    loop: asyncio.AbstractEventLoop | None = None
    task: asyncio.Task[Any] | None = None
    stop: threading.Event | asyncio.Event | None = None
    ready: threading.Event = field(default_factory=threading.Event)
    started: threading.Event = field(default_factory=threading.Event)
    exception: BaseException | None = None
    returned: bool = False
    killed: bool = False


class CallableOperator(OperatorHandle):
    """An operator that is a Python function (sync in a thread, async in its own loop)."""

    kind = "callable"

    def __init__(
        self,
        fn: Callable[[OperatorContext], Any],
        cluster: Cluster,
        *,
        ready: ReadyCheck | None = None,
        name: str | None = None,
        log_level: int = logging.INFO,
        **options: Any,
    ) -> None:
        if not callable(fn):
            raise OperatorError(f"run_callable needs a function taking an OperatorContext, not {fn!r}.")
        super().__init__(name or str(getattr(fn, "__name__", "operator")), cluster, **options)
        self.fn = fn
        self.is_async = inspect.iscoroutinefunction(fn)
        self.ready_check = ready
        self.log_level = log_level
        self._run = _Run()
        self._last_check_error: BaseException | None = None

    # ------------------------------------------------------------ hooks

    def _launch(self) -> None:
        run = self._run = _Run()
        ctx = OperatorContext(
            kubeconfig=self.cluster.kubeconfig,
            stop=threading.Event(),  # replaced by an asyncio.Event inside the loop for async functions
            ready=lambda: self._mark_ready(run),
            cluster=self.cluster,
            name=self.name,
        )
        run.thread = threading.Thread(
            target=self._thread_main, args=(run, ctx), name=f"ktest-operator-{self.name}", daemon=True
        )
        start_operator_thread(run.thread, run.started, self.log_level)

    def _thread_main(self, run: _Run, ctx: OperatorContext) -> None:
        logs.bind_sink(self._sink)
        try:
            if self.is_async:
                loop = run.loop = asyncio.new_event_loop()
                asyncio.set_event_loop(loop)
                try:
                    ctx.stop = run.stop = asyncio.Event()
                    run.task = loop.create_task(self.fn(ctx), name=f"operator {self.name}")
                    run.started.set()
                    loop.run_until_complete(run.task)
                finally:
                    close_loop(loop)
            else:
                run.stop = ctx.stop
                run.started.set()
                self.fn(ctx)
            run.returned = True
        except (asyncio.CancelledError, OperatorCrash) as error:
            if not run.killed:
                run.exception = error
        except BaseException as error:
            run.exception = error
        finally:
            run.started.set()
            logs.release_routing()
            self._wake.set()

    def _halt(self, timeout: float) -> bool:
        run = self._run
        if isinstance(run.stop, asyncio.Event) and run.loop is not None:
            call_in_loop(run.loop, run.stop.set)
        elif isinstance(run.stop, threading.Event):
            run.stop.set()
        assert run.thread is not None
        run.thread.join(timeout)
        return not run.thread.is_alive()

    def _kill(self) -> None:
        run = self._run
        run.killed = True
        thread = run.thread
        if thread is None or not thread.is_alive():
            return
        if run.task is not None and run.loop is not None:
            call_in_loop(run.loop, run.task.cancel)
        elif thread.ident is not None:
            # The closest thing to killing a thread: raise in it at its next bytecode.
            ctypes.pythonapi.PyThreadState_SetAsyncExc(
                ctypes.c_ulong(thread.ident), ctypes.py_object(OperatorCrash)
            )
        join_or_report(
            thread,
            self.stop_timeout,
            self.log,
            f"---- ktest: {self.name} is still running {self.stop_timeout:g} s after crash(); "
            "it is blocked outside Python code and is left behind as a daemon thread ----",
        )

    def _running(self) -> bool:
        return is_running(self._run.thread)

    def _death_reason(self) -> str:
        run = self._run
        if run.exception is not None:
            error = run.exception
            return f"raised {type(error).__name__}: {error}\n{logs.format_exception(error)}"
        if run.returned:
            return (
                "returned while the test was still running; an operator function must keep "
                "running until its stop signal (ctx.stop) is set"
            )
        return "ended without a result"

    def _is_ready(self) -> bool:
        if self.ready_check is None:
            return self._run.ready.is_set()
        try:
            ok = bool(self.ready_check())
        except Exception as error:
            self._last_check_error = error
            return False
        self._last_check_error = None
        return ok

    def _not_ready_reason(self) -> str:
        if self.ready_check is None:
            return "it never called ctx.ready() (or pass ready=<check> to run_callable)"
        if self._last_check_error is not None:
            return f"the readiness check raised {self._last_check_error!r}"
        return "the readiness check kept returning False"

    def _describe(self) -> str:
        where = getattr(self.fn, "__module__", "?")
        return f"Function: {where}.{getattr(self.fn, '__qualname__', self.fn)!s}" + (
            " (async, in its own event loop)" if self.is_async else " (in a thread)"
        )

    # ------------------------------------------------------------ internals

    def _mark_ready(self, run: _Run) -> None:
        run.ready.set()
        self._wake.set()

    def _sink(self, record: logging.LogRecord, text: str) -> None:
        self.log.write(text)
        if record.levelno >= logging.ERROR:
            self._record_logged_error(text)


def run_callable(
    fn: Callable[[OperatorContext], Any],
    cluster: Cluster,
    *,
    ready: ReadyCheck | None = None,
    name: str | None = None,
    wait: bool = True,
    ready_timeout: float = DEFAULT_READY_TIMEOUT,
    stop_timeout: float = DEFAULT_STOP_TIMEOUT,
    fail_on_errors: bool = True,
    fail_on_forbidden: bool = True,
    log_level: int = logging.INFO,
    log_dir: Path | str | None = None,
) -> CallableOperator:
    """Start ``fn(ctx)`` as the operator under test and (with ``wait``) wait until it is ready.

    Ready when ``fn`` calls ``ctx.ready()``, or when ``ready()`` returns True if
    a readiness check is given. Use the result as a context manager to stop it::

        with run_callable(my_operator, cluster) as op:
            ...
    """
    handle = CallableOperator(
        fn,
        cluster,
        ready=ready,
        name=name,
        log_level=log_level,
        ready_timeout=ready_timeout,
        stop_timeout=stop_timeout,
        fail_on_errors=fail_on_errors,
        fail_on_forbidden=fail_on_forbidden,
        log_dir=log_dir,
    )
    return launch(handle, wait)
