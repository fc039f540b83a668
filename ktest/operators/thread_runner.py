"""``ThreadOperator``: the lifecycle shared by operators that run in a thread of the test process.

The callable runner (``inprocess``) and the kopf runner differ in what their
thread runs and how it is told to stop; everything else is here, once: the
run's record (main thread, event loop, outcome), the thread body's outcome
handling, halting (stop signal, join, threads left behind), crashing (a killed
pod: every thread of the run ends, see ``threads.crash_threads``) and routing
the operator's log records to its log.
"""

from __future__ import annotations

import abc
import asyncio
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar

from ktest.operators import client_defaults, logs
from ktest.operators.operator import OperatorHandle
from ktest.operators.run_threads import OperatorCrash, RunThreads
from ktest.operators.threads import (
    call_in_loop,
    crash_threads,
    is_running,
    operator_thread_ended,
    raise_in,
    report_leftovers,
    start_operator_thread,
)


@dataclass
class ThreadRun:
    """One run of an in-process operator: its threads, event loop, readiness and outcome."""

    threads: RunThreads
    thread: threading.Thread | None = None
    loop: asyncio.AbstractEventLoop | None = None
    task: asyncio.Task[Any] | None = None
    started: threading.Event = field(default_factory=threading.Event)
    ready: threading.Event = field(default_factory=threading.Event)
    exception: BaseException | None = None
    returned: bool = False
    killed: bool = False


class ThreadOperator(OperatorHandle):
    """An operator run in a thread of its own (kinds: callable, kopf)."""

    error_hint: ClassVar[str] = ""
    """Added to the failure when the operator logs an ERROR record."""

    log_level: int
    _run: ThreadRun

    # ------------------------------------------------------------ what a kind supplies

    @abc.abstractmethod
    def _signal_stop(self, run: ThreadRun) -> None:
        """Set the run's stop signal (from the test's thread)."""

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
            client_defaults.activate(route)
        return route

    def _unroute_client_defaults(self, run: ThreadRun) -> None:
        if run.threads.kube is not None:
            client_defaults.deactivate(run.threads.kube)

    def _start_thread(self, run: ThreadRun, body: Callable[[], None], thread_name: str) -> None:
        """Start ``body`` as the run's main thread and return once it has started."""
        run.threads.sink = self._sink_of(run)
        run.thread = threading.Thread(
            target=self._thread_main, args=(run, body), name=thread_name, daemon=True
        )
        self._route_client_defaults(run)
        try:
            start_operator_thread(run.thread, run.started, self._routing_level(), run.threads)
        except BaseException:
            self._unroute_client_defaults(run)
            raise

    def _thread_main(self, run: ThreadRun, body: Callable[[], None]) -> None:
        logs.bind_sink(run.threads.sink)
        try:
            body()
            run.returned = True
        except (asyncio.CancelledError, OperatorCrash) as error:
            if not run.killed:
                run.exception = error
        except BaseException as error:
            if not run.killed:  # after crash(), whatever ends the run is the crash's doing
                run.exception = error
        finally:
            run.started.set()
            try:
                self._after_run(run)
            finally:
                self._unroute_client_defaults(run)
                operator_thread_ended()
                self._wake.set()

    def _halt(self, timeout: float) -> bool:
        run = self._run
        self._signal_stop(run)
        assert run.thread is not None
        run.thread.join(timeout)
        if run.thread.is_alive():
            return False
        report_leftovers(run.threads, 1.0, self.log, self.name)
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
        self.leaked_threads = crash_threads(run.threads, thread, self.stop_timeout, self.log, self.name)
        if thread is not None and thread.is_alive() and run.loop is not None:
            # The cancelled task is still winding down (kopf waits for its own tasks): a killed
            # pod would not, so its loop stops and is closed with whatever was left pending.
            call_in_loop(run.loop, run.loop.stop)
            thread.join(self.stop_timeout)
            self.leaked_threads = [t for t in self.leaked_threads if t.is_alive()]

    def _running(self) -> bool:
        return is_running(self._run.thread)

    def _exception_text(self) -> str:
        error = self._run.exception
        assert error is not None
        return f"{logs.exception_text(error)}\n{logs.format_exception(error)}"

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
