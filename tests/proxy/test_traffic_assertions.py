"""Each traffic assertion passes on a correct operator and fails, naming the symptom, on a wrong one.

The operator is ``mirror_operator`` (it copies labelled ConfigMaps), run with
``run_callable`` behind the proxy, with one mistake switched on at a time.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from mirror_operator import Behaviour, mirror_operator

from ktest import faults
from ktest.assertions.traffic import (
    assert_backs_off,
    assert_no_hot_loop,
    assert_recovers,
    assert_relists_after_410,
)
from ktest.cluster import Cluster
from ktest.operators import OperatorHandle, run_callable
from ktest.wait import eventually

OperatorFactory = Callable[..., OperatorHandle]


@pytest.fixture
def start(admin: Cluster, ns: str) -> Iterator[OperatorFactory]:
    started: list[OperatorHandle] = []

    def start_operator(**behaviour: Any) -> OperatorHandle:
        handle = run_callable(
            mirror_operator(Behaviour(**behaviour)), admin, namespaces=[ns], name="mirror", proxy=True
        )
        started.append(handle)
        return handle

    yield start_operator
    for handle in started:
        handle.close()


def source(name: str = "source", value: str = "1") -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "labels": {"mirror": "yes"}}, "data": {"value": value}}


def copied(admin: Cluster, ns: str, value: str, name: str = "source") -> Callable[[], None]:
    def check() -> None:
        copy = admin.get(("v1", "ConfigMap", f"{name}-copy", ns))
        assert copy["data"] == {"value": value}

    return check


# ------------------------------------------------------------------ assert_no_hot_loop


def test_no_hot_loop_passes_once_converged(start: OperatorFactory, admin: Cluster, ns: str) -> None:
    op = start()
    admin.create(source(), namespace=ns)
    eventually(copied(admin, ns, "1"))
    counts = assert_no_hot_loop(op, window=0.5)
    assert counts.per_object == {}


def test_no_hot_loop_counts_the_operator_s_own_writes(
    start: OperatorFactory, admin: Cluster, ns: str
) -> None:
    op = start(hot=True)
    admin.create(source(), namespace=ns)
    eventually(copied(admin, ns, "1"))
    with pytest.raises(AssertionError) as caught:
        assert_no_hot_loop(op, ("v1", "ConfigMap", "source-copy", ns), window=0.5)
    message = str(caught.value)
    assert message.startswith(f"operator 'mirror' is in a hot loop: it wrote configmaps {ns}/source-copy ")
    assert "at most 2 allowed" in message and "writes of configmaps" in message and "update x" in message


def test_no_hot_loop_does_not_count_the_events_an_operator_reports(admin: Cluster, ns: str) -> None:
    """kopf posts an Event for every handler outcome; Events are reports, not rewrites of an object."""
    import threading

    from ktest.operators import OperatorContext

    go = threading.Event()
    regarding = {"apiVersion": "v1", "kind": "ConfigMap", "name": "source", "namespace": ns}

    def events(number: int) -> list[dict[str, Any]]:
        meta = {"generateName": "report-", "namespace": ns}
        return [
            {"apiVersion": "v1", "kind": "Event", "metadata": dict(meta), "type": "Normal",
             "reason": "Reconciled", "message": f"pass {number}", "involvedObject": regarding},
            {"apiVersion": "events.k8s.io/v1", "kind": "Event", "metadata": dict(meta), "type": "Normal",
             "reason": "Reconciled", "note": f"pass {number}", "action": "Reconcile",
             "reportingController": "ktest.dev/reporter", "reportingInstance": "reporter-1",
             "regarding": regarding, "eventTime": "2026-12-01T00:00:00.000000Z"},
        ]

    def reporter(ctx: OperatorContext) -> None:
        ctx.ready()
        go.wait()
        for number in range(6):  # as a busy kopf operator posts them, in both Event APIs
            for event in events(number):
                ctx.cluster.create(event)
        ctx.stop.wait()

    with run_callable(reporter, admin, namespaces=[ns], name="reporter", proxy=True) as op:
        mark = op.traffic.mark()
        go.set()
        counts = assert_no_hot_loop(op, window=1.5)
        op.check()  # it posted them all without failing
        assert counts.per_object == {}
        groups = [call.request.group for call in op.traffic.writes(resource="events", since=mark)]
        assert sorted(groups) == [""] * 6 + ["events.k8s.io"] * 6  # all twelve in the window


# ------------------------------------------------------------------ assert_recovers


def test_recovers_from_dropped_watches(start: OperatorFactory, admin: Cluster, ns: str) -> None:
    op = start()
    recovery = assert_recovers(
        op, faults.close_watches("configmaps"), then=copied(admin, ns, "1"),
        action=lambda: admin.create(source(), namespace=ns), duration=0.2,
    )
    assert "close_watches(configmaps): matched 1, acted 1" in recovery.faults


def test_recovers_fails_when_a_dropped_watch_is_never_reopened(
    start: OperatorFactory, admin: Cluster, ns: str
) -> None:
    op = start(rewatch=False)
    with pytest.raises(AssertionError) as caught:
        assert_recovers(
            op, faults.close_watches("configmaps"), then=copied(admin, ns, "1"),
            action=lambda: admin.create(source(), namespace=ns), duration=0.2, timeout=2,
        )
    headline = str(caught.value).splitlines()[0]
    assert headline.startswith("operator 'mirror' did not recover from close_watches(configmaps): it never "
                               "re-established its watch of configmaps")
    assert "it did not converge within 2s after the fault ended" in str(caught.value)


def test_recovers_from_a_conflict_storm(start: OperatorFactory, admin: Cluster, ns: str) -> None:
    op = start()
    admin.create(source(), namespace=ns)
    eventually(copied(admin, ns, "1"))
    assert_recovers(
        op, faults.conflict("configmaps", name="source-copy", times=3), then=copied(admin, ns, "2"),
        action=lambda: admin.patch(("v1", "ConfigMap", "source", ns), {"data": {"value": "2"}}),
        duration=30,  # a counted rule ends once used up: on a loaded machine 3 retries take over 1 s
    )
    refused = op.traffic.calls(verb="update", name="source-copy", faulted=True)
    assert [call.status for call in refused] == [409, 409, 409]


def test_recovers_fails_when_the_operator_gives_up_after_a_conflict(
    start: OperatorFactory, admin: Cluster, ns: str
) -> None:
    op = start(retry="give-up-on-conflict")
    admin.create(source(), namespace=ns)
    eventually(copied(admin, ns, "1"))
    with pytest.raises(AssertionError) as caught:
        assert_recovers(
            op, faults.conflict("configmaps", name="source-copy", times=1), then=copied(admin, ns, "2"),
            action=lambda: admin.patch(("v1", "ConfigMap", "source", ns), {"data": {"value": "2"}}),
            timeout=2,
        )
    headline = str(caught.value).splitlines()[0]
    assert f"it gave up on configmaps {ns}/source-copy after 409 Conflict" in headline


# ------------------------------------------------------------------ assert_backs_off


@pytest.mark.parametrize(("code", "retry_after"), [(429, 1.0), (500, None)])
def test_backs_off_passes_when_retries_wait(
    start: OperatorFactory, admin: Cluster, ns: str, code: int, retry_after: float | None
) -> None:
    op = start()
    admin.create(source(), namespace=ns)
    eventually(copied(admin, ns, "1"))
    result = assert_backs_off(
        op, on=code, resource="configmaps", verb="update", name="source-copy", retry_after=retry_after,
        trigger=lambda: admin.patch(("v1", "ConfigMap", "source", ns), {"data": {"value": "2"}}),
    )
    assert len(result.gaps) == 2 and min(result.gaps) >= (retry_after or 0.1) * 0.9
    eventually(copied(admin, ns, "2"))


def test_backs_off_fails_on_a_tight_retry_loop(start: OperatorFactory, admin: Cluster, ns: str) -> None:
    op = start(retry="tight")
    admin.create(source(), namespace=ns)
    eventually(copied(admin, ns, "1"))
    with pytest.raises(AssertionError) as caught:
        assert_backs_off(
            op, on=500, resource="configmaps", verb="update", name="source-copy", retry_after=None, times=3,
            trigger=lambda: admin.patch(("v1", "ConfigMap", "source", ns), {"data": {"value": "2"}}),
        )
    headline = str(caught.value).splitlines()[0]
    assert headline.startswith("operator 'mirror' retried in a tight loop after 500 Internal Server Error: ")
    assert "retries came sooner than 0.1s" in headline


# ------------------------------------------------------------------ assert_relists_after_410


def test_relists_after_410(start: OperatorFactory, ns: str) -> None:
    op = start()
    relist = assert_relists_after_410(op, "configmaps")
    assert relist.relist.verb == "list" and relist.relist.at > relist.gone.at


def test_relists_after_410_fails_when_the_operator_watches_on(start: OperatorFactory, ns: str) -> None:
    op = start(relist_on_410=False)
    with pytest.raises(AssertionError) as caught:
        assert_relists_after_410(op, "configmaps", timeout=1)
    assert str(caught.value).splitlines()[0] == (
        "operator 'mirror' did not re-list configmaps after its watch got 410 Gone: it watched again "
        "1 time without listing (resourceVersion '')"
    )


# ------------------------------------------------------------------ async forms


@pytest.mark.asyncio
async def test_async_forms_take_coroutine_callbacks(start: OperatorFactory, admin: Cluster, ns: str) -> None:
    import asyncio

    from ktest.assertions import aio

    op = start()

    async def create() -> None:
        await asyncio.to_thread(admin.create, source(), namespace=ns)

    async def converged() -> bool:  # through a worker thread, a check must return a truthy value
        await asyncio.to_thread(copied(admin, ns, "1"))
        return True

    await aio.assert_recovers(
        op, faults.close_watches("configmaps"), then=converged, action=create, duration=0.2
    )
    await aio.assert_relists_after_410(op, "configmaps")


def test_relists_after_410_says_when_the_operator_had_stopped_watching(
    start: OperatorFactory, ns: str
) -> None:
    op = start(rewatch=False)
    with op.faults.inject(faults.close_watches("configmaps")):
        pass
    eventually(lambda: not op.traffic.open_watches("configmaps"))
    with pytest.raises(AssertionError) as caught:
        assert_relists_after_410(op, "configmaps", timeout=1)
    assert str(caught.value).splitlines()[0].startswith(
        "operator 'mirror' had no open watch of configmaps to answer with 410 Gone: it stopped watching "
        "configmaps earlier (its last watch ended at +"
    )


def test_a_watch_reopened_before_the_cut_one_was_recorded_as_ended_counts() -> None:
    """CI saw this order: the client re-opened its watch a moment before the proxy noted the
    cut stream's end. The re-opened watch still counts; a client that never re-opens does not."""
    from dataclasses import replace

    from ktest.assertions.traffic import _recovery_gaps
    from ktest.proxy.api_request import parse_request
    from ktest.proxy.traffic import Call

    watch = parse_request("GET", "/api/v1/namespaces/a/configmaps?watch=true")
    cut = replace(Call.of(watch, 0.08), status=200, ended=0.1402, closed_by="close_watches(configmaps)")
    reopened = replace(Call.of(watch, 0.1401), status=200)
    assert _recovery_gaps([cut, reopened]) == []
    [problem] = _recovery_gaps([cut])
    assert problem.startswith("it never re-established its watch of configmaps: "
                              "the fault closed it at +0.14s")
