"""Run a Python callable as the operator under test, in its own thread.

A plain function runs in a thread; an ``async def`` function runs as the main
task of a fresh event loop in its own thread, so it never shares the test's
loop. Either receives an :class:`OperatorContext`: the kubeconfig of the
cluster it must use, a stop signal it must honour, and a ``ready()`` callback.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ktest.errors import OperatorError
from ktest.operators.operator import launch
from ktest.operators.run_threads import OperatorCrash, RunThreads
from ktest.operators.thread_runner import ThreadOperator, ThreadRun
from ktest.operators.threads import call_in_loop, close_loop

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from ktest.cluster import Cluster
    from ktest.operators.operator import InProcessOptions

ReadyCheck = Callable[[], bool]
"""Returns True (without raising) once the operator is ready."""


@dataclass
class OperatorContext:
    """What an in-process operator function receives.

    ``stop`` is a ``threading.Event`` for a plain function and an
    ``asyncio.Event`` (of the operator's own loop) for an ``async`` one; the
    function must return soon after it is set. Call ``ready()`` once the
    operator is watching (unless the handle was given a readiness check).
    ``cluster`` writes under the field manager ``field_manager`` (the
    operator's name), so managedFields tell its writes from the test's
    (``ktest``); an operator that builds its own client from ``kubeconfig``
    should send ``field_manager`` as its fieldManager (or user agent) too.
    """

    kubeconfig: Path
    stop: threading.Event | asyncio.Event
    ready: Callable[[], None]
    cluster: Cluster
    name: str
    field_manager: str = ""
    namespaces: list[str] | None = None
    """The namespaces (names or globs) the operator must limit itself to; None: the whole cluster."""

    @property
    def stopping(self) -> bool:
        return self.stop.is_set()


@dataclass
class _Run(ThreadRun):
    stop: threading.Event | asyncio.Event | None = None


__all__ = ["CallableOperator", "OperatorContext", "OperatorCrash", "ReadyCheck", "run_callable"]


class CallableOperator(ThreadOperator):
    """An operator that is a Python function (sync in a thread, async in its own loop)."""

    kind = "callable"
    runner = "run_callable"
    _run: _Run

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
        self.field_manager = _field_manager_name(self.name)
        """What the operator's writes through ``ctx.cluster`` are attributed to in managedFields."""
        self.is_async = inspect.iscoroutinefunction(fn)
        self.ready_check = ready
        self.log_level = log_level
        self._run = _Run(threads=RunThreads(self.name, self._sink))
        self._last_check_error: BaseException | None = None

    # ------------------------------------------------------------ hooks

    def _launch(self) -> None:
        run = self._run = _Run(threads=RunThreads(self.name, self._sink))
        ctx = OperatorContext(
            kubeconfig=self.api_cluster.kubeconfig,
            stop=threading.Event(),  # replaced by an asyncio.Event inside the loop for async functions
            ready=lambda: self._mark_ready(run),
            cluster=self.api_cluster.as_field_manager(self.field_manager),
            name=self.name,
            field_manager=self.field_manager,
            namespaces=list(self.namespaces) if self.namespaces is not None else None,
        )
        self._start_thread(run, lambda: self._body(run, ctx), f"ktest-operator-{self.name}")

    def _body(self, run: _Run, ctx: OperatorContext) -> None:
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

    def _signal_stop(self, run: ThreadRun) -> None:
        stop = getattr(run, "stop", None)
        if isinstance(stop, asyncio.Event) and run.loop is not None:
            call_in_loop(run.loop, stop.set)
        elif isinstance(stop, threading.Event):
            stop.set()

    def _death_reason(self) -> str:
        run = self._run
        if run.exception is not None:
            return f"raised {self._exception_text()}"
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


def _field_manager_name(name: str) -> str:
    """The operator's name as a field manager (printable, at most 128 characters, never ``ktest``)."""
    cleaned = "".join(ch if ch.isprintable() else "-" for ch in name)[:128] or "operator"
    return "operator" if cleaned == "ktest" else cleaned


def run_callable(
    fn: Callable[[OperatorContext], Any],
    cluster: Cluster,
    *,
    ready: ReadyCheck | None = None,
    **options: Unpack[InProcessOptions],
) -> CallableOperator:
    """Start ``fn(ctx)`` as the operator under test and (with ``wait``) wait until it is ready.

    Ready when ``fn`` calls ``ctx.ready()``, or when ``ready()`` returns True if
    a readiness check is given. ``namespaces=[...]`` (names or globs) tells the
    operator (``ctx.namespaces``) and ktest which namespaces it serves: the handle
    then waits before it stops only for deletions of those namespaces. ``proxy``
    (default: the ``ktest_operator_proxy`` setting, on) gives the operator a kubeconfig
    through ktest's API proxy: ``op.traffic``, ``op.faults``. The other keyword arguments:
    :class:`~ktest.operators.operator.InProcessOptions`. Use the result as a context manager
    to stop it::

        with run_callable(my_operator, cluster) as op:
            ...
    """
    wait = options.pop("wait", True)
    handle = CallableOperator(fn, cluster, ready=ready, **options)
    return launch(handle, wait)
