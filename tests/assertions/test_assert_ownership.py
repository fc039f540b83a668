"""Owner-reference and garbage-collection assertions against the real garbage collector."""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import datetime, timezone
from typing import Any

import pytest
from assertion_controllers import Controller, widget
from builders import configmap, owner_reference

from ktest.api_error import ApiError
from ktest.assertions import assert_garbage_collected, assert_orphaned, assert_owned_by
from ktest.cluster import Cluster, ObjectRef
from ktest.controlplane import ControlPlane
from ktest.errors import ClusterError

Reconcile = Callable[[dict[str, Any]], None]


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


def test_owned_by_passes_with_a_controller_reference(cluster: Cluster, ns: str) -> None:
    with Controller(cluster, ns, child_maker(cluster)):
        owner = cluster.create(widget("w1", ns))
        reference = assert_owned_by(cluster, child_of(owner), owner, block_owner_deletion=True)
    assert reference["uid"] == owner["metadata"]["uid"]
    assert reference["controller"] is True


def test_owned_by_fails_without_owner_reference(cluster: Cluster, ns: str) -> None:
    with Controller(cluster, ns, child_maker(cluster, owned=False)):
        owner = cluster.create(widget("w1", ns))
        child = ready_child(cluster, owner)
        with pytest.raises(AssertionError) as failure:
            assert_owned_by(cluster, child, owner, timeout=0.5)
    message = str(failure.value)
    assert message.startswith("ConfigMap w1-config is not owned by Widget w1 as required")
    assert f"Object: ConfigMap {ns}/w1-config (v1, uid {child['metadata']['uid']})" in message
    assert f"Object: Widget {ns}/w1 (assertions.ktest.test/v1, uid {owner['metadata']['uid']})" in message
    assert "Rule: a child created by an operator carries an ownerReference to its owner" in message
    assert "ownerReferences of the child: none" in message
    assert "the child has no ownerReferences at all" in message


def test_owned_by_fails_when_the_reference_is_not_the_controller(cluster: Cluster, ns: str) -> None:
    with Controller(cluster, ns, child_maker(cluster, controller=False)):
        owner = cluster.create(widget("w1", ns))
        child = ready_child(cluster, owner)
        with pytest.raises(AssertionError) as failure:
            assert_owned_by(cluster, child, owner, timeout=0.5)
        assert_owned_by(cluster, child, owner, controller=False)
    assert "controller is False, expected True" in str(failure.value)
    assert f"Widget w1 (assertions.ktest.test/v1, uid {owner['metadata']['uid']}, blockOwnerDeletion)" in str(
        failure.value)


@pytest.mark.parametrize("propagation", ["Background", "Foreground"])
def test_garbage_collected_passes_with_owner_reference(cluster: Cluster, ns: str, propagation: str) -> None:
    with Controller(cluster, ns, child_maker(cluster)):
        owner = cluster.create(widget("w1", ns))
        child = ready_child(cluster, owner)
        assert_garbage_collected(cluster, child, owner, propagation=propagation)
    assert cluster.get_or_none(child_of(owner)) is None
    assert cluster.get_or_none(owner) is None


def test_garbage_collected_fails_without_owner_reference(cluster: Cluster, ns: str) -> None:
    with Controller(cluster, ns, child_maker(cluster, owned=False)):
        owner = cluster.create(widget("w1", ns))
        child = ready_child(cluster, owner)
        with pytest.raises(AssertionError) as failure:
            assert_garbage_collected(cluster, child, owner, timeout=1)
    message = str(failure.value)
    uid = child["metadata"]["uid"]
    assert message.startswith("ConfigMap w1-config was not garbage-collected")
    assert f"Object: ConfigMap {ns}/w1-config (v1, uid {uid})" in message
    assert "Rule: the garbage collector deletes an object once no owner named in its ownerReferences" \
        in message
    assert "the owner was deleted with propagationPolicy=Background" in message
    assert "the child has no ownerReferences, so nothing ties it to the owner" in message
    assert cluster.exists(child)  # the leak is real


def test_gc_assertions_say_plainly_when_no_garbage_collector_runs(plane: ControlPlane, ns: str) -> None:
    with Cluster(plane.kubeconfig, controllers=frozenset({"namespace"})) as without_gc:
        owner = without_gc.create(widget("w1", ns))
        for check in (
            lambda: assert_garbage_collected(without_gc, child_of(owner), owner),
            lambda: assert_orphaned(without_gc, child_of(owner), owner),
        ):
            with pytest.raises(ClusterError) as failure:
                check()
            message = str(failure.value)
            assert "no garbage collector runs on this cluster" in message
            assert "(kube-controller-manager controllers: namespace)" in message
            assert "Run the control plane with the 'garbagecollector' controller" in message
        assert without_gc.exists(owner)  # nothing was deleted: it said so before acting


def test_orphaned_passes_when_the_child_survives(cluster: Cluster, ns: str) -> None:
    with Controller(cluster, ns, child_maker(cluster)):
        owner = cluster.create(widget("w1", ns))
        child = ready_child(cluster, owner)
        survivor = assert_orphaned(cluster, child, owner, for_seconds=1)
    assert survivor["metadata"]["uid"] == child["metadata"]["uid"]
    assert not survivor["metadata"].get("ownerReferences")
    assert cluster.get_or_none(owner) is None


def test_orphaned_fails_when_the_operator_deletes_children_itself(cluster: Cluster, ns: str) -> None:
    with Controller(cluster, ns, child_maker(cluster), on_delete=child_deleter(cluster)):
        owner = cluster.create(widget("w1", ns))
        child = ready_child(cluster, owner)
        with pytest.raises(AssertionError) as failure:
            assert_orphaned(cluster, child, owner, for_seconds=2)
    message = str(failure.value)
    assert message.startswith("ConfigMap w1-config was deleted although its owner Widget w1")
    assert f"Object: ConfigMap {ns}/w1-config (v1, uid {child['metadata']['uid']})" in message
    assert "was deleted with propagationPolicy=Orphan" in message
    assert "Rule: deleting an owner with propagationPolicy=Orphan leaves its dependents in place" in message
    assert "the child was gone (404)" in message


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
    cluster.install_crds({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "sprockets.late.ktest.test"},
        "spec": {
            "group": "late.ktest.test",
            "scope": "Namespaced",
            "names": {"plural": "sprockets", "singular": "sprocket", "kind": "Sprocket"},
            "versions": [{"name": "v1", "served": True, "storage": True, "schema": {
                "openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}}}],
        },
    })
    free_owner = cluster.create({"apiVersion": "late.ktest.test/v1", "kind": "Sprocket",
                                 "metadata": {"name": "s0", "namespace": ns}})
    free_child = cluster.create(configmap("s0-config", ns, owner=free_owner))
    assert_garbage_collected(cluster, free_child, free_owner, timeout=1)

    owner = cluster.create({"apiVersion": "late.ktest.test/v1", "kind": "Sprocket",
                            "metadata": {"name": "s1", "namespace": ns}})
    manifest = configmap("s1-config", ns, owner=owner)
    manifest["metadata"]["finalizers"] = ["assertions.ktest.test/hold"]
    child = cluster.create(manifest)
    crd = cluster.get(("apiextensions.k8s.io/v1", "CustomResourceDefinition", "sprockets.late.ktest.test"))
    created = datetime.fromisoformat(crd["metadata"]["creationTimestamp"].replace("Z", "+00:00"))
    young = (datetime.now(timezone.utc) - created).total_seconds() < 63
    try:
        with pytest.raises(AssertionError) as failure:
            assert_garbage_collected(cluster, child, owner, timeout=1)
    finally:
        cluster.patch(child, {"metadata": {"finalizers": None}})
    message = str(failure.value)
    uid = child["metadata"]["uid"]
    assert message.startswith("ConfigMap s1-config was not garbage-collected")
    assert f"Object: ConfigMap {ns}/s1-config (v1, uid {uid})" in message
    assert "the child has finalizers ['assertions.ktest.test/hold'] that must be removed first" in message
    assert "CustomResourceDefinition sprockets.late.ktest.test, created" in message
    assert "garbage collector picks up new resource kinds only on its 30-second discovery sync" in message
    if young:
        extended = (r"waited \d+s \(\+\d+s: CustomResourceDefinition sprockets\.late\.ktest\.test was "
                    r"\d+s old, and the garbage collector may take 60s to discover a new kind\)")
        assert re.search(extended, message), message
