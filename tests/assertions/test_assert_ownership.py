"""Owner-reference and garbage-collection assertions against the real garbage collector."""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta, timezone
from functools import partial
from typing import Any

import pytest
from assertion_controllers import Controller, widget
from builders import configmap, crd, owner_reference
from messages import assert_says

from ktest.assertions import assert_garbage_collected, assert_orphaned, assert_owned_by
from ktest.cluster import Cluster, ObjectRef
from ktest.controlplane import ControlPlane
from ktest.errors import ClusterError
from ktest.errors.api import ApiError

Reconcile = Callable[[dict[str, Any]], None]
CRD_API = ("apiextensions.k8s.io/v1", "CustomResourceDefinition")


def child_of(obj: dict[str, Any]) -> ObjectRef:
    return ObjectRef("v1", "ConfigMap", f"{obj['metadata']['name']}-config", obj["metadata"]["namespace"])


def child_maker(cluster: Cluster, *, owned: bool = True, controller: bool = True) -> Reconcile:
    """Creates the Widget's ConfigMap (owned, or, the bug, without ownerReference)."""

    def reconcile(obj: dict[str, Any]) -> None:
        if obj["metadata"].get("deletionTimestamp"):
            return
        child = child_of(obj)
        if cluster.exists(child):
            return
        manifest = configmap(child.name, child.namespace or "", {"size": str(obj["spec"]["size"])})
        if owned:
            manifest["metadata"]["ownerReferences"] = [owner_reference(obj, controller=controller)]
        try:
            cluster.create(manifest)
        except ApiError as error:
            if error.status != 409:
                raise

    return reconcile


def child_deleter(cluster: Cluster) -> Reconcile:
    """The bug for Orphan: deletes the children itself when the owner goes away."""

    def on_delete(obj: dict[str, Any]) -> None:
        cluster.delete(child_of(obj), missing_ok=True)

    return on_delete


def ready_child(cluster: Cluster, owner: dict[str, Any]) -> dict[str, Any]:
    from ktest.wait import eventually

    return eventually(lambda: cluster.get(child_of(owner)))


@contextmanager
def widget_with_child(
    cluster: Cluster,
    ns: str,
    *,
    owned: bool = True,
    controller: bool = True,
    on_delete: Reconcile | None = None,
) -> Iterator[tuple[dict[str, Any], dict[str, Any]]]:
    """Widget w1 under a controller that creates its ConfigMap (see :func:`child_maker`):
    (owner, child) once the child exists; the controller runs until the block ends."""
    reconcile = child_maker(cluster, owned=owned, controller=controller)
    with Controller(cluster, ns, reconcile, on_delete=on_delete):
        owner = cluster.create(widget("w1", ns))
        yield owner, ready_child(cluster, owner)


def test_owned_by_passes_with_a_controller_reference(cluster: Cluster, ns: str) -> None:
    with Controller(cluster, ns, child_maker(cluster)):
        owner = cluster.create(widget("w1", ns))
        reference = assert_owned_by(cluster, child_of(owner), owner, block_owner_deletion=True)
    assert reference["uid"] == owner["metadata"]["uid"]
    assert reference["controller"] is True


@pytest.mark.parametrize(
    ("check", "headline", "explanations"),
    [
        pytest.param(
            partial(assert_owned_by, timeout=0.5),
            "ConfigMap w1-config is not owned by Widget w1 as required",
            (
                "Object: Widget {ns}/w1 (assertions.ktest.test/v1, uid {owner_uid})",
                "Rule: a child created by an operator carries an ownerReference to its owner",
                "ownerReferences of the child: none",
                "the child has no ownerReferences at all",
            ),
            id="owned_by",
        ),
        pytest.param(
            partial(assert_garbage_collected, timeout=1),
            "ConfigMap w1-config was not garbage-collected",
            (
                "Rule: the garbage collector deletes an object once no owner named in its ownerReferences",
                "the owner was deleted with propagationPolicy=Background",
                "the child has no ownerReferences, so nothing ties it to the owner",
            ),
            id="garbage_collected",
        ),
    ],
)
def test_ownership_assertions_fail_without_owner_reference(
    cluster: Cluster, ns: str, check: Callable[..., object], headline: str, explanations: tuple[str, ...]
) -> None:
    """``explanations`` name the test's namespace as {ns} and the owner's uid as {owner_uid}."""
    with (
        widget_with_child(cluster, ns, owned=False) as (owner, child),
        pytest.raises(AssertionError) as failure,
    ):
        check(cluster, child, owner)
    assert_says(
        failure.value,
        f"Object: ConfigMap {ns}/w1-config (v1, uid {child['metadata']['uid']})",
        *(text.format(ns=ns, owner_uid=owner["metadata"]["uid"]) for text in explanations),
        starts_with=headline,
    )
    assert cluster.exists(child)  # the leak is real


def test_owned_by_fails_when_the_reference_is_not_the_controller(cluster: Cluster, ns: str) -> None:
    with widget_with_child(cluster, ns, controller=False) as (owner, child):
        with pytest.raises(AssertionError) as failure:
            assert_owned_by(cluster, child, owner, timeout=0.5)
        assert_owned_by(cluster, child, owner, controller=False)  # what the child does have
    assert_says(
        failure.value,
        "controller is False, expected True",
        f"Widget w1 (assertions.ktest.test/v1, uid {owner['metadata']['uid']}, blockOwnerDeletion)",
    )


@pytest.mark.parametrize("propagation", ["Background", "Foreground"])
def test_garbage_collected_passes_with_owner_reference(cluster: Cluster, ns: str, propagation: str) -> None:
    with widget_with_child(cluster, ns) as (owner, child):
        assert_garbage_collected(cluster, child, owner, propagation=propagation)
    assert cluster.get_or_none(child_of(owner)) is None
    assert cluster.get_or_none(owner) is None


def deployment_and_service(name: str, ns: str, owner: dict[str, Any],
                           service_owner: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """An operator's usual pair: a Deployment and a Service, each with an ownerReference to
    ``owner`` (the Service's to ``service_owner`` when given: the bug of a wrong owner)."""
    labels = {"app": name}
    container = {"name": "app", "image": "example/app:1"}
    pod = {"metadata": {"labels": labels}, "spec": {"containers": [container]}}
    return [
        {"apiVersion": "apps/v1", "kind": "Deployment",
         "metadata": {"name": name, "namespace": ns, "ownerReferences": [owner_reference(owner)]},
         "spec": {"replicas": 1, "selector": {"matchLabels": labels}, "template": pod}},
        {"apiVersion": "v1", "kind": "Service",
         "metadata": {"name": name, "namespace": ns,
                      "ownerReferences": [owner_reference(service_owner or owner)]},
         "spec": {"selector": labels, "ports": [{"port": 80}]}},
    ]


@pytest.mark.parametrize("propagation", ["Background", "Foreground"])
def test_garbage_collected_checks_several_children_of_one_owner(
    cluster: Cluster, ns: str, propagation: str
) -> None:
    """Both children are read before the owner goes, so a collector quicker than a second
    call cannot make the check of the second child fail for want of a child."""
    owner = cluster.create(widget("w1", ns))
    children = [cluster.create(manifest) for manifest in deployment_and_service("w1", ns, owner)]
    assert_garbage_collected(cluster, children, owner, propagation=propagation)
    assert not any(cluster.exists(child) for child in children)
    assert not cluster.exists(owner)


def test_garbage_collected_names_the_child_that_stayed(cluster: Cluster, ns: str) -> None:
    """The Service's ownerReference points at another Widget, still there: the collector
    rightly keeps it, and the failure names it, not the Deployment that went."""
    owner = cluster.create(widget("w1", ns))
    other = cluster.create(widget("w2", ns))
    deployment, service = (cluster.create(m) for m in deployment_and_service("w1", ns, owner, other))
    with pytest.raises(AssertionError) as failure:
        assert_garbage_collected(cluster, [deployment, service], owner, timeout=2)
    assert_says(
        failure.value,
        f"Object: Service {ns}/w1 (v1, uid {service['metadata']['uid']})",
        "the owner was deleted with propagationPolicy=Background",
        f"Service w1: none of them has the owner's uid {owner['metadata']['uid']}",
        "Service w1: ownerReferences of the child: Widget w2",
        "Service w1 still exists",
        starts_with="Service w1 was not garbage-collected (1 of 2 children; collected: Deployment w1)",
    )
    assert "Deployment w1:" not in str(failure.value)
    assert cluster.exists(service) and not cluster.exists(deployment)


def test_garbage_collected_refuses_a_missing_child_before_deleting_the_owner(
    cluster: Cluster, ns: str
) -> None:
    owner = cluster.create(widget("w1", ns))
    present = cluster.create(configmap("w1-config", ns, owner=owner))
    with pytest.raises(AssertionError) as failure:
        assert_garbage_collected(cluster, [present, ("v1", "Secret", "w1-never-made", ns)], owner)
    assert_says(failure.value, f"Secret {ns}/w1-never-made (v1) does not exist, so its garbage collection "
                               "cannot be checked")
    assert cluster.exists(owner) and cluster.exists(present)  # nothing was deleted


def test_gc_assertions_say_plainly_when_no_garbage_collector_runs(plane: ControlPlane, ns: str) -> None:
    with Cluster(plane.kubeconfig, controllers=frozenset({"namespace"})) as without_gc:
        owner = without_gc.create(widget("w1", ns))
        for check in (
            lambda: assert_garbage_collected(without_gc, child_of(owner), owner),
            lambda: assert_orphaned(without_gc, child_of(owner), owner),
        ):
            with pytest.raises(ClusterError) as failure:
                check()
            assert_says(
                failure.value,
                "no garbage collector runs on this cluster",
                "(kube-controller-manager controllers: namespace)",
                "Run the control plane with the 'garbagecollector' controller",
            )
        assert without_gc.exists(owner)  # nothing was deleted: it said so before acting


def gc_saw_configmaps_up_to_now(cluster: Cluster, ns: str) -> None:
    """Returns once the garbage collector has seen every ConfigMap created so far: it deletes a new
    one whose only owner does not exist, and one watch feeds it ConfigMaps in order. Deleting an
    owner with Orphan right after its child's creation otherwise races the collector's view of the
    child: it orphans the dependents it knows (none yet), then deletes the child as dangling."""
    from ktest.wait import eventually

    absent = {"apiVersion": "v1", "kind": "ConfigMap",
              "metadata": {"name": "absent", "uid": str(uuid.uuid4())}}
    barrier = cluster.create(configmap("gc-barrier", ns, owner=absent))
    eventually(lambda: not cluster.exists(barrier), timeout=30)


def test_orphaned_passes_when_the_child_survives(cluster: Cluster, ns: str) -> None:
    with widget_with_child(cluster, ns) as (owner, child):
        gc_saw_configmaps_up_to_now(cluster, ns)  # a CI run met the race (the collector deleted the child)
        survivor = assert_orphaned(cluster, child, owner, for_seconds=1)
    assert survivor["metadata"]["uid"] == child["metadata"]["uid"]
    assert not survivor["metadata"].get("ownerReferences")
    assert cluster.get_or_none(owner) is None


def test_orphaned_fails_when_the_operator_deletes_children_itself(cluster: Cluster, ns: str) -> None:
    with (
        widget_with_child(cluster, ns, on_delete=child_deleter(cluster)) as (owner, child),
        pytest.raises(AssertionError) as failure,
    ):
        assert_orphaned(cluster, child, owner, for_seconds=2)
    assert_says(
        failure.value,
        f"Object: ConfigMap {ns}/w1-config (v1, uid {child['metadata']['uid']})",
        "was deleted with propagationPolicy=Orphan",
        "Rule: deleting an owner with propagationPolicy=Orphan leaves its dependents in place",
        "the child was gone (404)",
        # created a moment before: the collector's lag is named as the other suspect
        f"(creationTimestamp {child['metadata']['creationTimestamp']}): kube-controller-manager's garbage "
        "collector may not have seen it yet",
        starts_with="ConfigMap w1-config was deleted although its owner Widget w1",
    )


@pytest.mark.parametrize(("age", "hinted"), [(0, True), (4, True), (6, False), (3600, False)])
def test_orphaned_names_the_collectors_lag_only_for_a_child_created_moments_before(
    age: int, hinted: bool
) -> None:
    """An Orphan deletion right after the child's creation races the collector's watch of the child
    (tests/assertions met it): the failure says so then, and only then."""
    from ktest.assertions.ownership import YOUNG_CHILD_SECONDS, _young_child_note

    assert (age <= YOUNG_CHILD_SECONDS) is hinted
    deleted = datetime(2026, 12, 7, 10, 0, 0, tzinfo=timezone.utc)
    child = configmap("c", "ns")
    child["metadata"]["creationTimestamp"] = (deleted - timedelta(seconds=age)).strftime("%Y-%m-%dT%H:%M:%SZ")
    note = _young_child_note(child, deleted)
    assert bool(note) is hinted, note
    if hinted:
        assert note[0].startswith(f"the child was created {age}s before its owner's deletion"), note
    del child["metadata"]["creationTimestamp"]
    assert _young_child_note(child, deleted) == []  # no timestamp (a stand-in object): no guess


def test_garbage_collection_of_a_new_kind_waits_for_discovery_then_explains_a_blocked_child(
    plane: ControlPlane, ns: str
) -> None:
    """A CRD installed after the controller-manager started (as on kind, where it cannot be
    restarted): the garbage collector acts on the kind only after its next discovery sync, up
    to 30 s later, so the assertion waits that long even with timeout=1. Then a child held by a
    finalizer of its own: the message names both reasons a child can outlive its owner."""
    with Cluster(plane.kubeconfig, controllers=plane.controllers, name="no-restarts") as cluster:
        _new_kind_then_blocked_child(cluster, ns)


def _new_kind_then_blocked_child(cluster: Cluster, ns: str) -> None:
    cluster.install_crds(crd("late.ktest.test", "Sprocket"))
    free_owner = cluster.create(
        {"apiVersion": "late.ktest.test/v1", "kind": "Sprocket", "metadata": {"name": "s0", "namespace": ns}}
    )
    free_child = cluster.create(configmap("s0-config", ns, owner=free_owner))
    assert_garbage_collected(cluster, free_child, free_owner, timeout=1)

    owner = cluster.create(
        {"apiVersion": "late.ktest.test/v1", "kind": "Sprocket", "metadata": {"name": "s1", "namespace": ns}}
    )
    manifest = configmap("s1-config", ns, owner=owner)
    manifest["metadata"]["finalizers"] = ["assertions.ktest.test/hold"]
    child = cluster.create(manifest)
    crd_read = cluster.get((*CRD_API, "sprockets.late.ktest.test"))
    created = datetime.fromisoformat(crd_read["metadata"]["creationTimestamp"].replace("Z", "+00:00"))
    young = (datetime.now(timezone.utc) - created).total_seconds() < 63
    try:
        with pytest.raises(AssertionError) as failure:
            assert_garbage_collected(cluster, child, owner, timeout=1)
    finally:
        cluster.patch(child, {"metadata": {"finalizers": None}})
    message = assert_says(
        failure.value,
        f"Object: ConfigMap {ns}/s1-config (v1, uid {child['metadata']['uid']})",
        "the child has finalizers ['assertions.ktest.test/hold'] that must be removed first",
        "CustomResourceDefinition sprockets.late.ktest.test, created",
        "garbage collector picks up new resource kinds only on its 30-second discovery sync",
        starts_with="ConfigMap s1-config was not garbage-collected",
    )
    if young:
        extended = (
            r"waited \d+s \(\+\d+s: CustomResourceDefinition sprockets\.late\.ktest\.test was "
            r"\d+s old, and the garbage collector may take 60s to discover a new kind\)"
        )
        assert re.search(extended, message), message
