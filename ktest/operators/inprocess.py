"""Operators run in a thread of the test process: the lifecycle they share (``ThreadOperator``),
and a Python callable as the operator under test (``run_callable``).

A plain function runs in a thread; an ``async def`` function runs as the main task of a fresh
event loop in its own thread, never the test's loop. ``ThreadOperator`` is what the callable and
kopf runners share: the run's record, halting, crashing (every thread of the run ends, like a
killed pod) and routing the operator's log records to its log.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Literal, overload

from ktest.errors import OperatorError
from ktest.operators import client_defaults, logs
from ktest.operators.operator import OperatorHandle, launch_replicated
from ktest.operators.threads import (
    OperatorCrash,
    RunThreads,
    call_in_loop,
    close_loop,
    raise_in,
    thread_tracking,
)

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from ktest.cluster import Cluster
    from ktest.operators.options import InProcessOptions


@dataclass
class ThreadRun:
    """One run of an in-process operator: its threads, event loop, readiness and outcome."""

    threads: RunThreads
    thread: threading.Thread | None = None
    loop: asyncio.AbstractEventLoop | None = None
    task: asyncio.Task[Any] | None = None
    started: threading.Event = field(default_factory=threading.Event)
    ready: threading.Event = field(default_factory=threading.Event)
    stop: threading.Event | asyncio.Event | None = None
    """The run's stop signal (an ``asyncio.Event`` of the run's loop for async operators)."""
    exception: BaseException | None = None
    returned: bool = False
    killed: bool = False


class ThreadOperator(OperatorHandle):
    """An operator run in a thread of its own (kinds: callable, kopf)."""

    error_hint: ClassVar[str] = ""
    """Added to the failure when the operator logs an ERROR record."""
    ended_with: ClassVar[str] = "raised"
    """How the failure names the exception the run ended with."""
    returned_early: ClassVar[str] = "returned while the test was still running"
    """The failure when the run ended by itself without an exception."""

    log_level: int
    _run: ThreadRun

    # ------------------------------------------------------------ what a kind supplies

    def _signal_stop(self, run: ThreadRun) -> None:
        """Set the run's stop signal (from the test's thread)."""
        if isinstance(run.stop, asyncio.Event):
            if run.loop is not None:
                call_in_loop(run.loop, run.stop.set)
        elif run.stop is not None:
            run.stop.set()

    def _routing_level(self) -> int:
        """The lowest level of records routed to the sink (``log_level`` unless a kind needs more)."""
        return self.log_level

    def _after_run(self, run: ThreadRun) -> None:
        """Called in the run's thread once it ended, before log routing is released."""

    # ------------------------------------------------------------ shared lifecycle

    def _route_client_defaults(self, run: ThreadRun) -> client_defaults.KubeRoute:
        """Point the ``kubernetes`` package's defaults, for this run's code, at the operator's
        proxy (see ``client_defaults``) until the run's main thread ends."""
        route = run.threads.kube
        if route is None:
            route = run.threads.kube = client_defaults.KubeRoute(
                self.name, self.api_cluster.kubeconfig, note=self.log.write
            )
            client_defaults.patches.acquire(route)
        return route

    def _unroute_client_defaults(self, run: ThreadRun) -> None:
        if run.threads.kube is not None:
            client_defaults.patches.release(run.threads.kube)

    def _start_thread(self, run: ThreadRun, body: Callable[[], None], thread_name: str) -> None:
        """Start ``body`` as the run's main thread (:meth:`_await_launch` waits until it has
        got going); log routing and thread tracking stay on until it ends (:meth:`_thread_ended`)."""
        run.threads.sink = self._sink_of(run)
        run.thread = threading.Thread(
            target=self._thread_main, args=(run, body), name=thread_name, daemon=True
        )
        run.threads.adopt(run.thread, quiet_crash=False)
        self._route_client_defaults(run)
        logs.acquire_routing(self._routing_level())
        thread_tracking.acquire()
        try:
            run.thread.start()
        except BaseException:
            self._thread_ended(run)
            raise

    def _await_launch(self) -> None:
        run = self._run
        if run.started.wait(self.ready_timeout):
            return
        name = run.thread.name if run.thread is not None else "?"
        raise self._make_error(
            f"did not get under way within {self.ready_timeout:g} s: ktest waited for its thread "
            f"{name} to create its stop signal (and event loop), which it does before running any "
            "operator code",
            hint="A thread of the test process holds something the operator's start needs: the "
            "stacks of the process's threads show which (python -X faulthandler, or py-spy dump).",
        )

    def _thread_ended(self, run: ThreadRun) -> None:
        """Release what :meth:`_start_thread` turned on (called last by the run's main thread)."""
        self._unroute_client_defaults(run)
        thread_tracking.release()
        logs.release_routing()

    def _thread_main(self, run: ThreadRun, body: Callable[[], None]) -> None:
        logs.bind_sink(run.threads.sink)
        try:
            body()
            run.returned = True
        except BaseException as error:
            if not run.killed:  # after crash(), whatever ends the run is the crash's doing
                run.exception = error
        finally:
            run.started.set()
            try:
                self._after_run(run)
            finally:
                self._thread_ended(run)
                self._wake.set()

    def _halt(self, timeout: float) -> bool:
        run = self._run
        self._signal_stop(run)
        assert run.thread is not None
        run.thread.join(timeout)
        if run.thread.is_alive():
            return False
        leftover = run.threads.join(1.0)  # threads it started and did not join
        if leftover:
            self.log.write(
                f"---- ktest: {self.name} stopped but left {len(leftover)} thread(s) running: "
                f"{', '.join(t.name for t in leftover)} (an operator should join its threads before it "
                "returns) ----"
            )
        return True

    def _kill(self) -> None:
        run = self._run
        run.killed = True
        run.threads.crashed = True
        thread = run.thread
        if thread is not None and thread.is_alive():
            if run.task is not None and run.loop is not None:
                call_in_loop(run.loop, run.task.cancel)
            else:
                raise_in(thread)
        self._signal_stop(run)  # after the kill, so that the operator cannot take its graceful path
        for other in run.threads.alive():  # the main thread was told to end its own way above
            if other is not thread:
                raise_in(other)
        grace = self.stop_timeout if self._crash_grace is None else self._crash_grace
        self.leaked_threads = run.threads.join(grace)
        if thread is not None and thread.is_alive() and run.loop is not None:
            # The cancelled task is still winding down (kopf waits for its own tasks, retries its
            # farewell to its peers): a killed pod would not, so its loop stops and is closed with
            # whatever was left pending.
            call_in_loop(run.loop, run.loop.stop)
            thread.join(grace)
            self.leaked_threads = [t for t in self.leaked_threads if t.is_alive()]
        if self.leaked_threads:
            self.log.write(
                f"---- ktest: {len(self.leaked_threads)} thread(s) of {self.name} still run {grace:g} s "
                f"after crash(): {', '.join(t.name for t in self.leaked_threads)}; they are blocked outside "
                "Python code, are left behind as daemon threads, and end with OperatorCrash at their next "
                "Python instruction ----"
            )

    def _running(self) -> bool:
        thread = self._run.thread
        return thread is not None and thread.is_alive()

    def _death_reason(self) -> str:
        run = self._run
        if run.exception is not None:
            error = run.exception
            return f"{self.ended_with} {logs.exception_text(error)}\n{logs.format_exception(error)}"
        return self.returned_early if run.returned else "ended without a result"

    def _sink(self, record: logging.LogRecord, text: str) -> None:
        """Where records go before a run started (none normally): the log only."""
        self.log.write(text)

    def _writes(self, record: logging.LogRecord) -> bool:
        """Whether a record goes to the log (kinds that route more than ``log_level`` to
        observe it filter here)."""
        return True

    def _observe(self, run: ThreadRun, record: logging.LogRecord, text: str) -> bool:
        """A kind's look at each record of its current run; True when the kind has judged the
        record itself (it is then no plain logged error)."""
        return False

    def is_expected_error(self, record: logging.LogRecord) -> bool:
        """An ERROR record that is the operator doing its job (kinds override it), not a failure."""
        return False

    def _sink_of(self, run: ThreadRun) -> logs.RecordSink:
        """The log sink of one run: an ERROR record fails the operator only while that run is the
        current one and was not crashed on purpose (a thread of a crashed run may still log as
        it ends, even after a restart)."""

        def sink(record: logging.LogRecord, text: str) -> None:
            crashed = record.exc_info is not None and isinstance(record.exc_info[1], OperatorCrash)
            if crashed:
                self.log.write(f"---- ktest: thread {record.threadName} of {self.name} ended by crash() ----")
                return
            if self._writes(record):
                self.log.write(text)
            if run is not self._run or run.killed or self._observe(run, record, text):
                return
            if record.levelno >= logging.ERROR and not self.is_expected_error(record):
                self._record_logged_error(text, hint=self.error_hint)

        return sink


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


__all__ = ["CallableOperator", "OperatorContext", "OperatorCrash", "ReadyCheck", "run_callable"]


class CallableOperator(ThreadOperator):
    """An operator that is a Python function (sync in a thread, async in its own loop)."""

    kind = "callable"
    runner = "run_callable"
    returned_early = (
        "returned while the test was still running; an operator function must keep "
        "running until its stop signal (ctx.stop) is set"
    )

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
        self._run = ThreadRun(threads=RunThreads(self._sink))
        self._last_check_error: BaseException | None = None

    # ------------------------------------------------------------ hooks

    def _launch(self) -> None:
        run = self._run = ThreadRun(threads=RunThreads(self._sink))
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

    def _body(self, run: ThreadRun, ctx: OperatorContext) -> None:
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

    def _mark_ready(self, run: ThreadRun) -> None:
        run.ready.set()
        self._wake.set()


def _field_manager_name(name: str) -> str:
    """The operator's name as a field manager (printable, at most 128 characters, never ``ktest``)."""
    cleaned = "".join(ch if ch.isprintable() else "-" for ch in name)[:128] or "operator"
    return "operator" if cleaned == "ktest" else cleaned


@overload
def run_callable(
    fn: Callable[[OperatorContext], Any],
    cluster: Cluster,
    *,
    ready: ReadyCheck | None = None,
    replicas: Literal[1] = 1,
    **options: Unpack[InProcessOptions],
) -> CallableOperator: ...
@overload
def run_callable(
    fn: Callable[[OperatorContext], Any],
    cluster: Cluster,
    *,
    ready: ReadyCheck | None = None,
    replicas: int,
    **options: Unpack[InProcessOptions],
) -> Any: ...
def run_callable(
    fn: Callable[[OperatorContext], Any],
    cluster: Cluster,
    *,
    ready: ReadyCheck | None = None,
    replicas: int = 1,
    **options: Unpack[InProcessOptions],
) -> CallableOperator | Any:
    """Start ``fn(ctx)`` as the operator under test and (with ``wait``) wait until it is ready.

    Ready when ``fn`` calls ``ctx.ready()``, or when ``ready()`` returns True if a readiness
    check is given. ``namespaces=[...]`` reaches the operator as ``ctx.namespaces``; ``proxy``
    (default on) gives it a kubeconfig through ktest's API proxy (``op.traffic``, ``op.faults``).
    The keyword arguments: :class:`~ktest.operators.options.InProcessOptions`. Use the result
    as a context manager to stop it::

        with run_callable(my_operator, cluster) as op:
            ...

    ``replicas=3`` runs three instances, each behind its own proxy and named ``<name>-0`` ..
    ``<name>-2`` (``ctx.name``), and returns their ``ktest.replicas.OperatorReplicas``.
    """
    wait = options.pop("wait", True)
    return launch_replicated(
        "run_callable",
        replicas,
        lambda replica: CallableOperator(fn, cluster, ready=ready, replica=replica, **options),
        wait,
    )
