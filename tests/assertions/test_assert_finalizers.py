"""Finalizer assertions against the real API server, with in-test controllers that
clean up an (in-memory) external store correctly or wrongly."""

from __future__ import annotations

import contextlib
import re
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from assertion_controllers import WIDGET, Controller, widget, write
from messages import assert_says

from ktest.assertions import (
    assert_deletion_blocked,
    assert_gone,
    assert_has_finalizer,
    finalizer_scenario,
)
from ktest.cluster import Cluster
from ktest.wait import eventually

FINALIZER = "assertions.ktest.test/cleanup"


class Store:
    """The world outside Kubernetes the operator provisions into (thread-safe)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.buckets: set[str] = set()
        self.fail_deletes = False

    def create(self, name: str) -> None:
        with self._lock:
            self.buckets.add(name)

    def delete(self, name: str) -> None:
        with self._lock:
            if self.fail_deletes:
                raise RuntimeError(f"store unavailable: cannot delete bucket {name}")
            self.buckets.discard(name)

    @contextlib.contextmanager
    def failing(self) -> Iterator[None]:
        self.fail_deletes = True
        try:
            yield
        finally:
            self.fail_deletes = False


def finalizing_reconciler(
    cluster: Cluster, store: Store, *, remove_first: bool = False, add_finalizer: bool = True
) -> Any:
    """Finalizer before side effect, cleanup before removing it (unless told to do it wrong)."""

    def reconcile(obj: dict[str, Any]) -> None:
        name = obj["metadata"]["name"]
        finalizers = obj["metadata"].get("finalizers") or []
        if obj["metadata"].get("deletionTimestamp"):
            if FINALIZER not in finalizers:
                return
            remaining = [f for f in finalizers if f != FINALIZER]
            if remove_first:  # the bug: the finalizer goes before cleanup has succeeded
                write(cluster, obj, {"metadata": {"finalizers": remaining or None}}, manager="widget-op")
                store.delete(name)
                return
            store.delete(name)
            write(cluster, obj, {"metadata": {"finalizers": remaining or None}}, manager="widget-op")
            return
        if add_finalizer and FINALIZER not in finalizers:
            write(cluster, obj, {"metadata": {"finalizers": [*finalizers, FINALIZER]}}, manager="widget-op")
            return
        store.create(name)

    return reconcile


@pytest.fixture
def store() -> Store:
    return Store()


def test_has_finalizer_passes_once_the_operator_adds_it(cluster: Cluster, ns: str, store: Store) -> None:
    with Controller(cluster, ns, finalizing_reconciler(cluster, store)):
        created = cluster.create(widget("w1", ns))
        obj = assert_has_finalizer(cluster, created, FINALIZER)
    assert FINALIZER in obj["metadata"]["finalizers"]
    assert obj["metadata"]["uid"] == created["metadata"]["uid"]


def test_has_finalizer_fails_when_the_operator_never_adds_it(cluster: Cluster, ns: str, store: Store) -> None:
    with Controller(cluster, ns, finalizing_reconciler(cluster, store, add_finalizer=False)):
        created = cluster.create(widget("w1", ns))
        with pytest.raises(AssertionError) as failure:
            assert_has_finalizer(
                cluster, ("assertions.ktest.test/v1", WIDGET, "w1", ns), FINALIZER, timeout=1
            )
    assert_says(
        failure.value,
        f"Object: Widget {ns}/w1 (assertions.ktest.test/v1, uid {created['metadata']['uid']})",
        "Rule: an operator that cleans up on deletion adds its finalizer",
        "metadata.finalizers is []",
        "did not pass within 1s",
        starts_with=f"Widget w1 never got finalizer '{FINALIZER}' within 1s\n",
    )
    assert store.buckets == {"w1"}  # the side effect happened without a finalizer: a leak in waiting


def test_deletion_blocked_passes_while_cleanup_fails(cluster: Cluster, ns: str, store: Store) -> None:
    with Controller(cluster, ns, finalizing_reconciler(cluster, store)):
        created = cluster.create(widget("w1", ns))
        assert_has_finalizer(cluster, created, FINALIZER)
        eventually(lambda: store.buckets == {"w1"})  # the pass after the finalizer provisions it
        store.fail_deletes = True
        seen = assert_deletion_blocked(cluster, created, FINALIZER, for_seconds=1, delete=True)
        assert seen["metadata"]["deletionTimestamp"]
        assert store.buckets == {"w1"}
        store.fail_deletes = False
        assert_gone(cluster, created)
    assert store.buckets == set()


def test_deletion_blocked_fails_when_the_finalizer_goes_before_cleanup(
    cluster: Cluster, ns: str, store: Store
) -> None:
    with Controller(cluster, ns, finalizing_reconciler(cluster, store, remove_first=True)):
        created = cluster.create(widget("w1", ns))
        assert_has_finalizer(cluster, created, FINALIZER)
        eventually(lambda: store.buckets == {"w1"})
        store.fail_deletes = True
        with pytest.raises(AssertionError) as failure:
            assert_deletion_blocked(cluster, created, FINALIZER, for_seconds=1, delete=True)
    uid = created["metadata"]["uid"]
    message = assert_says(
        failure.value,
        f"deletion of Widget w1 was not blocked by finalizer '{FINALIZER}'",
        f"Object: Widget {ns}/w1 (assertions.ktest.test/v1, uid {uid})",
        "Rule: while a finalizer is listed in metadata.finalizers",
    )
    assert re.search(r"gone|removed", message)
    assert store.buckets == {"w1"}  # what the bug costs: the bucket leaked


def test_deletion_blocked_fails_when_nobody_deletes(cluster: Cluster, ns: str, store: Store) -> None:
    with Controller(cluster, ns, finalizing_reconciler(cluster, store)):
        created = cluster.create(widget("w1", ns))
        assert_has_finalizer(cluster, created, FINALIZER)
        with pytest.raises(AssertionError) as failure:
            assert_deletion_blocked(cluster, created, FINALIZER, for_seconds=1, timeout=0.5)
    assert "no deletion of Widget" in str(failure.value)
    assert "pass delete=True" in str(failure.value)


def test_gone_passes_after_cleanup_succeeds(cluster: Cluster, ns: str, store: Store) -> None:
    with Controller(cluster, ns, finalizing_reconciler(cluster, store)):
        created = cluster.create(widget("w1", ns))
        assert_has_finalizer(cluster, created, FINALIZER)
        cluster.delete(created)
        assert_gone(cluster, created)
    assert cluster.get_or_none(created) is None


def test_gone_passes_when_recreated_with_a_new_uid(cluster: Cluster, ns: str) -> None:
    first = cluster.create(widget("w1", ns))
    cluster.delete(first)
    second = cluster.create(widget("w1", ns))
    assert_gone(cluster, first)
    assert cluster.get(second)["metadata"]["uid"] != first["metadata"]["uid"]


def test_gone_fails_while_cleanup_keeps_failing(cluster: Cluster, ns: str, store: Store) -> None:
    with Controller(cluster, ns, finalizing_reconciler(cluster, store)):
        created = cluster.create(widget("w1", ns))
        assert_has_finalizer(cluster, created, FINALIZER)
        store.fail_deletes = True
        cluster.delete(created)
        with pytest.raises(AssertionError) as failure:
            assert_gone(cluster, created, timeout=1)
        store.fail_deletes = False
        assert_gone(cluster, created)
    uid = created["metadata"]["uid"]
    assert_says(
        failure.value,
        f"Object: Widget {ns}/w1 (assertions.ktest.test/v1, uid {uid})",
        "Rule: an object marked for deletion is removed as soon as metadata.finalizers is empty",
        "still present with deletionTimestamp",
        f"finalizer '{FINALIZER}': waiting for the controller that owns it",
        starts_with="Widget w1 still exists 1s later\n",
    )


def test_gone_fails_when_no_deletion_was_requested(cluster: Cluster, ns: str) -> None:
    created = cluster.create(widget("w1", ns))
    with pytest.raises(AssertionError) as failure:
        assert_gone(cluster, created, timeout=0.5)
    assert "metadata.deletionTimestamp is unset, so no deletion was requested" in str(failure.value)


def test_finalizer_scenario_passes_with_callables(cluster: Cluster, ns: str, store: Store) -> None:
    with Controller(cluster, ns, finalizing_reconciler(cluster, store)):
        created = cluster.create(widget("w1", ns))
        result = finalizer_scenario(
            cluster,
            created,
            FINALIZER,
            break_cleanup=lambda: setattr(store, "fail_deletes", True),
            fix_cleanup=lambda: setattr(store, "fail_deletes", False),
            blocked_for=1,
        )
    assert result.uid == created["metadata"]["uid"]
    assert set(result.timings) == {
        "has finalizer",
        "deletion blocked while cleanup fails",
        "gone once cleanup succeeds",
    }
    assert result.timings["deletion blocked while cleanup fails"] >= 1
    assert store.buckets == set()


def test_finalizer_scenario_passes_with_a_context_manager(cluster: Cluster, ns: str, store: Store) -> None:
    with Controller(cluster, ns, finalizing_reconciler(cluster, store)):
        created = cluster.create(widget("w1", ns))
        finalizer_scenario(cluster, created, FINALIZER, cleanup_failing=store.failing(), blocked_for=1)
    assert store.buckets == set()
    assert store.fail_deletes is False


def test_finalizer_scenario_fails_when_the_finalizer_goes_before_cleanup(
    cluster: Cluster, ns: str, store: Store
) -> None:
    with Controller(cluster, ns, finalizing_reconciler(cluster, store, remove_first=True)):
        created = cluster.create(widget("w1", ns))
        with pytest.raises(AssertionError) as failure:
            finalizer_scenario(cluster, created, FINALIZER, cleanup_failing=store.failing(), blocked_for=1)
    assert_says(
        failure.value,
        "finalizer scenario, step 'deletion blocked while cleanup fails' failed",
        f"was not blocked by finalizer '{FINALIZER}'",
    )
    assert store.fail_deletes is False  # cleanup was let succeed again although the step failed


def test_finalizer_scenario_needs_a_way_to_break_cleanup(cluster: Cluster, ns: str) -> None:
    with pytest.raises(TypeError, match=r"pass break_cleanup=\.\.\. and fix_cleanup=\.\.\."):
        finalizer_scenario(cluster, widget("w1", ns), FINALIZER, break_cleanup=lambda: None)
