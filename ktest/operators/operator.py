"""``OperatorHandle``: what a test holds for a running operator, whatever its kind: its lifecycle
(start, stop, crash, restart, close) on top of its health (``health``)."""

from __future__ import annotations

import abc
import contextlib
import fnmatch
import re
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

from ktest import addon_registry, run_context
from ktest.base.closing import StartedIfNew
from ktest.errors import OperatorError
from ktest.operators.crash_expectation import (
    DEFAULT_CRASH_AFTERMATH,
    POLL,
    ExpectedCrash,
    FailureProbe,
)
from ktest.operators.health import OperatorHealth
from ktest.operators.logs import OperatorLog
from ktest.operators.options import (
    DEFAULT_READY_TIMEOUT,
    DEFAULT_STOP_TIMEOUT,
    checked_namespaces,
    checked_replicas,
)
from ktest.operators.reports import attach_reports

if TYPE_CHECKING:
    from typing_extensions import Self

    from ktest.cluster import Cluster
    from ktest.proxy import Faults, OperatorProxy, Traffic


class OperatorHandle(OperatorHealth, StartedIfNew):
    """A running operator under test: ``stop()``, ``crash()``, ``restart()``, ``logs``, ``alive``,
    ``wait_ready()``, ``error``; a context manager that stops it on exit.

    ``fail_on_forbidden`` turns an RBAC refusal found in the operator's output into
    a failure naming the verb and resource; ``fail_on_errors`` does the same for
    ERROR log records of in-process operators (kopf handler exceptions).

    ``namespaces`` (names or globs such as ``"test-*"``; every runner takes it)
    says which namespaces the operator serves; None means the whole cluster.
    ktest uses it to wait, before the operator stops, only for the deletions of
    namespaces it serves (so it can finish its finalizers there); kopf is
    limited to them; a callable gets them as ``ctx.namespaces``; a subprocess
    gets them through ``{namespaces}`` (comma-separated) in its arguments or
    environment, e.g. ``env={"WATCH_NAMESPACE": "{namespaces}"}``.
    """

    CLOSE_ERRORS_HIDDEN = (OperatorError,)

    runner: ClassVar[str] = "the operator runner"
    """The function that starts this kind (for error messages)."""

    def __init__(
        self,
        name: str,
        cluster: Cluster,
        *,
        ready_timeout: float = DEFAULT_READY_TIMEOUT,
        stop_timeout: float = DEFAULT_STOP_TIMEOUT,
        fail_on_errors: bool = True,
        fail_on_forbidden: bool = True,
        log_dir: Path | str | None = None,
        namespaces: Sequence[str] | None = None,
        cluster_wide: bool = False,
        proxy: bool | None = None,
        replica: int | None = None,
    ) -> None:
        from ktest.proxy.defaults import operator_proxy_default, operator_proxy_http2_default

        self.namespaces = checked_namespaces(type(self).runner, namespaces, cluster_wide)
        self.use_proxy = bool(operator_proxy_default() if proxy is None else proxy)
        """Whether the operator talks to the API server through ktest's recording proxy."""
        self.proxy_http2 = operator_proxy_http2_default()
        """Whether that proxy offers HTTP/2 (setting ``ktest_operator_proxy_http2``)."""
        self.proxy: OperatorProxy | None = None
        self.cluster_wide = self.namespaces is None
        self.replica = replica
        """Which replica of a replicated operator this is (``run_kopf(..., replicas=3)``), else None;
        a replica's name ends with ``-<replica>``."""
        if replica is not None:
            name = f"{name}-{replica}"
        super().__init__(
            name,
            OperatorLog(name, Path(log_dir) if log_dir is not None else None),
            fail_on_errors=fail_on_errors,
            fail_on_forbidden=fail_on_forbidden,
        )
        self.cluster = cluster
        self.ready_timeout = ready_timeout
        self.stop_timeout = stop_timeout
        self.starts = 0
        self._cleanups: list[Callable[[], object]] = []
        self.wait_for_namespaces: bool | Sequence[str] = True
        """Which background namespace deletions :meth:`close` waits for before it stops the
        operator (so it can process its finalizers there): True, those it serves (for a
        cluster-wide operator: every one, other tests' too); a list, only those; False, none.
        ``operator_for_test`` sets it to its test's namespace."""
        self.leaked_threads: list[threading.Thread] = []
        """Threads of a crashed in-process run that did not end (see :meth:`crash`)."""
        self._crash_grace: float | None = None
        self._settled_run = 0

    # ------------------------------------------------------------ subclass hooks

    @abc.abstractmethod
    def _launch(self) -> None:
        """Start one run of the operator (return once it is launched, not ready)."""

    def _await_launch(self) -> None:
        """Wait, without the handle's lock and within a bound, until the run :meth:`_launch`
        started is under way (its stop signal can be given); kinds whose launch returns that
        far already need nothing."""

    @abc.abstractmethod
    def _halt(self, timeout: float) -> bool:
        """Ask the current run to stop and wait; False if it did not stop within ``timeout``."""

    @abc.abstractmethod
    def _kill(self) -> None:
        """End the current run abruptly, without letting it clean up."""

    @abc.abstractmethod
    def _is_ready(self) -> bool:
        """Whether the current run is ready now."""

    def _not_ready_reason(self) -> str:
        """Why the run is not ready yet (shown when ``wait_ready`` times out)."""
        return ""

    def _release(self) -> None:
        """Free what the handle holds beyond the run (called once, by :meth:`close`)."""

    def owns_finalizer(self, finalizer: str) -> bool:
        """Whether ``finalizer`` may be this operator's to remove (so that an object carrying it
        needs the operator running to go away). Kinds that cannot tell which is theirs (callable,
        subprocess) own every finalizer except those Kubernetes' own controllers handle
        (``orphan``, ``foregroundDeletion``, ``kubernetes``, ``*.kubernetes.io/*``,
        ``*.k8s.io/*``); kopf owns its ``settings.persistence.finalizer``."""
        domain, slash, _ = finalizer.partition("/")
        if not slash:
            return finalizer not in ("orphan", "foregroundDeletion", "kubernetes")
        return not (domain == "kubernetes.io" or domain.endswith((".kubernetes.io", "k8s.io")))

    def _settle(self, timeout: float | None) -> None:
        """Judge the work the run is still retrying now that the test ends (see :meth:`settle`)."""

    # ------------------------------------------------------------ state

    @property
    def alive(self) -> bool:
        """Whether the operator is running now."""
        return self._state == "running" and self._running()

    @property
    def state(self) -> str:
        """new, running, stopped, crashed or closed (a run that died is still "running" until stopped)."""
        return self._state

    @property
    def logs(self) -> str:
        """Everything the operator wrote, over all its runs."""
        return self.log.since(0)

    @property
    def run_logs(self) -> str:
        """What the current (or last) run wrote."""
        return self.log.since(self._run_mark)

    @property
    def log_path(self) -> Path:
        return self.log.path

    @property
    def api_cluster(self) -> Cluster:
        """The cluster as the operator reaches it: through its proxy (the default), or directly."""
        if self.proxy is not None:
            return self.proxy.cluster
        return self.cluster

    @property
    def traffic(self) -> Traffic:
        """Every API call of the operator (see ``ktest.proxy.traffic``); needs the proxy."""
        return self._require_proxy("traffic").traffic

    @property
    def faults(self) -> Faults:
        """``with op.faults.inject(rule):`` breaks some of its API calls for the block."""
        return self._require_proxy("faults").faults

    def _require_proxy(self, what: str) -> OperatorProxy:
        if self.proxy is None:
            reason = (
                "it was started with proxy=False or the setting ktest_operator_proxy is off"
                if not self.use_proxy
                else "it has not been started yet"
            )
            raise OperatorError(
                f"operator {self.name!r} has no {what}: it does not run behind ktest's API proxy "
                f"({reason}). Start it with proxy=True."
            )
        return self.proxy

    def expect_crash(
        self,
        match: str | re.Pattern[str] | None = None,
        *,
        timeout: float | None = None,
        aftermath: float = DEFAULT_CRASH_AFTERMATH,
    ) -> contextlib.AbstractContextManager[ExpectedCrash]:
        """The block makes the operator fail on purpose; assert that it does, and how.

        Inside the block the operator's failure does not fail ``eventually`` or the
        test. When the block ends, ktest waits up to ``timeout`` s (default: the
        ``eventually`` timeout) for the operator to fail (die, raise, log an error
        with ``fail_on_errors``, be refused by RBAC), checks that its error message
        contains ``match`` (a regular expression, searched), then forgets the error
        so the test goes on; ``restart()`` brings the operator back. The whole failure is
        expected: an ERROR record counts inside the block even with ``fail_on_errors=False``,
        and the ERROR records that follow it within ``aftermath`` seconds (kopf logs the
        handler's exception, then that the handler failed) are collected in
        ``crash.aftermath`` instead of failing the test. Raises ``AssertionError`` if it did
        not fail, or failed differently::

            with op.expect_crash(match=r"region 'mars-north-1' does not exist") as crash:
                cluster.apply(claim_in_an_unknown_region)
            assert not op.alive
            op.restart()
        """
        return self._crashes.expect(
            FailureProbe(
                self.name,
                lambda: self.error,
                self._wake,
                lambda: f"{self._state}, {'alive' if self.alive else 'not running'}",
                lambda: self.log.tail(start=self._run_mark),
                self.acknowledge_error,
            ),
            match,
            timeout,
            aftermath,
        )

    def settle(self, timeout: float | None = None) -> None:
        """The test is over: work the operator still retries by design fails it now.

        kopf: a handler whose ``kopf.TemporaryError`` retries have not succeeded yet gets up
        to ``timeout`` s (default: the handle's ``settle_timeout``) to succeed; one still failing
        then is recorded as the operator's error (reported by the next check, :meth:`close`, or
        ``operator_for_test``). Other kinds have nothing to judge. :meth:`close` calls it (once
        per run) while the operator runs; ``operator_for_test`` calls it right after the test.
        """
        with self._lock:
            if self._state != "running" or not self._running() or self._settled_run == self.starts:
                return
            self._settled_run = self.starts
        self._settle(timeout)

    # ------------------------------------------------------------ lifecycle

    def start(self, *, wait: bool = True) -> Self:
        """Start a run; with ``wait``, return once it is ready (raising ``OperatorError`` if not)."""
        with self._lock:
            if self._state == "closed":
                raise OperatorError(f"operator {self.name!r} was closed; start a new one instead.")
            if self._state == "running" and self._running():
                raise OperatorError(
                    f"operator {self.name!r} is already running; call restart() to run it again."
                )
            if self.starts == 0:
                self._register()
            if self.starts:
                self.log.write(f"---- ktest: restart #{self.starts} of {self.name} ----")
                if self.proxy is not None:
                    self.proxy.traffic.note(f"restart #{self.starts}")
            leftover = [thread.name for thread in self.leaked_threads if thread.is_alive()]
            if leftover:
                self.log.write(
                    f"---- ktest: threads of the crashed run still alive (blocked outside Python, "
                    f"OperatorCrash pending): {', '.join(leftover)} ----"
                )
            self._run_mark = self._scanned = self.log.mark()
            self._failure = None
            self._failure_raised = False
            self._crashes.new_run()
            self._wake.clear()
            self._state = "running"
            self.starts += 1
            try:
                self._launch()
            except BaseException:
                self._state = "stopped"
                raise
        # Outside the lock: the operator's thread logs while it gets going, and routing its
        # records may need the lock (kopf's first DEBUG record comes before it has started).
        try:
            self._await_launch()
        except BaseException:
            self._quietly_end_run()
            raise
        if wait:
            try:
                self.wait_ready()
            except BaseException:
                self._quietly_end_run()
                raise
        return self

    def wait_ready(self, timeout: float | None = None) -> Self:
        """Block until the operator is ready; ``OperatorError`` if it fails first or times out."""
        __tracebackhide__ = True
        timeout = self.ready_timeout if timeout is None else timeout
        deadline = time.monotonic() + timeout
        while True:
            failure = self.error
            if failure is not None:
                self._failure_raised = True
                raise OperatorError(f"operator {self.name!r} failed before it was ready.\n{failure}")
            if self._state != "running":
                raise OperatorError(
                    f"operator {self.name!r} is {self._state}, so it cannot become ready; "
                    "call start() or restart() first."
                )
            if self._is_ready():
                return self
            if time.monotonic() >= deadline:
                reason = self._not_ready_reason()
                raise self._make_error(
                    f"was not ready after {timeout:g} s" + (f": {reason}" if reason else ""),
                    hint="If it is just slow, pass a larger ready_timeout; otherwise its log above "
                    "says what it is waiting for.",
                )
            self._wake.wait(POLL)

    def stop(self, timeout: float | None = None) -> None:
        """Stop gracefully (stop signal, SIGTERM); an operator that ignores it is killed and
        ``OperatorError`` says so.

        What the operator logs while it stops (errors included) goes to its log but is
        not a failure: only dying before the stop request, or ignoring it, is.
        """
        timeout = self.stop_timeout if timeout is None else timeout
        if not self._end_run("stopped"):
            return
        # Not under the lock: the operator's thread may need it (to log) while it winds down.
        if self._halt(timeout):
            return
        self._kill()
        raise self._make_error(
            f"did not stop within {timeout:g} s of being asked to, so it was killed",
            hint="An operator must honour its stop signal (the stop event, SIGTERM) and return promptly.",
        )

    def crash(self, *, grace: float | None = None) -> None:
        """End the operator abruptly, like a killed pod: no cleanup, no finalizer handling.

        In-process operators: every thread of the run (those it started too) gets
        ``OperatorCrash`` at once and its stop signal is set; an event loop still winding down
        after ``grace`` seconds (default ``stop_timeout``) is stopped; threads blocked outside
        Python code that do not end are named in the log and in :attr:`leaked_threads`.
        Subprocesses get SIGKILL.
        """
        going = self._end_run("crashed")
        if going is None:
            return
        if going:
            self._crash_grace = grace
            try:
                self._kill()
            finally:
                self._crash_grace = None
        self.log.write(f"---- ktest: crashed {self.name} on purpose ----")

    def restart(self, *, wait: bool = True) -> Self:
        """Stop the current run if any, then start a new one (after ``crash()``: a fresh start)."""
        if self._state == "running":
            self.stop()
        return self.start(wait=wait)

    def close(self) -> None:
        """Stop, leave the test run, keep the log in memory.

        Namespaces it serves that are still being deleted in the background are
        waited for first, while the operator runs, so it can process the
        finalizers in them.
        Raises the operator's error if it had one that no check reported yet,
        so a failure is never lost because the operator was stopped first; work it
        still retried is judged first (:meth:`settle`).
        """
        self.settle()
        if self._state == "running" and self.wait_for_namespaces is not False:
            self.cluster.namespace_reaper().join(only=self._awaits_deletion_of)
        with self._lock:
            if self._state == "closed":
                return
            failure = self.unreported_error()
        try:
            self.stop()
        finally:
            with self._lock:
                self._state = "closed"
                cleanups, self._cleanups = self._cleanups, []
            for cleanup in cleanups:
                cleanup()
            self._release()
            self.log.close()
        if failure is not None:
            raise OperatorError(str(failure))

    def _awaits_deletion_of(self, namespace: str) -> bool:
        wanted = self.wait_for_namespaces
        if isinstance(wanted, bool):
            return wanted and self.serves_namespace(namespace)
        return namespace in wanted

    def serves_namespace(self, namespace: str) -> bool:
        """Whether this operator acts in ``namespace`` (cluster-wide: every one)."""
        return self.namespaces is None or any(
            fnmatch.fnmatchcase(namespace, pattern) for pattern in self.namespaces
        )

    def _is_new(self) -> bool:
        return self._state == "new"

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name!r} {self._state}{' alive' if self.alive else ''}>"

    # ------------------------------------------------------------ internals

    def _register(self) -> None:
        if self.use_proxy and self.proxy is None:
            from ktest.proxy import OperatorProxy

            self.proxy = OperatorProxy(self.cluster, self.name, http2=self.proxy_http2).start()
            self._cleanups.append(self.proxy.close)
        self._cleanups.append(run_context.add_health_check(self.check))
        detach = attach_reports(self.name, self.log, self.proxy)
        if detach is not None:
            self._cleanups.append(detach)

    def _end_run(self, new_state: str) -> bool | None:
        """Leave the running state (recording a death that came first): None if it was not
        running, else whether the run is still going and must be halted or killed by the
        caller, outside the lock."""
        with self._lock:
            if self._state != "running":
                return None
            self.error  # noqa: B018 - record a death that happened before the request
            self._state = new_state
            return self._running()

    def _quietly_end_run(self) -> None:
        if self._end_run("stopped") and not self._halt(self.stop_timeout):
            self._kill()


H = TypeVar("H", bound=OperatorHandle)


def launch(handle: H, wait: bool) -> H:
    """Start ``handle``; on failure leave nothing behind (no thread, process or health check)."""
    try:
        handle.start(wait=wait)
    except BaseException:
        with contextlib.suppress(OperatorError):  # the error being raised already says it
            handle.close()
        raise
    return handle


def launch_replicated(runner: str, replicas: object, make: Callable[[int | None], H], wait: bool) -> H | Any:
    """``replicas=1``: start ``make(None)`` as :func:`launch` does. More: the replica set of the
    replicas add-on (reached by name through :mod:`ktest.addon_registry`), replica ``i`` made by
    ``make(i)``, each behind its own proxy."""
    count = checked_replicas(runner, replicas)
    if count == 1:
        return launch(make(None), wait)
    return addon_registry.load("operators.replicas")(runner, make, count, wait)
