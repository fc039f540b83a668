"""The BucketClaim operator (kopf): finalizers, idempotent provisioning, status, deletion.

Each test has its own namespace, its own in-memory storage backend and its own
operator watching that namespace (see ``conftest.py``). The storage backend is
the only fake: it stands for a cloud API outside Kubernetes. Everything
Kubernetes does here (finalizers, the status subresource, garbage collection)
is done by a real API server and controller-manager.
"""

from __future__ import annotations

import re
from typing import Any

import pytest

from fixtures.operators.bucketclaim.operator import FINALIZER, SKIP_CLEANUP_ANNOTATION, bucket_name
from fixtures.operators.bucketclaim.storage import FakeStorage
from ktest.assertions import (
    ConcurrentWriter,
    assert_condition,
    assert_deletion_blocked,
    assert_garbage_collected,
    assert_gone,
    assert_has_finalizer,
    assert_observed_generation,
    assert_owned_by,
    assert_quiescent,
    assert_status_subresource,
    assert_transition_time_stable,
    finalizer_scenario,
)
from ktest.cluster import Cluster
from ktest.operators import OperatorHandle
from ktest.wait import assert_matches, consistently, eventually

pytestmark = pytest.mark.usefixtures("bucket_operator")

API_VERSION = "storage.example.com/v1alpha1"


def bucket_claim(
    name: str = "photos",
    *,
    region: str = "eu-west-1",
    reclaim_policy: str | None = None,
    annotations: dict[str, str] | None = None,
) -> dict[str, Any]:
    claim: dict[str, Any] = {
        "apiVersion": API_VERSION,
        "kind": "BucketClaim",
        "metadata": {"name": name, "annotations": annotations or {}},
        "spec": {"region": region},
    }
    if reclaim_policy is not None:
        claim["spec"]["reclaimPolicy"] = reclaim_policy
    return claim


def credentials_of(claim: dict[str, Any]) -> tuple[str, str, str, str]:
    """The Secret the operator creates for a claim."""
    meta = claim["metadata"]
    return ("v1", "Secret", f"{meta['name']}-credentials", meta["namespace"])


def provisioned(cluster: Cluster, namespace: str, **fields: Any) -> dict[str, Any]:
    """Create a claim and wait until the operator reports it Ready."""
    claim = cluster.create(bucket_claim(**fields), namespace=namespace)
    assert_condition(cluster, claim, "Ready", "True", reason="Provisioned")
    return claim


def assert_single_bucket(storage: FakeStorage, cluster: Cluster, claim: dict[str, Any]) -> None:
    """Exactly one bucket and one credentials Secret exist for the claim."""
    meta = claim["metadata"]
    buckets = [b.name for b in storage.buckets(namespace=meta["namespace"], claim=meta["name"])]
    assert buckets == [bucket_name(claim)], (
        f"expected exactly one bucket, {bucket_name(claim)!r}, for the claim; the backend holds {buckets}: "
        "provisioning is not idempotent"
    )
    secrets = cluster.list(
        "v1", "Secret", meta["namespace"], label_selector=f"storage.example.com/claim={meta['name']}"
    )
    names = [s["metadata"]["name"] for s in secrets]
    assert names == [f"{meta['name']}-credentials"], (
        f"expected exactly one credentials Secret, found {names}: Secret creation is not idempotent"
    )


# ----------------------------------------------------------------------------- finalizers


def test_the_finalizer_is_added(cluster: Cluster, namespace: str) -> None:
    claim = cluster.create(bucket_claim(), namespace=namespace)

    assert_has_finalizer(cluster, claim, FINALIZER)


def test_the_finalizer_is_in_place_before_the_bucket_exists(
    cluster: Cluster, namespace: str, storage: FakeStorage
) -> None:
    """If the operator died right after creating the bucket, a deleted claim must not leak it."""
    with storage.pause_after_create() as paused:
        claim = cluster.create(bucket_claim(), namespace=namespace)
        paused.wait_for_create()  # the bucket exists now; the operator is stuck right after creating it

        assert_has_finalizer(cluster, claim, FINALIZER, timeout=2)


@pytest.mark.operator_errors_expected
def test_deletion_waits_while_the_backend_fails(
    cluster: Cluster, namespace: str, storage: FakeStorage
) -> None:
    """Day-one test 1: delete while cleanup fails; the claim stays, finalizer and all."""
    claim = provisioned(cluster, namespace)

    with storage.fail_deletes("storage backend unavailable (503)"):
        assert_deletion_blocked(cluster, claim, FINALIZER, for_seconds=2, delete=True)
        assert_condition(cluster, claim, "Ready", "False", reason="CleanupFailed", message=re.compile("503"))

    assert storage.get(bucket_name(claim)) is not None, "the bucket must survive a failed cleanup"


@pytest.mark.operator_errors_expected
def test_the_claim_goes_once_the_backend_recovers(
    cluster: Cluster, namespace: str, storage: FakeStorage
) -> None:
    """Day-one test 2: cleanup fails, deletion is blocked; cleanup succeeds, the claim is gone."""
    claim = provisioned(cluster, namespace)

    finalizer_scenario(
        cluster,
        claim,
        FINALIZER,
        break_cleanup=storage.fail_deletes,
        fix_cleanup=storage.recover,
        blocked_for=1,
    )

    assert storage.get(bucket_name(claim)) is None, "the bucket must be deleted with its claim"


def test_a_bucket_already_gone_counts_as_cleaned_up(
    cluster: Cluster, namespace: str, storage: FakeStorage
) -> None:
    claim = provisioned(cluster, namespace)
    storage.delete_out_of_band(bucket_name(claim))  # someone removed it in the cloud console

    cluster.delete(claim)

    assert_gone(cluster, claim)


@pytest.mark.parametrize(("policy", "bucket_kept"), [("Delete", False), ("Retain", True)])
def test_the_reclaim_policy_decides_what_happens_to_the_bucket(
    cluster: Cluster, namespace: str, storage: FakeStorage, policy: str, bucket_kept: bool
) -> None:
    claim = provisioned(cluster, namespace, reclaim_policy=policy)

    cluster.delete(claim)
    assert_gone(cluster, claim)

    bucket = storage.get(bucket_name(claim))
    assert (bucket is not None) is bucket_kept, (
        f"reclaimPolicy {policy}: bucket {'kept' if bucket else 'deleted'}"
    )


def test_the_skip_cleanup_annotation_leaves_the_bucket(
    cluster: Cluster, namespace: str, storage: FakeStorage
) -> None:
    """The escape hatch: the claim goes even though the backend refuses every delete."""
    claim = provisioned(cluster, namespace)
    cluster.patch(claim, {"metadata": {"annotations": {SKIP_CLEANUP_ANNOTATION: "true"}}})

    with storage.fail_deletes():
        cluster.delete(claim)
        assert_gone(cluster, claim)

    assert storage.get(bucket_name(claim)) is not None
    assert storage.calls("delete_bucket") == 0, "the backend must not even be asked to delete the bucket"


# ----------------------------------------------------------------------------- provisioning and ownership


def test_a_bucket_and_its_credentials_are_provisioned(
    cluster: Cluster, namespace: str, storage: FakeStorage
) -> None:
    claim = provisioned(cluster, namespace, region="eu-central-1")

    bucket = storage.get(bucket_name(claim))
    assert bucket is not None and bucket.region == "eu-central-1"
    assert_matches(cluster.get(claim), {"status": {"bucketID": bucket.id}})
    assert_owned_by(cluster, credentials_of(claim), claim, controller=True, block_owner_deletion=True)


def test_the_credentials_secret_is_garbage_collected(cluster: Cluster, namespace: str) -> None:
    claim = provisioned(cluster, namespace)

    assert_garbage_collected(cluster, credentials_of(claim), claim)


@pytest.mark.operator_errors_expected
def test_a_lost_create_response_does_not_create_a_second_bucket(
    cluster: Cluster, namespace: str, storage: FakeStorage
) -> None:
    """The backend creates the bucket but the answer never arrives; the retry must find it."""
    storage.lose_next_create_response()

    claim = provisioned(cluster, namespace)

    assert storage.calls("ensure_bucket") >= 2, "the operator should have retried the lost call"
    assert_single_bucket(storage, cluster, claim)


def test_a_crash_mid_provisioning_still_ends_with_one_bucket(
    cluster: Cluster, namespace: str, storage: FakeStorage, bucket_operator: OperatorHandle
) -> None:
    """Restartability: the operator dies after creating the bucket, before recording it anywhere."""
    with storage.pause_after_create() as paused:
        claim = cluster.create(bucket_claim(), namespace=namespace)
        paused.wait_for_create()
        bucket_operator.crash()

    bucket_operator.restart()

    assert_condition(cluster, claim, "Ready", "True", reason="Provisioned")
    assert_single_bucket(storage, cluster, claim)


# ----------------------------------------------------------------------------- status


def test_status_is_a_subresource(cluster: Cluster, namespace: str) -> None:
    claim = provisioned(cluster, namespace)

    assert_status_subresource(
        cluster, claim, status_probe={"bucketID": "probe"}, spec_probe={"reclaimPolicy": "Retain"}
    )


def test_status_follows_the_generation(cluster: Cluster, namespace: str) -> None:
    claim = provisioned(cluster, namespace)

    changed = cluster.patch(claim, {"spec": {"reclaimPolicy": "Retain"}})
    assert changed["metadata"]["generation"] == 2

    assert_observed_generation(cluster, claim)
    assert_condition(cluster, claim, "Ready", "True", observed_generation=True)


@pytest.mark.operator_errors_expected
def test_ready_reports_backend_errors_then_recovery(
    cluster: Cluster, namespace: str, storage: FakeStorage
) -> None:
    with storage.fail_creates("storage backend unavailable (503)"):
        claim = cluster.create(bucket_claim(), namespace=namespace)
        assert_condition(cluster, claim, "Ready", "False", reason="BackendError", message=re.compile("503"))

    # kopf retries a temporary error after patching its progress and touching the object to wake
    # itself: on a busy CI machine the retry (delay 0.5 s) ran 10 s after its touch, about two of
    # kopf's 5 s consistency waits, so the recovery gets more than the default bound.
    assert_condition(
        cluster, claim, "Ready", "True", reason="Provisioned", observed_generation=True, timeout=30
    )


def test_ready_transition_time_moves_only_when_ready_flips(cluster: Cluster, namespace: str) -> None:
    claim = provisioned(cluster, namespace)

    assert_transition_time_stable(
        cluster,
        claim,
        "Ready",
        trigger=lambda: cluster.patch(claim, {"metadata": {"labels": {"team": "media"}}}),
    )


def test_an_unknown_region_is_reported_and_not_retried(
    cluster: Cluster, namespace: str, storage: FakeStorage
) -> None:
    """A user error: Ready=False with the reason, and no retry (retrying cannot fix it)."""
    claim = cluster.create(bucket_claim(region="mars-north-1"), namespace=namespace)

    assert_condition(
        cluster, claim, "Ready", "False", reason="InvalidRegion", message=re.compile("mars-north-1")
    )

    attempts = storage.calls("ensure_bucket")

    def not_retried() -> None:
        retries = storage.calls("ensure_bucket") - attempts
        assert retries == 0, (
            f"the operator retried a permanent user error (invalid region) {retries} more times"
        )

    consistently(not_retried, duration=2)


# ----------------------------------------------------------------------------- concurrency and hot loops


def test_concurrent_writers_neither_duplicate_the_bucket_nor_lose_their_writes(
    cluster: Cluster, namespace: str, storage: FakeStorage
) -> None:
    """kopf writes a claim with merge patches, which carry no resourceVersion: it never meets a
    409 on it (so ``assert_survives_concurrent_writes`` would fail: no conflict to survive). What
    it does guarantee while another writer updates the claim (read, then PUT with its
    resourceVersion) as it provisions: provisioning converges and stays idempotent (one bucket,
    one Secret), and no write is lost: the writer's last change stays, and so does kopf's
    finalizer."""
    claim = cluster.create(bucket_claim(), namespace=namespace)
    with ConcurrentWriter(cluster, claim, duration=2, mode="update") as writer:
        writer.join()
    assert writer.writes >= 3, writer.summary()

    def provisioned_once() -> None:
        assert_matches(
            cluster.get(claim),
            {"status": {"conditions": [{"type": "Ready", "status": "True"}]}},
            list_keys={"conditions": "type"},
        )
        assert_single_bucket(storage, cluster, claim)

    eventually(provisioned_once)
    metadata = cluster.get(claim)["metadata"]
    last_write = metadata["annotations"]["ktest/concurrent-writer"]
    assert last_write == str(writer.writes), f"the writer's last change ({writer.writes}) was overwritten"
    assert FINALIZER in metadata["finalizers"], "the writer's updates dropped kopf's finalizer"


def test_nothing_is_written_once_provisioned(cluster: Cluster, namespace: str) -> None:
    claim = provisioned(cluster, namespace)

    assert_quiescent(cluster, claim, children=[credentials_of(claim)])
