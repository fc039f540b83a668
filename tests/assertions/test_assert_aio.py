"""The async variants: they await without blocking the event loop (an asyncio
operator keeps reconciling meanwhile), fail with the same messages, and accept
coroutine callables."""

from __future__ import annotations

import asyncio
import contextlib
import copy
import re
from collections.abc import AsyncIterator
from typing import Any

import pytest
from assertion_controllers import Controller, now, widget, write
from messages import assert_says
from test_assert_conflicts import LABEL, fast_labeler, labelled_as, resize, wait_until_labelled
from test_assert_finalizers import FINALIZER, Store, finalizing_reconciler
from test_assert_ownership import child_maker, child_of
from test_assert_quiescence import status_loop
from test_assert_status import status_writer

from ktest.assertions import ConcurrentWriter, aio
from ktest.cluster import Cluster
from ktest.errors.api import ApiError
from ktest.run_context import add_health_check
from ktest.wait import aio as wait_aio

pytestmark = pytest.mark.asyncio


async def async_operator(cluster: Cluster, obj: dict[str, Any], stop: asyncio.Event) -> None:
    """An operator running on the test's event loop: adds the finalizer, then reports Ready.
    If an assertion blocked the loop, it would never get to do either."""
    while not stop.is_set():
        current = await asyncio.to_thread(cluster.get, obj)
        finalizers = current["metadata"].get("finalizers") or []
        if FINALIZER not in finalizers:
            await asyncio.to_thread(
                write,
                cluster,
                current,
                {"metadata": {"finalizers": [*finalizers, FINALIZER]}},
                manager="aio-op",
            )
        elif (current.get("status") or {}).get("observedGeneration") != current["metadata"]["generation"]:
            condition = {
                "type": "Ready",
                "status": "True",
                "reason": "Reconciled",
                "message": "ok",
                "lastTransitionTime": now(),
            }
            await asyncio.to_thread(
                write,
                cluster,
                current,
                {
                    "status": {
                        "observedGeneration": current["metadata"]["generation"],
                        "conditions": [condition],
                    }
                },
                manager="aio-op",
                subresource="status",
            )
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(stop.wait(), 0.05)


@pytest.mark.slow
async def test_aio_assertions_leave_the_event_loop_to_the_operator(cluster: Cluster, ns: str) -> None:
    created = cluster.create(widget("w1", ns))
    stop = asyncio.Event()
    operator = asyncio.create_task(async_operator(cluster, created, stop))
    try:
        obj = await aio.assert_has_finalizer(cluster, created, FINALIZER)
        condition = await aio.assert_condition(cluster, created, "Ready", reason="Reconciled")
        await aio.assert_observed_generation(cluster, created)
    finally:
        stop.set()
        await operator
    assert FINALIZER in obj["metadata"]["finalizers"]
    assert condition["status"] == "True"
    cluster.patch(created, {"metadata": {"finalizers": None}})


async def test_aio_assertion_fails_with_the_same_message(cluster: Cluster, ns: str) -> None:
    created = cluster.create(widget("w1", ns))
    with pytest.raises(AssertionError) as failure:
        await aio.assert_has_finalizer(cluster, created, FINALIZER, timeout=0.5)
    uid = created["metadata"]["uid"]
    assert_says(
        failure.value,
        f"\nObject: Widget {ns}/w1 (assertions.ktest.test/v1, uid {uid})\n",
        "Rule: an operator that cleans up on deletion adds its finalizer",
        starts_with="Widget w1 never got finalizer",  # the headline: kind, name, what is wrong
    )


@pytest.mark.slow
async def test_aio_finalizer_scenario_with_coroutine_callables(cluster: Cluster, ns: str) -> None:
    store = Store()
    calls: list[str] = []

    async def break_cleanup() -> None:
        calls.append("break")
        store.fail_deletes = True

    async def fix_cleanup() -> None:
        calls.append("fix")
        store.fail_deletes = False

    with Controller(cluster, ns, finalizing_reconciler(cluster, store)):
        created = cluster.create(widget("w1", ns))
        result = await aio.finalizer_scenario(
            cluster, created, FINALIZER, break_cleanup=break_cleanup, fix_cleanup=fix_cleanup, blocked_for=1
        )
    assert calls == ["break", "fix"]
    assert result.uid == created["metadata"]["uid"]
    assert store.buckets == set()


async def test_aio_finalizer_scenario_fails_with_an_async_context_manager(cluster: Cluster, ns: str) -> None:
    store = Store()

    @contextlib.asynccontextmanager
    async def cleanup_failing() -> AsyncIterator[None]:
        store.fail_deletes = True
        try:
            yield
        finally:
            store.fail_deletes = False

    with Controller(cluster, ns, finalizing_reconciler(cluster, store, remove_first=True)):
        created = cluster.create(widget("w1", ns))
        with pytest.raises(AssertionError) as failure:
            await aio.finalizer_scenario(
                cluster, created, FINALIZER, cleanup_failing=cleanup_failing(), blocked_for=1
            )
    assert "step 'deletion blocked while cleanup fails' failed" in str(failure.value)
    assert store.fail_deletes is False


async def test_aio_ownership_and_garbage_collection(cluster: Cluster, ns: str) -> None:
    with Controller(cluster, ns, child_maker(cluster)):
        owner = cluster.create(widget("w1", ns))
        reference = await aio.assert_owned_by(cluster, child_of(owner), owner)
        await aio.assert_garbage_collected(cluster, child_of(owner), owner)
    assert reference["uid"] == owner["metadata"]["uid"]
    assert not cluster.exists(child_of(owner))


async def test_aio_quiescent_fails_on_a_status_loop(cluster: Cluster, ns: str) -> None:
    with Controller(cluster, ns, status_loop(cluster)):
        created = cluster.create(widget("w1", ns))
        await aio.assert_observed_generation(cluster, created)
        with pytest.raises(AssertionError, match=r"is not quiescent: \d+ writes in a 1s window"):
            await aio.assert_quiescent(cluster, created, window=1)


async def test_aio_transition_time_with_an_async_trigger(cluster: Cluster, ns: str) -> None:
    with Controller(cluster, ns, status_writer(cluster)):
        created = cluster.create(widget("w1", ns))
        await aio.assert_condition(cluster, created, "Ready")

        async def poke() -> None:
            await asyncio.to_thread(cluster.patch, created, {"spec": {"message": "poke"}})

        history = await aio.assert_transition_time_stable(cluster, created, "Ready", duration=1, trigger=poke)
    assert len(history.versions) >= 3


async def test_aio_conflicts_with_async_write_and_converged(cluster: Cluster, ns: str) -> None:
    created = cluster.create(widget("w1", ns))
    stale = await aio.stale_copy(cluster, created)

    async def put(obj: dict[str, Any]) -> None:
        await asyncio.to_thread(cluster.update, copy.deepcopy(obj))

    error = await aio.assert_conflict_on_stale_update(cluster, stale, write=put)
    assert error.status == 409

    # A controller that labels with read-modify-PUT: its update after the resize must meet a 409.
    with Controller(cluster, ns, fast_labeler(cluster)) as controller:
        add_health_check(controller.health)
        wait_until_labelled(cluster, created, 1)

        async def converged() -> bool:
            current = await asyncio.to_thread(cluster.get, created)
            return (current["metadata"].get("labels") or {}).get(LABEL) == "4"

        writer = await aio.assert_survives_concurrent_writes(
            cluster, created, converged, duration=0.5, trigger=resize(cluster, created, 4)
        )
    assert writer.writes >= 3
    assert writer.injector is not None and writer.injector.provoked >= 1


async def test_aio_an_async_trigger_writes_without_being_made_to_conflict(cluster: Cluster, ns: str) -> None:
    """The trigger runs on the test's event loop, not in the assertion's thread: its own update
    (read, then PUT with that resourceVersion) is the test's, never one to slip a write before."""
    created = cluster.create(widget("w1", ns, size=3))
    with Controller(cluster, ns, fast_labeler(cluster)) as controller:
        add_health_check(controller.health)
        wait_until_labelled(cluster, created, 3)

        async def resize_by_update() -> None:
            # The controller may write between this read and the PUT: a real conflict, retried as a
            # user's code would. An injected one would show as an interception on this thread.
            for _ in range(10):
                current = await asyncio.to_thread(cluster.get, created)
                current["spec"]["size"] = 4
                try:
                    await asyncio.to_thread(cluster.update, current)
                    return
                except ApiError as error:
                    if error.status != 409:
                        raise
            raise AssertionError("10 real conflicts in a row: the controller never let the update through")

        writer = await aio.assert_survives_concurrent_writes(
            cluster, created, labelled_as(cluster, created, 4), duration=0.5, trigger=resize_by_update
        )
    assert writer.injector is not None and writer.injector.provoked >= 1
    threads = {item.thread for item in writer.injector.interceptions}
    assert threads == {"test-controller worker Widget"}, writer.injector.lines()


async def test_aio_converged_check_failure_shows_what_it_compared(cluster: Cluster, ns: str) -> None:
    created = cluster.create(widget("w1", ns, size=3))  # no operator: it never converges

    async def size() -> int:
        return int((await asyncio.to_thread(cluster.get, created))["spec"]["size"])

    async def converged() -> bool:
        return await size() == 4

    with pytest.raises(AssertionError) as failure:
        await aio.assert_survives_concurrent_writes(
            cluster, created, converged, duration=0.3, timeout=0.3, conflicts=0
        )
    message = str(failure.value)
    assert "await size() == 4" in message and "where await size() = 3" in message, message
    assert "where loop" not in message and "functools.partial" not in message  # not ktest's wrapper


async def test_aio_concurrent_writer_as_async_context_manager(cluster: Cluster, ns: str) -> None:
    created = cluster.create(widget("w1", ns))
    async with ConcurrentWriter(cluster, created, interval=0.02) as writer:
        # The event loop keeps running while the writer thread writes.
        await wait_aio.eventually(lambda: writer.writes >= 3, timeout=10, watch=False)
    assert writer.writes >= 3
    assert re.match(rf"{writer.writes} writes to Widget {ns}/w1", writer.summary())
