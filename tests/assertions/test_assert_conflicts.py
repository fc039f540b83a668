"""Conflict assertions: stale copies get 409, and operators survive concurrent writers
(or crash on the first conflict, the bug the design documents warn about)."""

from __future__ import annotations

import copy
import re
import time
from collections.abc import Callable
from typing import Any

import pytest
from assertion_controllers import Controller, widget
from kubernetes.client.exceptions import ApiException
from messages import assert_says

from ktest.assertions import (
    ConcurrentWriter,
    ConflictNotMetWarning,
    assert_conflict_on_stale_update,
    assert_survives_concurrent_writes,
    stale_copy,
)
from ktest.cluster import Cluster
from ktest.errors import ClusterError
from ktest.run_context import add_health_check
from ktest.wait import eventually

LABEL = "assertions.ktest.test/size"
Reconcile = Callable[[dict[str, Any]], None]


def slow_labeler(cluster: Cluster) -> Reconcile:
    """Labels the object with its size through a read-modify-write PUT, after a slow
    call to the outside world: the copy it writes is often stale by then."""

    def reconcile(obj: dict[str, Any]) -> None:
        wanted = str(obj["spec"]["size"])
        if (obj["metadata"].get("labels") or {}).get(LABEL) == wanted:
            return
        time.sleep(0.2)  # the external call the reconcile waits for
        updated = copy.deepcopy(obj)
        updated["metadata"]["labels"] = {**(obj["metadata"].get("labels") or {}), LABEL: wanted}
        cluster.update(updated)

    return reconcile


def fast_labeler(cluster: Cluster) -> Reconcile:
    """The same read-modify-write PUT with no pause between the read and the update: a
    timing-based concurrent writer almost never lands in that window."""

    def reconcile(obj: dict[str, Any]) -> None:
        wanted = str(obj["spec"]["size"])
        if (obj["metadata"].get("labels") or {}).get(LABEL) == wanted:
            return
        updated = copy.deepcopy(obj)
        updated["metadata"]["labels"] = {**(obj["metadata"].get("labels") or {}), LABEL: wanted}
        cluster.update(updated)

    return reconcile


def patch_labeler(cluster: Cluster) -> Reconcile:
    """Labels with a merge patch that carries no resourceVersion: it can never conflict."""

    def reconcile(obj: dict[str, Any]) -> None:
        wanted = str(obj["spec"]["size"])
        if (obj["metadata"].get("labels") or {}).get(LABEL) != wanted:
            cluster.patch(obj, {"metadata": {"labels": {LABEL: wanted}}})

    return reconcile


def labelled(cluster: Cluster, obj: dict[str, Any]) -> Callable[[], bool]:
    return lambda: (cluster.get(obj)["metadata"].get("labels") or {}).get(LABEL) == str(obj["spec"]["size"])


# ----------------------------------------------------------------- stale copies


def test_stale_copy_gets_409_conflict(cluster: Cluster, ns: str) -> None:
    created = cluster.create(widget("w1", ns))
    stale = stale_copy(cluster, created)
    error = assert_conflict_on_stale_update(cluster, stale)
    assert error.status == 409
    current = cluster.get(created)
    assert current["metadata"]["resourceVersion"] != stale["metadata"]["resourceVersion"]
    assert "ktest/stale-write" not in (current["metadata"].get("annotations") or {})


def test_conflict_assertion_fails_when_writes_refresh_the_version(cluster: Cluster, ns: str) -> None:
    created = cluster.create(widget("w1", ns))
    stale = stale_copy(cluster, created)

    def last_write_wins(obj: dict[str, Any]) -> None:
        """The classic 'fix' for conflicts: take the latest resourceVersion, keep stale content."""
        obj = copy.deepcopy(obj)
        obj["metadata"]["resourceVersion"] = cluster.get(obj)["metadata"]["resourceVersion"]
        cluster.update(obj)

    with pytest.raises(AssertionError) as failure:
        assert_conflict_on_stale_update(cluster, stale, write=last_write_wins)
    assert_says(
        failure.value,
        f"Object: Widget {ns}/w1 (assertions.ktest.test/v1, uid {created['metadata']['uid']})",
        "Rule: optimistic concurrency",
        f"the stale copy was at resourceVersion {stale['metadata']['resourceVersion']}",
        "the write was accepted: the object now carries the stale copy's content",
        starts_with="a write of Widget w1 from a stale copy did not get 409 Conflict\n",
    )
    overwritten = cluster.get(created)["metadata"].get("annotations") or {}
    assert "ktest/stale-copy" not in overwritten  # the newer change is lost


def test_conflict_assertion_fails_when_the_conflict_is_swallowed(cluster: Cluster, ns: str) -> None:
    created = cluster.create(widget("w1", ns))
    stale = stale_copy(cluster, created)

    def swallowing(obj: dict[str, Any]) -> None:
        try:
            cluster.update(obj)
        except ApiException as error:
            if error.status != 409:
                raise

    with pytest.raises(AssertionError) as failure:
        assert_conflict_on_stale_update(cluster, stale, write=swallowing)
    assert "a 409 was swallowed, so the caller believes its write happened" in str(failure.value)


# ----------------------------------------------------------------- concurrent writers


@pytest.mark.parametrize("mode", ["patch", "update"])
def test_concurrent_writer_writes_and_counts(cluster: Cluster, ns: str, mode: str) -> None:
    created = cluster.create(widget("w1", ns))
    with ConcurrentWriter(cluster, created, duration=0.5, mode=mode) as writer:
        writer.join()
    assert writer.writes >= 1  # how many depends on the machine's load; the count must be exact
    assert writer.errors == []
    annotations = cluster.get(created)["metadata"]["annotations"]
    assert annotations["ktest/concurrent-writer"] == str(writer.writes)
    assert f"{writer.writes} writes to Widget {ns}/w1" in writer.summary()


def test_concurrent_writer_surfaces_its_errors(cluster: Cluster, ns: str) -> None:
    created = cluster.create(widget("w1", ns))
    outsider = cluster.user("outsider")  # no RBAC grants: every write is forbidden
    with pytest.raises(ClusterError) as failure, ConcurrentWriter(outsider, created) as writer:
        writer._thread.join() if writer._thread else None  # it stops by itself on the error
    assert_says(
        failure.value,
        f"the concurrent writer of Widget {ns}/w1",
        "stopped on an error after 0 writes: ApiError: 403 Forbidden",
    )


def test_survives_concurrent_writes_passes_when_conflicts_are_retried(cluster: Cluster, ns: str) -> None:
    with Controller(cluster, ns, slow_labeler(cluster)) as controller:
        add_health_check(controller.health)
        created = cluster.create(widget("w1", ns, size=3))
        writer = assert_survives_concurrent_writes(cluster, created, labelled(cluster, created), duration=1)
    assert writer.writes >= 5
    assert any(getattr(error, "status", None) == 409 for error in controller.errors)  # it did see conflicts


def test_survives_concurrent_writes_fails_when_a_conflict_crashes_the_operator(
    cluster: Cluster, ns: str
) -> None:
    with Controller(cluster, ns, slow_labeler(cluster), crash_on_error=True) as controller:
        forget = add_health_check(controller.health)
        created = cluster.create(widget("w1", ns, size=3))
        with pytest.raises(AssertionError) as failure:
            assert_survives_concurrent_writes(cluster, created, labelled(cluster, created), duration=1)
        forget()  # the crash is this test's expected outcome: do not fail it at teardown
    assert_says(
        failure.value,
        f"Object: Widget {ns}/w1 (assertions.ktest.test/v1)",
        "Rule: a 409 Conflict is not an error for a controller",
        "health check: OperatorError: test controller for Widget crashed",
        "409",
        starts_with="the operator failed during the concurrent writes on Widget w1",
    )


def test_survives_concurrent_writes_shows_what_converged_compared(cluster: Cluster, ns: str) -> None:
    created = cluster.create(widget("w1", ns, size=3))  # no operator: it never converges
    with pytest.raises(AssertionError) as failure:
        assert_survives_concurrent_writes(
            cluster, created, lambda: cluster.get(created)["spec"]["size"] == 4,
            duration=0.3, timeout=0.3, conflicts=0,
        )
    assert_says(failure.value, 'where cluster.get(created)["spec"]["size"] = 3',
                starts_with="Widget w1 did not converge")


# ----------------------------------------------------------------- deterministic conflicts


def labelled_as(cluster: Cluster, obj: dict[str, Any], size: int) -> Callable[[], bool]:
    return lambda: (cluster.get(obj)["metadata"].get("labels") or {}).get(LABEL) == str(size)


def wait_until_labelled(cluster: Cluster, obj: dict[str, Any], size: int) -> None:
    eventually(
        labelled_as(cluster, obj, size), description=f"the controller labelled {obj['metadata']['name']}"
    )


def resize(cluster: Cluster, obj: dict[str, Any], size: int) -> Callable[[], object]:
    """A spec change: the controller must update the object again, now that conflicts are armed."""
    return lambda: cluster.patch(obj, {"spec": {"size": size}})


def survives_a_resize(cluster: Cluster, obj: dict[str, Any], **options: Any) -> Any:
    """assert_survives_concurrent_writes, triggered by resizing ``obj`` (size 3) to 4."""
    return assert_survives_concurrent_writes(
        cluster, obj, labelled_as(cluster, obj, 4), duration=0.5, trigger=resize(cluster, obj, 4), **options
    )


@pytest.mark.parametrize("labeler", [slow_labeler, fast_labeler])
@pytest.mark.parametrize("attempt", range(3))
def test_a_conflict_crash_is_caught_every_time_whatever_the_window(
    cluster: Cluster, ns: str, labeler: Callable[[Cluster], Reconcile], attempt: int
) -> None:
    with Controller(cluster, ns, labeler(cluster), crash_on_error=True) as controller:
        forget = add_health_check(controller.health)
        created = cluster.create(widget("w1", ns, size=3))
        wait_until_labelled(cluster, created, 3)  # its first update happened before anything was armed
        with pytest.raises(AssertionError) as failure:
            survives_a_resize(cluster, created)
        forget()
    message = str(failure.value)
    assert re.search(
        r"^the operator failed (during|after) the concurrent writes on Widget w1 "
        r"\(its update got 409 Conflict 1x\)\n"
        rf"Object: Widget {ns}/w1 \(assertions.ktest.test/v1\)",
        message,
    ), message
    path = f"/apis/assertions.ktest.test/v1/namespaces/{ns}/widgets/w1"
    assert re.search(
        rf"\+\d+\.\d\ds PUT {path} from thread 'test-controller worker Widget' -> 409 Conflict", message
    ), message
    assert isinstance(controller.crashed, ApiException) and controller.crashed.status == 409


def test_survives_conflicts_it_met_for_sure(cluster: Cluster, ns: str) -> None:
    with Controller(cluster, ns, fast_labeler(cluster)) as controller:
        add_health_check(controller.health)
        created = cluster.create(widget("w1", ns, size=3))
        wait_until_labelled(cluster, created, 3)
        writer = survives_a_resize(cluster, created)
    assert writer.injector is not None
    assert writer.injector.provoked == 3  # the default: the operator's next three updates conflicted
    assert "got 409 Conflict" in writer.injector.summary()
    assert cluster.get(created)["metadata"]["annotations"]["ktest/conflict"]  # ktest's slipped-in write


def test_an_operator_whose_writes_cannot_conflict_fails_the_assertion(cluster: Cluster, ns: str) -> None:
    with Controller(cluster, ns, patch_labeler(cluster)) as controller:
        add_health_check(controller.health)
        created = cluster.create(widget("w1", ns, size=3))
        wait_until_labelled(cluster, created, 3)
        with pytest.raises(AssertionError) as failure:
            survives_a_resize(cluster, created)
    message = assert_says(
        failure.value,
        "Rule: a 409 Conflict is not an error for a controller",
        "0 got 409 Conflict: the operator never met a 409, since its writes carry no resourceVersion",
        "pass allow_no_conflict=True",
        starts_with="the operator never met a 409 Conflict on Widget w1, so surviving one was not shown",
    )
    unconditional = r"PATCH /apis/assertions.ktest.test/v1/namespaces/\S+/widgets/w1 .* -> 200"
    assert re.search(unconditional, message), message


def test_an_operator_that_never_wrote_during_the_writes_fails_the_assertion(
    cluster: Cluster, ns: str
) -> None:
    with Controller(cluster, ns, fast_labeler(cluster)) as controller:
        add_health_check(controller.health)
        created = cluster.create(widget("w1", ns, size=3))
        wait_until_labelled(cluster, created, 3)  # labelled already: nothing more for it to write
        with pytest.raises(AssertionError) as failure:
            assert_survives_concurrent_writes(
                cluster, created, labelled_as(cluster, created, 3), duration=0.5
            )
    assert_says(
        failure.value,
        "the operator never wrote the object from this process while conflicts were armed",
        "pass trigger=",
        starts_with="the operator never met a 409 Conflict on Widget w1",
    )


def test_allow_no_conflict_downgrades_an_unmet_conflict_to_a_warning(cluster: Cluster, ns: str) -> None:
    with Controller(cluster, ns, patch_labeler(cluster)) as controller:
        add_health_check(controller.health)
        created = cluster.create(widget("w1", ns, size=3))
        wait_until_labelled(cluster, created, 3)
        with pytest.warns(
            ConflictNotMetWarning,
            match="the operator never met a 409, since its writes carry no resourceVersion",
        ):
            writer = survives_a_resize(cluster, created, allow_no_conflict=True)
    assert writer.injector is not None and writer.injector.provoked == 0
    assert writer.injector.unconditional >= 1
