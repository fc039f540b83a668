"""The demo operators under API server trouble: dropped watches, 410 Gone, throttling, conflicts.

Both operators talk to the API server through ktest's proxy (the default), so
a test can break some of their calls on purpose (``ktest.faults``) and read
every call they made (``op.traffic``). The assertions say what a good
controller does: re-open watches, list again after 410, back off after 429 and
5xx, retry refused writes, write nothing once converged.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ktest import faults
from ktest.assertions import (
    assert_backs_off,
    assert_no_hot_loop,
    assert_recovers,
    assert_relists_after_410,
)
from ktest.cluster import Cluster
from ktest.operators import OperatorHandle
from ktest.wait import eventually

WEBAPPS = "platform.example.com/v1alpha1"
CLAIMS = "storage.example.com/v1alpha1"


def web_app(name: str = "shop") -> dict[str, Any]:
    return {"apiVersion": WEBAPPS, "kind": "WebApp", "metadata": {"name": name},
            "spec": {"image": "nginx:1.27", "replicas": 1}}


def bucket_claim(name: str = "photos") -> dict[str, Any]:
    return {"apiVersion": CLAIMS, "kind": "BucketClaim", "metadata": {"name": name},
            "spec": {"region": "eu-west-1"}}


def condition_is(
    cluster: Cluster, ref: tuple[str, str, str, str], type: str, reason: str
) -> Callable[[], None]:
    """A check: the object's condition ``type`` is True with ``reason``, for its current generation."""

    def check() -> None:
        obj = cluster.get(ref)
        conditions = {c["type"]: c for c in (obj.get("status") or {}).get("conditions") or []}
        assert type in conditions, f"no {type} condition yet: {sorted(conditions)}"
        assert (conditions[type]["status"], conditions[type]["reason"]) == ("True", reason), conditions[type]
        assert obj["status"].get("observedGeneration") == obj["metadata"]["generation"]

    return check


def webapp_reconciled(cluster: Cluster, namespace: str, name: str = "shop") -> Callable[[], None]:
    return condition_is(cluster, (WEBAPPS, "WebApp", name, namespace), "Reconciled", "ChildrenUpToDate")


# ------------------------------------------------------------------ WebApp (plain kubernetes client)


def test_webapp_survives_dropped_watches(
    cluster: Cluster, namespace: str, webapp_operator: OperatorHandle
) -> None:
    assert_recovers(
        webapp_operator,
        faults.close_watches("webapps"),
        action=lambda: cluster.create(web_app(), namespace=namespace),
        then=webapp_reconciled(cluster, namespace),
    )


def test_webapp_lists_again_after_410_gone(
    cluster: Cluster, namespace: str, webapp_operator: OperatorHandle
) -> None:
    assert_relists_after_410(webapp_operator, "webapps")

    cluster.create(web_app(), namespace=namespace)  # and it still sees new WebApps
    eventually(webapp_reconciled(cluster, namespace))


def test_webapp_converges_after_a_conflict_storm(
    cluster: Cluster, namespace: str, webapp_operator: OperatorHandle
) -> None:
    # For three seconds every status write of the operator in this namespace gets 409 Conflict: the
    # burst of events after the create (its children's status) falls inside, even on a busy kind
    # cluster, where the operator's first status write came more than a second after the create.
    storm = faults.conflict("webapps", namespace=namespace, subresource="status")
    assert_recovers(
        webapp_operator,
        storm,
        action=lambda: cluster.create(web_app(), namespace=namespace),
        duration=3.0,
        then=webapp_reconciled(cluster, namespace),
    )
    refused = webapp_operator.traffic.calls(namespace=namespace, subresource="status", faulted=True)
    assert refused and {call.status for call in refused} == {409}


def test_webapp_honours_retry_after_when_throttled(
    cluster: Cluster, namespace: str, webapp_operator: OperatorHandle
) -> None:
    backoff = assert_backs_off(
        webapp_operator, on=429, retry_after=1, resource="webapps", verb="get", namespace=namespace,
        name="shop",
        trigger=lambda: cluster.create(web_app(), namespace=namespace),
    )
    assert all(gap >= 0.9 for gap in backoff.gaps)
    eventually(webapp_reconciled(cluster, namespace))


def test_webapp_backs_off_on_server_errors(
    cluster: Cluster, namespace: str, webapp_operator: OperatorHandle
) -> None:
    # No Retry-After: the operator's own back-off (its work queue starts at 50 ms) must space the retries.
    assert_backs_off(
        webapp_operator, on=500, retry_after=None, min_gap=0.04, times=3, resource="webapps", verb="get",
        namespace=namespace, name="shop", trigger=lambda: cluster.create(web_app(), namespace=namespace),
    )
    eventually(webapp_reconciled(cluster, namespace))


def test_webapp_sends_no_writes_once_converged(
    cluster: Cluster, namespace: str, webapp_operator: OperatorHandle
) -> None:
    app = cluster.create(web_app(), namespace=namespace)
    eventually(webapp_reconciled(cluster, namespace))

    assert_no_hot_loop(webapp_operator, app, window=1.5)


# ------------------------------------------------------------------ BucketClaim (kopf)


def test_bucketclaim_survives_dropped_watches(
    cluster: Cluster, namespace: str, bucket_operator: OperatorHandle
) -> None:
    assert_recovers(
        bucket_operator,
        faults.close_watches("bucketclaims"),
        action=lambda: cluster.create(bucket_claim(), namespace=namespace),
        then=condition_is(cluster, (CLAIMS, "BucketClaim", "photos", namespace), "Ready", "Provisioned"),
    )


def test_bucketclaim_lists_again_after_410_gone(
    cluster: Cluster, namespace: str, bucket_operator: OperatorHandle
) -> None:
    assert_relists_after_410(bucket_operator, "bucketclaims")

    cluster.create(bucket_claim(), namespace=namespace)
    eventually(condition_is(cluster, (CLAIMS, "BucketClaim", "photos", namespace), "Ready", "Provisioned"))
