"""Conflicts: optimistic concurrency, and operators that survive other writers.

Every update carries ``metadata.resourceVersion``; when the object changed since,
the API server answers 409 Conflict. That is not an error for a controller: it
means someone wrote in between, so it drops the attempt and reconciles again on
fresh state (design document 004). :func:`stale_copy` and
:func:`assert_conflict_on_stale_update` check the first half; a
:class:`ConcurrentWriter` keeps writing the object while the operator works, and
:func:`assert_survives_concurrent_writes` checks the second half.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import secrets
import threading
import time
import warnings
from collections.abc import Callable
from types import TracebackType
from typing import TYPE_CHECKING, Any

from kubernetes.client.exceptions import ApiException

from ktest.assertions.conflict_injection import ConflictInjector, exempt
from ktest.assertions.objects import (
    describe,
    duration_or_default,
    failure,
    field,
    read_existing,
    timeout_or_default,
    uid_of,
)
from ktest.assertions.waiting import until
from ktest.base.bounded import join_thread
from ktest.cluster.refs import RefLike, as_ref
from ktest.errors import ClusterError, KtestError
from ktest.run_context import check_health
from ktest.wait.transient import describe as describe_error

if TYPE_CHECKING:
    from ktest.cluster.cluster import Cluster

RULE_CONFLICT = (
    "optimistic concurrency: an update carrying metadata.resourceVersion is rejected with 409 "
    "Conflict when the object changed since that version; a write path that drops resourceVersion "
    "(or retries blindly, or force-applies) silently overwrites what others wrote in between"
)
RULE_SURVIVE = (
    "a 409 Conflict is not an error for a controller: someone wrote in between, so it drops the "
    "attempt and reconciles again on fresh state; it must neither crash nor give up"
)
STALE_ANNOTATION = "ktest/stale-copy"
PROBE_ANNOTATION = "ktest/stale-write"
WRITER_ANNOTATION = "ktest/concurrent-writer"
WRITER_STOP_TIMEOUT = 60.0
"""Seconds a concurrent writer may take to finish its write in flight once told to stop."""


def stale_copy(cluster: Cluster, obj: RefLike) -> dict[str, Any]:
    """A copy of ``obj`` whose ``metadata.resourceVersion`` is out of date.

    The object is read, copied, then changed once (annotation ``ktest/stale-copy``)
    so that the copy is exactly one write behind: any update sent with it must get 409.
    """
    ref = as_ref(obj)
    current = read_existing(cluster, ref, purpose="hand out a stale copy of it")
    stale = copy.deepcopy(current)
    cluster.patch(ref, {"metadata": {"annotations": {STALE_ANNOTATION: secrets.token_hex(4)}}})
    return stale


def assert_conflict_on_stale_update(
    cluster: Cluster,
    stale: dict[str, Any],
    *,
    write: Callable[[dict[str, Any]], object] | None = None,
) -> ApiException:
    """Writing ``stale`` (see :func:`stale_copy`) fails with 409 Conflict; returns the error.

    ``write`` is the write path under test (for example the operator's own update
    helper); it gets a copy of ``stale`` with one extra annotation, so that an update
    wrongly accepted is visible. Default: ``cluster.update`` (a plain PUT).
    """
    __tracebackhide__ = True
    ref = as_ref(stale)
    name = describe(ref, uid_of(stale))
    token = secrets.token_hex(4)
    attempt = copy.deepcopy(stale)
    metadata = attempt.setdefault("metadata", {})
    metadata["annotations"] = {**(metadata.get("annotations") or {}), PROBE_ANNOTATION: token}
    stale_version = field(stale, "metadata.resourceVersion")
    send = write if write is not None else cluster.update
    try:
        send(attempt)
    except ApiException as error:
        if error.status == 409:
            return error
        raise AssertionError(failure(
            f"the update of {name} with stale resourceVersion {stale_version} was rejected, "
            f"but not with 409 Conflict", RULE_CONFLICT, describe_error(error),
        )) from error
    after = cluster.get_or_none(ref)
    annotations = ((after or {}).get("metadata") or {}).get("annotations") or {}
    accepted = annotations.get(PROBE_ANNOTATION) == token
    observed = [f"the stale copy was at resourceVersion {stale_version}; after the write the object "
                f"is at {field(after, 'metadata.resourceVersion')}"]
    if accepted:
        observed.append("the write was accepted: the object now carries the stale copy's content "
                        f"(annotation {PROBE_ANNOTATION}={token}), overwriting the newer changes; the "
                        "write path dropped metadata.resourceVersion, re-read the object before "
                        "writing, or force-applied")
    else:
        observed.append("the write returned without error but the object did not change: a 409 "
                        "was swallowed, so the caller believes its write happened")
    raise AssertionError(failure(
        f"a write of {name} from a stale copy did not get 409 Conflict", RULE_CONFLICT, observed,
    ))


class ConcurrentWriter:
    """Keeps writing an object from a thread, to provoke conflicts in the operator.

    Each write bumps annotation ``ktest/concurrent-writer`` (``mode="patch"``: a merge
    patch, always accepted; ``mode="update"``: read then PUT, which may itself get
    409). Use as a context manager (sync or async); it stops on exit, or by itself
    after ``duration`` seconds. Counts are in ``writes``, ``conflicts``, ``missing``
    (404: the object was gone); any other error stops the writer and is raised as
    ClusterError when the ``with`` block ends.
    """

    def __init__(
        self,
        cluster: Cluster,
        obj: RefLike,
        *,
        interval: float = 0.05,
        duration: float | None = None,
        mode: str = "patch",
        annotation: str = WRITER_ANNOTATION,
    ) -> None:
        if mode not in ("patch", "update"):
            raise ValueError(f"ConcurrentWriter mode must be 'patch' or 'update', not {mode!r}")
        self.cluster = cluster
        self.ref = as_ref(obj)
        self.interval = interval
        self.duration = duration
        self.mode = mode
        self.annotation = annotation
        self.writes = 0
        self.conflicts = 0
        self.missing = 0
        self.errors: list[str] = []
        self.seconds = 0.0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._started = 0.0
        self.injector: ConflictInjector | None = None
        """Set by assert_survives_concurrent_writes: the operator's own writes it made conflict."""

    # -- lifecycle --------------------------------------------------------------------

    def start(self) -> ConcurrentWriter:
        if self._thread is not None:
            raise RuntimeError("this ConcurrentWriter was already started; make a new one")
        self._started = time.monotonic()
        self._thread = threading.Thread(target=self._run, name=f"ktest-writer {self.ref}", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop writing and wait for the thread (idempotent)."""
        self._stop.set()
        if self._thread is not None:
            what = f"the concurrent writer of {self.ref}"
            join_thread(self._thread, WRITER_STOP_TIMEOUT, what, ClusterError)

    def join(self) -> None:
        """Wait until the writer ends by itself (after ``duration``, or on an error)."""
        if self.duration is None:
            raise RuntimeError("join() needs a ConcurrentWriter with a duration; use stop() otherwise")
        if self._thread is not None:
            join_thread(self._thread, self.duration + WRITER_STOP_TIMEOUT,
                        f"the concurrent writer of {self.ref} (duration {self.duration:g} s)", ClusterError)

    def raise_errors(self) -> None:
        """ClusterError if the writer hit errors other than 409/404."""
        if self.errors:
            raise ClusterError(
                f"the concurrent writer of {self.ref} stopped on an error after {self.writes} writes: "
                + "; ".join(self.errors)
                + ". It needs get/update/patch rights on the object and a valid annotation key."
            )

    def __enter__(self) -> ConcurrentWriter:
        return self.start()

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        self.stop()
        if kind is None:
            self.raise_errors()

    async def __aenter__(self) -> ConcurrentWriter:
        return self.start()

    async def __aexit__(self, kind: type[BaseException] | None, error: BaseException | None,
                        trace: TracebackType | None) -> None:
        await asyncio.to_thread(self.stop)
        if kind is None:
            self.raise_errors()

    def summary(self) -> str:
        return (f"{self.writes} writes to {self.ref} in {self.seconds:.2f}s ({self.mode}; "
                f"{self.conflicts} conflicts, {self.missing} not found, {len(self.errors)} errors)")

    def lines(self) -> list[str]:
        """The summary, then what the conflict injector saw (if one ran with this writer)."""
        return [self.summary(), *(self.injector.lines() if self.injector is not None else [])]

    def __repr__(self) -> str:
        return f"ConcurrentWriter({self.summary()})"

    # -- the thread -------------------------------------------------------------------

    def _run(self) -> None:
        deadline = None if self.duration is None else self._started + self.duration
        try:
            while not self._stop.is_set() and (deadline is None or time.monotonic() < deadline):
                try:
                    self._write_once()
                except ApiException as error:
                    if error.status == 409:
                        self.conflicts += 1
                    elif error.status == 404:
                        self.missing += 1
                    else:
                        self.errors.append(describe_error(error))
                        return
                except Exception as error:  # surfaced by raise_errors(), never lost
                    self.errors.append(describe_error(error))
                    return
                pause = self.interval
                if deadline is not None:
                    pause = min(pause, max(0.0, deadline - time.monotonic()))
                self._stop.wait(pause)
        finally:
            self.seconds = time.monotonic() - self._started

    def _write_once(self) -> None:
        value = str(self.writes + 1)
        if self.mode == "patch":
            self.cluster.patch(self.ref, {"metadata": {"annotations": {self.annotation: value}}})
        else:
            current = self.cluster.get(self.ref)
            annotations = dict(current["metadata"].get("annotations") or {})
            annotations[self.annotation] = value
            current["metadata"]["annotations"] = annotations
            self.cluster.update(current)
        self.writes += 1


def assert_survives_concurrent_writes(
    cluster: Cluster,
    obj: RefLike,
    converged: Callable[[], object],
    *,
    duration: float | None = None,
    timeout: float | None = None,
    interval: float = 0.05,
    mode: str = "patch",
    min_writes: int = 1,
    conflicts: int = 3,
    trigger: Callable[[], object] | None = None,
    allow_no_conflict: bool = False,
) -> ConcurrentWriter:
    """The operator survives others writing ``obj`` while it reconciles it.

    Two sources of conflicts, together: a :class:`ConcurrentWriter` writes the object for
    ``duration`` seconds (which also makes the operator reconcile), and a
    :class:`~ktest.assertions.conflict_injection.ConflictInjector` makes the operator's own
    next ``conflicts`` updates of the object conflict for sure, by slipping a write in right
    before each of them (in-process operators; set ``conflicts=0`` to rely on timing alone).
    ``trigger`` (called once both are running, e.g. a spec change) makes the operator update
    the object then: an update it made before the call cannot be made to conflict. Then
    ``converged`` (a check as for ``eventually``) must pass within ``timeout`` and every
    registered operator health check must pass. Returns the writer; ``writer.injector`` says
    which of the operator's writes got 409.

    An operator that never met a 409 (it did not write the object while conflicts were armed,
    or its writes carry no resourceVersion) showed nothing about conflicts: that fails, saying
    why. ``allow_no_conflict=True`` turns the failure into a ``ConflictNotMetWarning``, for an
    operator that cannot conflict by design; with ``conflicts=0`` nothing is checked.
    """
    __tracebackhide__ = True
    ref = as_ref(obj)
    window = duration_or_default(duration)
    wait = timeout_or_default(timeout)
    injector = ConflictInjector(cluster, ref, conflicts=conflicts) if conflicts else None
    with injector if injector is not None else contextlib.nullcontext():
        with ConcurrentWriter(cluster, ref, interval=interval, duration=window, mode=mode) as writer:
            writer.injector = injector
            if trigger is not None:
                with exempt():  # the test's writes, even where an async trigger runs them
                    trigger()
            writer.join()
        if writer.writes < min_writes:
            raise AssertionError(
                failure(
                    f"the concurrent writer made only {writer.writes} writes to {describe(ref)}",
                    RULE_SURVIVE,
                    [*writer.lines(), "nothing was shown: lower interval= or raise duration="],
                )
            )
        _healthy(ref, writer, "during the concurrent writes")
        try:
            until(
                converged,
                timeout=wait,
                description=f"{ref} converged after concurrent writes",
                users_check=True,
                explain=lambda report: failure(
                    f"{describe(ref)} did not converge within {wait:g}s after concurrent writes"
                    + _conflict_note(writer),
                    RULE_SURVIVE,
                    [*writer.lines(), report],
                ),
            )
        except KtestError as error:  # an operator health check failed while waiting
            _unhealthy(ref, writer, "after the concurrent writes", error)
    _healthy(ref, writer, "after converging")
    if injector is not None and not injector.provoked:
        _conflict_not_met(ref, writer, injector, allow_no_conflict)
    return writer


def _conflict_not_met(ref: Any, writer: ConcurrentWriter, injector: ConflictInjector, allowed: bool) -> None:
    """Fail (or, when ``allowed``, warn): the operator converged but never met a 409."""
    __tracebackhide__ = True
    if allowed:
        warnings.warn(ConflictNotMetWarning(f"{describe(ref)}: {injector.summary()}"), stacklevel=3)
        return
    raise AssertionError(
        failure(
            f"the operator never met a 409 Conflict on {describe(ref)}, so surviving one was not shown",
            RULE_SURVIVE,
            [
                *writer.lines(),
                "Make it update the object while the writes run (trigger=, e.g. a spec change), or "
                "write with resourceVersion; for an operator that cannot conflict by design (merge "
                "patches, server-side apply), pass allow_no_conflict=True, or assert what it "
                "guarantees instead.",
            ],
        )
    )


class ConflictNotMetWarning(UserWarning):
    """assert_survives_concurrent_writes(allow_no_conflict=True) passed, but the operator never
    got a 409 Conflict."""


def _conflict_note(writer: ConcurrentWriter) -> str:
    injector = writer.injector
    if injector is None or not injector.provoked:
        return ""
    return f" (its update got 409 Conflict {injector.provoked}x)"


def _healthy(ref: Any, writer: ConcurrentWriter, when: str) -> None:
    try:
        check_health()
    except Exception as error:
        _unhealthy(ref, writer, when, error)


def _unhealthy(ref: Any, writer: ConcurrentWriter, when: str, error: BaseException) -> None:
    __tracebackhide__ = True
    raise AssertionError(
        failure(
            f"the operator failed {when} on {describe(ref)}" + _conflict_note(writer),
            RULE_SURVIVE,
            [*writer.lines(), f"health check: {describe_error(error)}"],
        )
    ) from error
