"""Stopping and crashing in-process operators the way a pod stops or dies, and their output.

- ``stop()`` never holds the handle's lock while it waits, so an operator that logs
  (even an ERROR) while it winds down stops promptly and is not blamed for a crash;
- ``crash()`` ends every thread of the run, signals its stop event, reports threads
  that cannot be ended, and a restarted operator never runs beside the crashed one;
- ``print()`` from the operator's threads lands in its log, not in the test's output.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import sys
import threading
import time
from collections.abc import Callable

import pytest
from builders import configmap, configmap_ref
from operator_helpers import wait_for

from ktest.cluster import Cluster
from ktest.errors import OperatorError
from ktest.operators import OperatorContext, run_callable
from ktest.run_context import check_health, run_context
from ktest.wait import eventually

log = logging.getLogger("sample_operators.lifecycle")


def test_an_error_logged_while_stopping_neither_stalls_nor_counts_as_a_crash(admin: Cluster) -> None:
    def operator(ctx: OperatorContext) -> None:
        ctx.ready()
        ctx.stop.wait()  # type: ignore[call-arg]
        log.error("lost the connection while shutting down")  # a real operator does this
        log.info("stopped")

    op = run_callable(operator, admin, stop_timeout=3)
    op.stop()  # before the fix: blocked on the handle's lock, killed after 3 s, OperatorError
    assert op.state == "stopped"
    assert op.error is None
    assert "lost the connection while shutting down" in op.logs
    assert "stopped" in op.logs
    op.close()


class Workers:
    """Threads an operator starts for itself, as informers and work queues do."""

    def __init__(self, generation: int) -> None:
        self.generation = generation
        self.threads: list[threading.Thread] = []
        self.running: set[int] = set()
        self.ticks = 0

    def start(self, ctx: OperatorContext, count: int = 2) -> None:
        for number in range(count):
            thread = threading.Thread(target=self.work, name=f"lifecycle-worker-{self.generation}-{number}")
            thread.daemon = True
            self.threads.append(thread)
            thread.start()

    def work(self) -> None:
        self.running.add(self.generation)
        try:
            while True:  # ignores the stop event: only a crash ends it
                self.ticks += 1
                time.sleep(0.005)
        finally:
            self.running.discard(self.generation)


def test_crash_ends_the_operators_own_threads_and_signals_stop(admin: Cluster) -> None:
    generations: list[Workers] = []
    contexts: list[OperatorContext] = []

    def operator(ctx: OperatorContext) -> None:
        workers = Workers(len(generations) + 1)
        generations.append(workers)
        contexts.append(ctx)
        workers.start(ctx)
        ctx.ready()
        ctx.stop.wait()  # type: ignore[call-arg]

    op = run_callable(operator, admin, stop_timeout=5)
    first = generations[0]
    op.crash()
    assert contexts[0].stop.is_set(), "crash() must set the crashed run's stop event"
    assert [t.name for t in first.threads if t.is_alive()] == [], "the crashed run's threads still run"
    assert op.leaked_threads == []
    ticks = first.ticks
    op.restart()
    assert len(generations) == 2
    assert first.ticks == ticks  # the first generation does nothing any more
    assert 1 not in first.running
    op.stop()
    op.close()


def test_threads_that_swallow_the_crash_are_reported_as_leaked(admin: Cluster) -> None:
    release = threading.Event()

    def stubborn() -> None:
        while not release.is_set():
            with contextlib.suppress(BaseException):  # the bad practice under test
                time.sleep(0.01)

    def operator(ctx: OperatorContext) -> None:
        threading.Thread(target=stubborn, name="stubborn-worker", daemon=True).start()
        ctx.ready()
        ctx.stop.wait()  # type: ignore[call-arg]

    op = run_callable(operator, admin, stop_timeout=0.5)
    try:
        op.crash()
        assert [t.name for t in op.leaked_threads] == ["stubborn-worker"]
        assert "thread(s) of operator still run 0.5 s after crash(): stubborn-worker" in op.logs
    finally:
        release.set()
        for thread in op.leaked_threads:
            thread.join(5)
        op.close()


def test_print_from_the_operator_and_its_threads_goes_to_its_log(
    admin: Cluster, capsys: pytest.CaptureFixture[str]
) -> None:
    def worker() -> None:
        print("worker says hello", file=sys.stderr)

    def operator(ctx: OperatorContext) -> None:
        print("operator", "starting", sep=" ")
        thread = threading.Thread(target=worker, name="printer")
        thread.start()
        thread.join()
        ctx.ready()
        ctx.stop.wait()  # type: ignore[call-arg]

    with run_callable(operator, admin) as op:
        print("the test's own output")
    assert "print(stdout): operator starting" in op.logs
    assert "print(stderr): worker says hello" in op.logs
    captured = capsys.readouterr()
    assert "the test's own output" in captured.out
    assert "operator starting" not in captured.out and "worker says hello" not in captured.err


def crashing_on(trigger: threading.Event, error: Exception) -> Callable[[OperatorContext], None]:
    """An operator that runs until stopped and raises ``error`` as soon as ``trigger`` is set."""

    def operator(ctx: OperatorContext) -> None:
        ctx.ready()
        while not ctx.stop.is_set():
            if trigger.wait(0.01):
                raise error

    return operator


def test_expect_crash_waits_for_the_failure_and_checks_its_message(admin: Cluster) -> None:
    trigger = threading.Event()
    operator = crashing_on(trigger, RuntimeError("region 'mars-north-1' does not exist"))
    with run_context("expected crash", test=True), run_callable(operator, admin) as op:
        with op.expect_crash(match=r"region '\S+' does not exist") as crash:
            trigger.set()
            eventually(lambda: not op.alive)  # the health check does not fail inside the block
        assert crash.error is not None and "RuntimeError" in crash.message
        assert op.error is None  # acknowledged: the test goes on
        check_health()
        trigger.clear()
        op.restart()
        assert op.alive


def test_expect_crash_fails_when_the_operator_stays_healthy_or_fails_differently(admin: Cluster) -> None:
    trigger = threading.Event()
    operator = crashing_on(trigger, ValueError("something else entirely"))
    healthy = r"expected to fail with an error matching /boom/, but it is still healthy \(running, alive\)"
    different = "failed, but not as expected: /boom/ is not in its error"
    with run_callable(operator, admin) as op:
        with pytest.raises(AssertionError, match=healthy), op.expect_crash(match="boom", timeout=0.2):
            pass
        with pytest.raises(AssertionError, match=different), op.expect_crash(match="boom"):
            trigger.set()
        assert op.error is not None  # a crash that was not the expected one is not forgotten
        op.acknowledge_error()


def test_an_in_process_operator_writes_under_its_own_field_manager(admin: Cluster, ns: str) -> None:
    def operator(ctx: OperatorContext) -> None:
        ctx.cluster.create(configmap("written-by-operator", ns, {"by": "operator"}))
        ctx.ready()
        ctx.stop.wait()  # type: ignore[call-arg]

    with run_callable(operator, admin, name="lifecycle-writer") as op:
        assert op.field_manager == "lifecycle-writer"
    admin.patch(configmap_ref("written-by-operator", ns), {"data": {"also": "test"}})
    entries = admin.get(configmap_ref("written-by-operator", ns))["metadata"]["managedFields"]
    assert sorted(e["manager"] for e in entries) == ["ktest", "lifecycle-writer"]


def test_run_callable_takes_namespaces_and_waits_only_for_those(admin: Cluster, ns: str) -> None:
    seen: list[list[str] | None] = []

    def operator(ctx: OperatorContext) -> None:
        seen.append(ctx.namespaces)
        ctx.ready()
        ctx.stop.wait()  # type: ignore[call-arg]

    other = f"{ns}-other"
    admin.create_namespace(other)
    held = admin.create(
        {
            **configmap("held", other),
            "metadata": {"name": "held", "namespace": other, "finalizers": ["ktest.test/hold"]},
        }
    )
    try:
        with run_callable(operator, admin, namespaces=[ns, "never-*"]) as op:
            assert op.namespaces == [ns, "never-*"] and seen == [[ns, "never-*"]]
            assert op.serves_namespace(ns) and op.serves_namespace("never-x")
            assert not op.serves_namespace(other)
            admin.namespace_reaper().submit(other)  # cannot finish while "held" keeps its finalizer
        # close() did not wait for a namespace the operator does not serve
        assert admin.get_or_none(("v1", "Namespace", other)) is not None
    finally:
        admin.patch(held, {"metadata": {"finalizers": None}})
    with pytest.raises(OperatorError, match="run_callable: namespaces must be a list"):
        run_callable(operator, admin, namespaces=ns)  # type: ignore[arg-type]


def test_an_operator_killed_by_an_api_error_is_reported_readably(admin: Cluster, ns: str) -> None:
    stale = admin.create(configmap("contested", ns))
    admin.patch(stale, {"data": {"moved": "on"}})

    def operator(ctx: OperatorContext) -> None:
        import kubernetes

        api = kubernetes.client.CoreV1Api(
            kubernetes.config.new_client_from_config(config_file=str(ctx.kubeconfig), persist_config=False)
        )
        ctx.ready()
        api.replace_namespaced_config_map("contested", ns, stale)  # stale resourceVersion: 409

    op = run_callable(operator, admin, wait=False)
    try:
        wait_for(lambda: op.error is not None)
        message = str(op.error)
        assert re.search(
            r"raised \w*Exception: 409 Conflict: Operation cannot be fulfilled on configmaps", message
        )
        assert "HTTP response headers" not in message and "Audit-Id" not in message
    finally:
        op.acknowledge_error()
        op.close()


def test_a_crashed_runs_thread_logging_after_the_restart_does_not_fail_the_new_run(admin: Cluster) -> None:
    late = threading.Event()
    done = threading.Event()

    def old_worker() -> None:
        try:
            while True:
                time.sleep(0.01)
        except BaseException:  # catches the crash (as concurrent.futures' workers do) and logs later
            late.wait(10)
            log.critical("Exception in worker", exc_info=True)
            log.error("the old run's thread still talks after the restart")
            done.set()

    def operator(ctx: OperatorContext) -> None:
        if not done.is_set() and not late.is_set():
            threading.Thread(target=old_worker, name="old-worker", daemon=True).start()
        ctx.ready()
        ctx.stop.wait()  # type: ignore[call-arg]

    with run_context("late log", test=True), run_callable(operator, admin, stop_timeout=0.5) as op:
        op.crash()
        op.restart()
        late.set()
        assert done.wait(10)
        assert op.error is None  # the old run's record is in the log, not a failure of the new run
        check_health()
    assert "ended by crash()" in op.logs
    assert "the old run's thread still talks after the restart" in op.logs


def test_a_crashed_runs_cut_off_coroutines_are_closed_with_its_loop() -> None:
    """A crashed run's loop is closed without running its cancelled tasks (they may hang); their
    coroutines are closed there and then, in the run's thread, not by some later garbage
    collection in another test (where kopf's clean-up logged tracebacks in the middle of
    pytest's own ``ast.parse`` and broke its report)."""
    from ktest.operators.threads import close_loop

    loop = asyncio.new_event_loop()
    cleaned_up_in: list[str] = []

    async def handler() -> None:
        try:
            await asyncio.sleep(120)
        finally:
            cleaned_up_in.append(threading.current_thread().name)

    task = loop.create_task(handler())
    loop.run_until_complete(asyncio.sleep(0))  # the handler now awaits
    close_loop(loop, wait=False)
    assert cleaned_up_in == [threading.current_thread().name]
    assert task.get_coro().cr_frame is None  # type: ignore[union-attr]
    assert loop.is_closed()


def test_crash_with_a_grace_stops_a_loop_still_winding_down(admin: Cluster) -> None:
    """An async operator whose cancelled task keeps working (kopf retrying its farewell to its
    peers) is cut short after ``grace`` s, not after ``stop_timeout``: a killed pod does not wait."""
    farewell_started = threading.Event()

    async def lingering(ctx: OperatorContext) -> None:
        ctx.ready()
        try:
            await asyncio.Event().wait()
        finally:
            farewell_started.set()
            await asyncio.shield(asyncio.sleep(60))  # a farewell that outlives any stop_timeout

    op = run_callable(lingering, admin, stop_timeout=30)
    try:
        started = time.monotonic()
        op.crash(grace=0.2)
        took = time.monotonic() - started
        assert farewell_started.is_set()
        assert took < op.stop_timeout / 3  # the farewell was cut short, not waited for
        assert op.leaked_threads == [] and not op.alive
    finally:
        op.close()
