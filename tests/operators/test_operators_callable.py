"""Python callables as the operator under test: a sync function in a thread, an async one in its loop."""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from typing import Any

import pytest
from builders import configmap, configmap_ref
from messages import assert_says
from operator_helpers import wait_for
from sample_operators import mirror

from ktest.cluster import Cluster
from ktest.errors import OperatorError
from ktest.operators import OperatorContext, run_callable
from ktest.run_context import RunContext, check_health, run_context, use_context
from ktest.wait import eventually


def copied(admin: Cluster, ns: str, name: str, data: dict[str, str]) -> None:
    copy = admin.get(configmap_ref(name + mirror.SUFFIX, ns))
    assert copy["data"] == data
    assert copy["metadata"]["ownerReferences"][0]["name"] == name


@pytest.mark.parametrize("form", ["sync", "async"])
def test_callable_operator_starts_becomes_ready_and_reconciles(admin: Cluster, ns: str, form: str) -> None:
    fn = mirror.sync_operator if form == "sync" else mirror.async_mirror
    with run_callable(fn, admin) as op:
        assert op.alive
        assert op.is_async is (form == "async")
        admin.create(configmap("a", ns, {"k": "v"}, labels={mirror.LABEL: "true"}))
        eventually(lambda: copied(admin, ns, "a", {"k": "v"}))
    assert not op.alive
    assert op.state == "closed"
    assert op.error is None
    assert "stopped" in op.logs  # the operator honoured its stop signal and logged on the way out


@pytest.mark.slow
@pytest.mark.parametrize("form", ["sync", "async"])
def test_crash_then_restart_still_converges(admin: Cluster, ns: str, form: str) -> None:
    fn = mirror.sync_operator if form == "sync" else mirror.async_mirror
    with run_callable(fn, admin) as op:
        op.crash()
        assert not op.alive
        assert op.state == "crashed"
        assert op.error is None  # crashing on purpose is not a failure
        # Created while the operator is down: only the restarted run can copy it.
        admin.create(configmap("late", ns, {"x": "1"}, labels={mirror.LABEL: "true"}))
        assert admin.get_or_none(configmap_ref("late" + mirror.SUFFIX, ns)) is None
        op.restart()
        assert op.alive
        assert op.starts == 2
        eventually(lambda: copied(admin, ns, "late", {"x": "1"}))
    assert "crashed" in op.logs and "restart #1" in op.logs


def test_async_crash_cancels_without_running_the_graceful_path(admin: Cluster) -> None:
    events: list[str] = []

    async def operator(ctx: OperatorContext) -> None:
        ctx.ready()
        try:
            assert isinstance(ctx.stop, asyncio.Event)
            await ctx.stop.wait()
            events.append("graceful stop")
        except asyncio.CancelledError:
            events.append("cancelled")
            raise

    op = run_callable(operator, admin)
    op.crash()
    assert events == ["cancelled"]
    op.restart()
    op.stop()
    assert events == ["cancelled", "graceful stop"]
    op.close()


def test_sync_crash_interrupts_the_thread(admin: Cluster) -> None:
    reached: list[str] = []

    def busy(ctx: OperatorContext) -> None:
        ctx.ready()
        while True:  # ignores ctx.stop on purpose; crash() must still end it
            time.sleep(0.01)
            reached.append("loop")

    op = run_callable(busy, admin, stop_timeout=5)
    op.crash()
    assert not op.alive
    assert op.error is None
    op.close()


@pytest.mark.slow
def test_an_operator_that_raises_fails_the_next_health_check_with_its_traceback(admin: Cluster) -> None:
    def flaky(ctx: OperatorContext) -> None:
        ctx.ready()
        fail = threading.Event()
        fail.wait(0.2)
        raise KeyError("spec.replicas missing in Widget ns/w1")

    with run_context("test-scope"):
        op = run_callable(flaky, admin)
        wait_for(lambda: not op.alive, timeout=10)  # not eventually: its health check would raise
        with pytest.raises(OperatorError) as raised:
            check_health()
        assert_says(
            raised.value,
            "operator 'flaky' (callable) raised KeyError",
            "spec.replicas missing in Widget ns/w1",
            "Traceback (most recent call last)",
            "in flaky",
        )
        op.close()  # already reported: closing does not raise it again
    assert op.error is not None


@pytest.mark.slow
def test_failure_reaches_eventually_instead_of_a_timeout(admin: Cluster) -> None:
    def dies(ctx: OperatorContext) -> None:
        ctx.ready()
        raise RuntimeError("lost connection to the database")

    with run_context("test-scope"):
        op = run_callable(dies, admin, wait=False)
        started = time.monotonic()
        with pytest.raises(OperatorError, match="lost connection to the database"):
            eventually(lambda: False, timeout=30)
        assert time.monotonic() - started < 10  # failed on the operator's error, not the 30 s timeout
        op.close()


def test_returning_early_is_a_failure(admin: Cluster) -> None:
    def quits(ctx: OperatorContext) -> None:
        ctx.ready()

    op = run_callable(quits, admin, wait=False)
    op._run.thread.join(5)  # type: ignore[union-attr]
    assert op.error is not None
    assert "returned while the test was still running" in str(op.error)
    assert op.acknowledge_error() is not None
    op.close()


def test_failure_before_ready_is_raised_by_run_callable_and_leaves_nothing_running(admin: Cluster) -> None:
    def broken(ctx: OperatorContext) -> None:
        raise ValueError("missing OPERATOR_NAMESPACE")

    with run_context("test-scope") as scope:
        with pytest.raises(OperatorError) as raised:
            run_callable(broken, admin)
        assert not scope.health_checks  # the failed handle left the test run
    assert "failed before it was ready" in str(raised.value)
    assert "missing OPERATOR_NAMESPACE" in str(raised.value)
    assert not [t for t in threading.enumerate() if t.name == "ktest-operator-broken"]


def test_readiness_check_and_its_timeout_message(admin: Cluster, ns: str) -> None:
    state = {"ready": False}

    def operator(ctx: OperatorContext) -> None:
        ctx.stop.wait()  # type: ignore[call-arg]

    with pytest.raises(OperatorError) as raised:
        run_callable(operator, admin, ready=lambda: state["ready"], ready_timeout=0.3)
    assert "was not ready after 0.3 s: the readiness check kept returning False" in str(raised.value)

    with pytest.raises(OperatorError, match=r"never called ctx\.ready"):
        run_callable(operator, admin, ready_timeout=0.3)

    admin.create(configmap("flag", ns))
    with run_callable(operator, admin, ready=lambda: admin.exists(configmap_ref("flag", ns))) as op:
        assert op.alive


def test_stop_signal_ignored_is_reported(admin: Cluster) -> None:
    def stubborn(ctx: OperatorContext) -> None:
        ctx.ready()
        while True:
            time.sleep(0.01)

    op = run_callable(stubborn, admin, stop_timeout=0.5)
    with pytest.raises(OperatorError, match=r"did not stop within 0\.5 s"):
        op.stop()
    assert not op.alive  # it was crashed instead
    op.close()


def test_logs_are_captured_per_operator_and_errors_fail_it(admin: Cluster) -> None:
    other = logging.getLogger("somebody.else")

    def chatty(ctx: OperatorContext) -> None:
        log = logging.getLogger("chatty.operator")
        log.info("reconciling ns/a")
        ctx.ready()
        ctx.stop.wait()  # type: ignore[call-arg]
        log.warning("shutting down")

    op = run_callable(chatty, admin)
    other.warning("not from the operator")
    op.stop()
    assert "INFO    chatty.operator: reconciling ns/a" in op.logs
    assert "shutting down" in op.logs
    assert "not from the operator" not in op.logs
    op.close()

    def complains(ctx: OperatorContext) -> None:
        ctx.ready()
        logging.getLogger("complains").error("could not update status of ns/b: conflict")
        ctx.stop.wait()  # type: ignore[call-arg]

    with run_callable(complains, admin, fail_on_errors=False) as lenient:
        eventually(lambda: "conflict" in lenient.logs)
        assert lenient.error is None
    strict = run_callable(complains, admin, wait=False)
    wait_for(lambda: strict.error is not None)
    assert "logged an error" in str(strict.error)
    assert "could not update status of ns/b: conflict" in str(strict.error)
    with pytest.raises(OperatorError, match="could not update status"):
        strict.close()  # a failure nobody reported yet is raised when the operator is closed


def test_concurrent_operators_keep_separate_logs(admin: Cluster) -> None:
    root_level = logging.getLogger().level

    def named(ctx: OperatorContext) -> None:
        log = logging.getLogger("shared.logger")
        ctx.ready()
        while not ctx.stop.is_set():
            log.info("line from %s", ctx.name)
            ctx.stop.wait(0.01)  # type: ignore[call-arg]

    with run_callable(named, admin, name="left") as left, run_callable(named, admin, name="right") as right:
        wait_for(lambda: "line from left" in left.logs and "line from right" in right.logs)
    assert "line from right" not in left.logs
    assert "line from left" not in right.logs
    assert logging.getLogger().level == root_level  # the level lowered for capture is restored


def test_session_scoped_operator_attaches_logs_during_each_test(admin: Cluster) -> None:
    def operator(ctx: OperatorContext) -> None:
        ctx.ready()
        ctx.stop.wait()  # type: ignore[call-arg]

    with use_context(RunContext("session")) as session:  # a scope wider than a test
        op = run_callable(operator, admin, proxy=False)  # the proxy's API calls section: tests/proxy
        assert session.test_start_hooks  # registered for the tests to come
        op.log.write("before the test")
        with run_context("test", test=True) as test:
            op.log.write("during the test")
            ((title, provider),) = test.sections
            assert "during this test" in title
            assert provider() == "during the test\n"
        op.close()
        assert not session.test_start_hooks and not session.health_checks


def test_per_test_operator_attaches_its_whole_log(admin: Cluster) -> None:
    def operator(ctx: OperatorContext) -> None:
        ctx.ready()
        ctx.stop.wait()  # type: ignore[call-arg]

    with use_context(RunContext("session")), run_context("test", test=True) as test:
        with run_callable(operator, admin, name="per-test", proxy=False) as op:
            op.log.write("hello")
        ((title, provider),) = test.sections
        assert title == "operator per-test log"
        assert "hello" in provider()  # still readable after the operator was closed


def test_bad_arguments(admin: Cluster) -> None:
    with pytest.raises(OperatorError, match="needs a function"):
        run_callable("not a function", admin)  # type: ignore[arg-type]
    with run_callable(_idle, admin) as op, pytest.raises(OperatorError, match="already running"):
        op.start()


def _idle(ctx: Any) -> None:
    ctx.ready()
    ctx.stop.wait()
