"""A CRD evolves from v1alpha1 to v1 on a real API server, with a conversion webhook served by
ktest's webhook server: objects convert, migrate to the new storage version (read back from
etcd), ``status.storedVersions`` is pruned and v1alpha1 stops being served. Each revision that
is not a valid evolution is refused with the objects named, and the cluster is left as it was."""

from __future__ import annotations

from typing import Any

import pytest
from crd_backups import Backups

from fixtures.operators.backup.conversion import backup_conversion
from ktest.assertions import assert_converts, assert_round_trips, assert_stored_as
from ktest.cluster import Cluster
from ktest.controlplane import ControlPlane
from ktest.crd_versions.evolution import SchemaChangeWithoutConversionWarning, evolve_crd, migrate_storage
from ktest.errors import ClusterError, CRDError
from ktest.webhooks import Webhooks

CRD = "apiextensions.k8s.io/v1", "CustomResourceDefinition"


def conversion(admin: Cluster, backups: Backups, **options: Any) -> Webhooks:
    return Webhooks(
        admin,
        handlers=backup_conversion(kind=backups.kind, **options),
        namespaces=[backups.namespace],
        host="127.0.0.1",
    )


def test_v1alpha1_to_v1_with_a_conversion_webhook_migrated_and_pruned(
    admin: Cluster, plane: ControlPlane, backups: Backups
) -> None:
    admin.create(backups.obj("nightly", schedule="0 2 * * *", retention="7d", target="s3://nightly"))
    admin.create(backups.obj("weekly", schedule="0 3 * * 0", retention="30d", target="s3://weekly"))
    assert_stored_as(admin, backups.ref("weekly"), "v1alpha1", etcd=plane)

    with conversion(admin, backups) as webhooks:
        assert evolve_crd(admin, backups.crd(2), etcd=plane) == backups.crd_name
        assert_converts(
            admin,
            backups.ref("nightly"),
            to="v1",
            expect={"spec": {"retentionDays": 7, "target": "s3://nightly", "schedule": "0 2 * * *"}},
        )
        assert_round_trips(admin, backups.ref("nightly"), via="v1")
        assert any(call.kind == "conversion" for call in webhooks.calls)
        # nightly was written back since the storage version changed; weekly was not
        assert_stored_as(admin, backups.ref("nightly"), "v1", etcd=plane)
        assert_stored_as(admin, backups.ref("weekly"), "v1alpha1", etcd=plane)
        stored = admin.get((*CRD, backups.crd_name))["status"]["storedVersions"]
        assert stored == ["v1alpha1", "v1"]

        migration = migrate_storage(admin, backups.crd_name, etcd=plane)

        assert sorted(migration.rewritten) == [f"{backups.namespace}/nightly", f"{backups.namespace}/weekly"]
        assert (migration.stored_versions_before, migration.stored_versions_after) == (
            ["v1alpha1", "v1"],
            ["v1"],
        )
        assert migration.checked_in_etcd
        assert admin.get((*CRD, backups.crd_name))["status"]["storedVersions"] == ["v1"]
        for name in ("nightly", "weekly"):
            assert_stored_as(admin, backups.ref(name), "v1", etcd=plane)

        evolve_crd(admin, backups.crd(3), etcd=plane)  # v1alpha1 no longer served: nothing is stored in it
        weekly = admin.get(backups.ref("weekly", "v1"))
        assert weekly["spec"] == {"schedule": "0 3 * * 0", "retentionDays": 30, "target": "s3://weekly"}
        assert not admin.discovery.served(f"{backups.api_version}", backups.kind)


def unchanged(admin: Cluster, backups: Backups) -> dict[str, Any]:
    crd = admin.get((*CRD, backups.crd_name))
    return {
        "spec": crd["spec"],
        "status": crd["status"].get("storedVersions"),
        "rv": crd["metadata"]["resourceVersion"],
    }


def test_removing_a_version_objects_are_stored_in_is_refused_naming_them(
    admin: Cluster, plane: ControlPlane, backups: Backups
) -> None:
    admin.create(backups.obj("kept", schedule="@daily", retention="7d"))
    with conversion(admin, backups):
        evolve_crd(admin, backups.crd(2), etcd=plane)
        before = unchanged(admin, backups)
        only_v1 = backups.crd(3)
        only_v1["spec"]["versions"] = [v for v in only_v1["spec"]["versions"] if v["name"] == "v1"]

        with pytest.raises(CRDError) as removed:
            evolve_crd(admin, only_v1, etcd=plane)
        message = str(removed.value)
        assert (
            "not a valid evolution of the installed revision: it removes version v1alpha1, which "
            "status.storedVersions ['v1alpha1', 'v1'] still lists; "
            f"etcd holds 1 object(s) stored in v1alpha1: {backups.namespace}/kept" in message
        ), message
        assert "Nothing was changed" in message and "migrate_storage" in message, message

        with pytest.raises(CRDError) as unserved:
            evolve_crd(admin, backups.crd(3))  # without etcd: the kind's objects, which may be stored in it
        message = str(unserved.value)
        assert "it stops serving version v1alpha1" in message, message
        assert (
            f"objects of the kind that may be stored in it (the API cannot tell which; pass etcd= to know): "
            f"{backups.namespace}/kept" in message
        ), message
        assert unchanged(admin, backups) == before
        assert_stored_as(admin, backups.ref("kept"), "v1alpha1", etcd=plane)


def test_schemas_that_differ_without_a_conversion_webhook_are_refused(
    admin: Cluster, backups: Backups
) -> None:
    before = unchanged(admin, backups)
    with pytest.raises(CRDError) as refused:
        evolve_crd(admin, backups.crd(2))
    message = str(refused.value)
    assert (
        "served versions v1alpha1, v1 have different schemas, but the conversion strategy is None" in message
    )
    assert "Handlers.convert handler" in message and "nothing was changed" in message, message
    assert unchanged(admin, backups) == before

    with pytest.warns(SchemaChangeWithoutConversionWarning, match="different schemas"):
        evolve_crd(admin, backups.crd(2), allow_schema_change_without_conversion=True)
    assert [v["name"] for v in admin.get((*CRD, backups.crd_name))["spec"]["versions"]] == ["v1alpha1", "v1"]


@pytest.mark.parametrize("storage", [(True, True), (False, False)], ids=["two", "none"])
def test_a_revision_without_exactly_one_storage_version_is_refused(
    admin: Cluster, backups: Backups, storage: tuple[bool, bool]
) -> None:
    before = unchanged(admin, backups)
    revision = backups.crd(2)
    for version, flag in zip(revision["spec"]["versions"], storage, strict=True):
        version["storage"] = flag
    with pytest.raises(CRDError, match=r"spec\.versions must mark exactly one version storage: true"):
        evolve_crd(admin, revision)
    assert unchanged(admin, backups) == before


def test_assert_round_trips_names_the_field_a_lossy_conversion_drops(
    admin: Cluster, backups: Backups
) -> None:
    from fixtures.operators.seeded_bugs import SeededBug

    admin.create(backups.obj("lossy", schedule="@daily", retention="7d", target="s3://lossy"))
    with conversion(admin, backups, bug=SeededBug.CONVERSION_DROPS_FIELD):
        evolve_crd(admin, backups.crd(2))
        with pytest.raises(AssertionError) as lost:
            assert_round_trips(admin, backups.ref("lossy"), via="v1")
    message = str(lost.value)
    assert "did not survive the round trip v1alpha1 -> v1 -> v1alpha1" in message, message
    assert "spec.target: lost (was 's3://lossy')" in message, message


def test_assert_stored_as_fails_naming_the_stored_version_and_refuses_without_etcd(
    admin: Cluster, plane: ControlPlane, backups: Backups
) -> None:
    admin.create(backups.obj("old", schedule="@daily", retention="7d"))
    with pytest.raises(AssertionError) as wrong:
        assert_stored_as(admin, backups.ref("old"), "v1", etcd=plane)
    message = str(wrong.value)
    assert f"is stored in etcd as {backups.api_version}, not backups.ktest.dev/v1" in message, message
    assert f"/registry/backups.ktest.dev/{backups.kind.lower()}s/{backups.namespace}/old" in message, message

    with pytest.raises(AssertionError, match="is not in etcd"):
        assert_stored_as(admin, backups.ref("absent"), "v1alpha1", etcd=plane)
    with pytest.raises(TypeError, match="On the kind and existing backends ktest has no access to etcd"):
        assert_stored_as(admin, backups.ref("old"), "v1alpha1")


def test_migrate_storage_by_kind_without_pruning(
    admin: Cluster, plane: ControlPlane, backups: Backups
) -> None:
    admin.create(backups.obj("a", retention="7d"))
    with conversion(admin, backups):
        evolve_crd(admin, backups.crd(2))
        migration = migrate_storage(admin, (f"{backups.api_version}", backups.kind), prune=False)
        assert migration.rewritten == [f"{backups.namespace}/a"] and not migration.checked_in_etcd
        assert migration.stored_versions_after == ["v1alpha1", "v1"]
        assert admin.get((*CRD, backups.crd_name))["status"]["storedVersions"] == ["v1alpha1", "v1"]
        assert_stored_as(admin, backups.ref("a"), "v1", etcd=plane)
        assert str(migration) == (
            f"CustomResourceDefinition {backups.crd_name}: 1 object(s) re-stored in v1; "
            "status.storedVersions ['v1alpha1', 'v1'] -> ['v1alpha1', 'v1']"
        )
    with pytest.raises(ClusterError, match="no CustomResourceDefinition defines kind Nothing in group"):
        migrate_storage(admin, ("backups.ktest.dev/v1", "Nothing"))
    with pytest.raises(
        ClusterError, match=r"no CustomResourceDefinition nothings\.example\.com is installed"
    ):
        migrate_storage(admin, "nothings.example.com")
