"""A CRD's versions evolve under a running operator: Backup v1alpha1 -> v1.

The Backup CRD gains v1 (``spec.retention: "7d"`` becomes ``spec.retentionDays: 7``), which
becomes the storage version; a conversion webhook (Python handlers on ktest's webhook server)
converts between the two; the objects are migrated to v1 and ``status.storedVersions`` is
pruned, so v1alpha1 can stop being served. Two mistakes this catches: a conversion that
drops a field, and an operator that watches only the old version.

The Backup CRD is cluster-wide: these tests keep to one pytest-xdist worker, each installs
revision 1 afresh and removes the CRD afterwards.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import pytest

from fixtures.operators.backup.conversion import backup_conversion
from fixtures.operators.backup.crd import GROUP, KIND, backup, backup_crd
from ktest import eventually
from ktest.assertions import assert_observed_generation, assert_round_trips
from ktest.cluster import Cluster, evolve_crd, migrate_storage
from ktest.operators import run_kopf

pytestmark = pytest.mark.xdist_group("backup-crd")

CRD = ("apiextensions.k8s.io/v1", "CustomResourceDefinition", f"{KIND.lower()}s.{GROUP}")


@pytest.fixture
def backup_kind(cluster: Cluster) -> Iterator[None]:
    """Revision 1 of the Backup CRD (v1alpha1 only), installed afresh; removed after the test."""
    cluster.delete(CRD, missing_ok=True, wait=True)
    cluster.install_crds(backup_crd(1))
    yield
    cluster.delete(CRD, missing_ok=True, wait=True)


def test_backups_convert_to_v1_and_back_without_loss(
    cluster: Cluster, namespace: str, backup_kind: None, webhooks: Any
) -> None:
    webhooks(handlers=backup_conversion())
    evolve_crd(cluster, backup_crd(2))  # v1 added, the storage version; v1alpha1 still served
    sent = backup("nightly", namespace, schedule="0 2 * * *", retention="7d", target="s3://nightly")
    cluster.create(sent)

    # stored as v1 (converted on the way in), read at v1, written back, read at v1alpha1: as sent
    converted = assert_round_trips(cluster, sent, via="v1")
    assert converted["spec"]["retentionDays"] == 7


def test_the_operator_keeps_reconciling_once_v1_is_the_storage_version(
    cluster: Cluster, namespace: str, backup_kind: None, webhooks: Any
) -> None:
    with run_kopf(
        "fixtures.operators.backup.operator",
        cluster,
        namespaces=[namespace],
        name="backup-operator",
        # Each new CRD revision makes the API server answer 429 "storage is (re)initializing" for a
        # moment: kopf's retries of that pass, as they succeed.
    ) as operator:
        cluster.create(backup("nightly", namespace, schedule="0 2 * * *", retention="7d"))
        assert_observed_generation(cluster, (f"{GROUP}/v1alpha1", KIND, "nightly", namespace))

        webhooks(handlers=backup_conversion())
        evolve_crd(cluster, backup_crd(2))
        migrate_storage(cluster, CRD[2])  # every Backup re-stored as v1; storedVersions: [v1]
        # kopf moves its watch to the preferred version, v1, once it sees the new revision; a
        # rollout stops serving v1alpha1 only then (kopf logs an error for a watch that 404s). An
        # operator pinned to v1alpha1 never moves: the check below names that.
        with contextlib.suppress(AssertionError):
            eventually(lambda: [call.version for call in operator.traffic.open_watches("backups")] == ["v1"])
        evolve_crd(cluster, backup_crd(3))  # v1alpha1 no longer served

        cluster.patch((f"{GROUP}/v1", KIND, "nightly", namespace), {"spec": {"schedule": "0 4 * * *"}})
        try:
            assert_observed_generation(cluster, (f"{GROUP}/v1", KIND, "nightly", namespace), timeout=10)
        except AssertionError as error:
            raise AssertionError(
                "the operator stopped reconciling Backups after the CRD's storage version moved to v1 "
                f"and v1alpha1 stopped being served (does it watch only v1alpha1?):\n{error}"
            ) from None
