"""Tests that fail because the operator has a seeded bug (the symptom is what the timeline shows)."""

from __future__ import annotations

from typing import Any

from fixtures.operators.bucketclaim.operator import FINALIZER
from fixtures.operators.bucketclaim.storage import FakeStorage
from ktest import faults
from ktest.assertions import assert_condition, assert_deletion_blocked, assert_quiescent, assert_recovers
from ktest.cluster import Cluster
from ktest.wait import eventually

WEBAPPS = "platform.example.com/v1alpha1"
CLAIMS = "storage.example.com/v1alpha1"


def web_app(name: str = "shop") -> dict[str, Any]:
    return {
        "apiVersion": WEBAPPS,
        "kind": "WebApp",
        "metadata": {"name": name},
        "spec": {"image": "nginx:1.27", "replicas": 1},
    }


def reconciled(cluster: Cluster, namespace: str) -> None:
    app = cluster.get((WEBAPPS, "WebApp", "shop", namespace))
    conditions = {c["type"]: c for c in (app.get("status") or {}).get("conditions") or []}
    assert conditions.get("Reconciled", {}).get("reason") == "ChildrenUpToDate", conditions


def test_status_update_loop(cluster: Cluster, namespace: str, start_webapp: Any) -> None:
    start_webapp("status-update-loop")
    app = cluster.create(web_app(), namespace=namespace)
    assert_condition(cluster, app, "Reconciled", "True", reason="ChildrenUpToDate")

    assert_quiescent(cluster, app)


def test_conflict_storm(cluster: Cluster, namespace: str, start_webapp: Any) -> None:
    operator = start_webapp("gives-up-on-conflict")
    storm = faults.conflict("webapps", namespace=namespace, subresource="status")
    assert_recovers(
        operator,
        storm,
        action=lambda: cluster.create(web_app(), namespace=namespace),
        duration=1.0,
        then=lambda: reconciled(cluster, namespace),
        timeout=8,
    )


def test_finalizer_removed_before_cleanup_with_two_operators(
    cluster: Cluster, namespace: str, start_webapp: Any, start_bucketclaim: Any, storage: FakeStorage
) -> None:
    start_webapp(None)
    start_bucketclaim("finalizer-removed-before-cleanup")
    cluster.create(web_app(), namespace=namespace)
    eventually(lambda: reconciled(cluster, namespace))
    claim = cluster.create(
        {
            "apiVersion": CLAIMS,
            "kind": "BucketClaim",
            "metadata": {"name": "photos"},
            "spec": {"region": "eu-west-1"},
        },
        namespace=namespace,
    )
    assert_condition(cluster, claim, "Ready", "True", reason="Provisioned")

    with storage.fail_deletes("storage backend unavailable (503)"):
        assert_deletion_blocked(cluster, claim, FINALIZER, for_seconds=2, delete=True)
