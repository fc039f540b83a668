"""The Cluster helpers against a real API server."""

from __future__ import annotations

from pathlib import Path

import pytest
from builders import configmap, crd

from ktest.cluster import Cluster, ObjectRef
from ktest.errors import ClusterError, CRDError
from ktest.errors.api import ApiError
from ktest.wait import eventually

# a status subresource and a CEL rule on spec.size
WIDGET_SCHEMA = {
    "type": "object",
    "properties": {
        "spec": {
            "type": "object",
            "x-kubernetes-validations": [{"rule": "self.size <= 10", "message": "size must be at most 10"}],
            "properties": {"size": {"type": "integer"}},
        },
        "status": {"type": "object", "properties": {"phase": {"type": "string"}}},
    },
}
WIDGET_CRD = crd("test.ktest.dev", "Widget", schema=WIDGET_SCHEMA, status=True)


def test_version_matches_the_control_plane(admin: Cluster, plane) -> None:
    assert admin.version == plane.version.split("+")[0]
    assert admin.version.count(".") == 2


def test_apply_create_get_patch_update_delete(admin: Cluster, ns: str) -> None:
    applied = admin.apply(configmap("a", ns, {"k": "1"}))
    assert applied["data"] == {"k": "1"}
    assert applied["metadata"]["managedFields"][0]["manager"] == "ktest"
    created = admin.create(
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"generateName": "gen-"}}, namespace=ns
    )
    assert created["metadata"]["name"].startswith("gen-")
    with pytest.raises(ApiError) as conflict:
        admin.create(configmap("a", ns))
    assert conflict.value.status == 409
    assert "already exists" in str(conflict.value)

    patched = admin.patch(("v1", "ConfigMap", "a", ns), {"data": {"k": "2"}})
    assert patched["data"] == {"k": "2"}
    stale = dict(applied)
    with pytest.raises(ApiError) as stale_error:
        admin.update(stale)
    assert stale_error.value.status == 409

    assert admin.exists(ObjectRef("v1", "ConfigMap", "a", ns))
    admin.delete(("v1", "ConfigMap", "a", ns), wait=True)
    assert not admin.exists(ObjectRef("v1", "ConfigMap", "a", ns))
    assert admin.delete(("v1", "ConfigMap", "a", ns), missing_ok=True) is None


def test_apply_multi_document_yaml_file(admin: Cluster, ns: str, tmp_path: Path) -> None:
    path = tmp_path / "objs.yaml"
    path.write_text(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: one}\n---\n"
        "apiVersion: v1\nkind: Secret\nmetadata: {name: two}\nstringData: {a: b}\n"
    )
    applied = admin.apply(path, namespace=ns)
    assert [o["kind"] for o in applied] == ["ConfigMap", "Secret"]
    assert {o["metadata"]["name"] for o in admin.list("v1", "ConfigMap", ns)} >= {"one"}


def test_rejected_apply_names_the_manifest(admin: Cluster, ns: str) -> None:
    bad = configmap("UPPER", ns)
    with pytest.raises(ApiError, match=r"<dict>: ConfigMap .*/UPPER .*422.*Invalid value"):
        admin.apply(bad)


def test_unknown_kind_suggests_installing_the_crd(admin: Cluster) -> None:
    with pytest.raises(ClusterError, match=r"does not serve kind Gadget in test.ktest.dev/v1.*install_crds"):
        admin.get(("test.ktest.dev/v1", "Gadget", "x", "default"))


def test_crd_install_status_subresource_and_cel(admin: Cluster, ns: str) -> None:
    assert admin.install_crds(WIDGET_CRD) == ["widgets.test.ktest.dev"]
    assert admin.install_crds(WIDGET_CRD) == ["widgets.test.ktest.dev"]  # idempotent
    widget = admin.apply(
        {
            "apiVersion": "test.ktest.dev/v1",
            "kind": "Widget",
            "metadata": {"name": "w", "namespace": ns},
            "spec": {"size": 1},
        }
    )
    generation = widget["metadata"]["generation"]
    after = admin.patch(widget, {"status": {"phase": "Ready"}}, subresource="status")
    assert after["status"] == {"phase": "Ready"}
    assert after["metadata"]["generation"] == generation
    with pytest.raises(ApiError, match=r"size must be at most 10") as rejected:
        admin.patch(widget, {"spec": {"size": 11}})
    assert rejected.value.status == 422


def test_crd_errors_name_file_and_crd(admin: Cluster, tmp_path: Path) -> None:
    not_crd = tmp_path / "cm.yaml"
    not_crd.write_text("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n")
    with pytest.raises(
        CRDError, match=r"cm\.yaml, document 1 \(line 1\): ConfigMap x .* is not a CustomResourceDefinition"
    ):
        admin.install_crds(not_crd)
    misnamed = {**WIDGET_CRD, "metadata": {"name": "wrong.test.ktest.dev"}}
    with pytest.raises(  # refused by ktest before sending
        CRDError, match=r"wrong.test.ktest.dev: metadata.name is .* name it widgets.test.ktest.dev"
    ):
        admin.install_crds(misnamed)
    broken = crd("test.ktest.dev", "Brokenwidget", schema={"type": "objekt"})
    with pytest.raises(
        CRDError, match=r"rejected CustomResourceDefinition brokenwidgets.test.ktest.dev: .*objekt"
    ):
        admin.install_crds(broken)


def test_delete_propagation_and_garbage_collection(admin: Cluster, ns: str) -> None:
    owner = admin.apply(configmap("owner", ns))
    child = configmap("child", ns)
    child["metadata"]["ownerReferences"] = [
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "name": "owner",
            "uid": owner["metadata"]["uid"],
            # Foreground deletion waits only for dependents that block it; without this the
            # owner may be gone before the garbage collector has deleted the child.
            "blockOwnerDeletion": True,
        }
    ]
    admin.apply(child)
    admin.delete(owner, propagation="Foreground", wait=True, timeout=30)
    assert not admin.exists(child)
    with pytest.raises(ValueError, match=r"propagation must be one of"):
        admin.delete(child, propagation="Sideways")


def test_user_is_denied_then_allowed_by_rbac(admin: Cluster, ns: str) -> None:
    alice = admin.user("alice", groups=["team-a"])
    with pytest.raises(ApiError) as denied:
        alice.list("v1", "ConfigMap", ns)
    assert denied.value.status == 403
    assert 'User "alice" cannot list resource "configmaps"' in str(denied.value)
    admin.apply(
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "Role",
            "metadata": {"name": "read", "namespace": ns},
            "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["list"]}],
        }
    )
    admin.apply(
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": {"name": "read", "namespace": ns},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "read"},
            "subjects": [{"kind": "Group", "name": "team-a", "apiGroup": "rbac.authorization.k8s.io"}],
        }
    )

    def allowed() -> None:  # the authorizer sees the binding through an informer, shortly after
        try:
            alice.list("v1", "ConfigMap", ns)
        except ApiError as error:
            raise AssertionError(f"still denied: {error}") from None

    eventually(allowed, timeout=10)


@pytest.mark.slow
def test_namespace_held_by_finalizer_is_reported_and_released(admin: Cluster) -> None:
    from ktest.cluster.namespaces import create_namespace, delete_namespace, unique_name

    name = create_namespace(admin, unique_name("held"))
    stuck = configmap("stuck", name)
    stuck["metadata"]["finalizers"] = ["example.com/never-removed"]
    admin.apply(stuck)
    report = delete_namespace(admin, name, timeout=30, force_finalizers_after=1)
    assert report.deleted and report.forced
    assert [str(h) for h in report.held_by] == [
        f"ConfigMap {name}/stuck (v1) (finalizers: example.com/never-removed)"
    ]
    assert "ktest removed these finalizers" in report.summary()


def test_a_namespace_deletion_is_awaited_by_a_watch_not_a_read_every_50_ms(admin: Cluster) -> None:
    """The namespace controller takes seconds to empty a namespace; ktest used to GET it every 50 ms
    meanwhile (about 100 reads a test, the API server's busiest work in a suite)."""
    from ktest.cluster import rest
    from ktest.cluster.namespaces import create_namespace, delete_namespace, unique_name

    name = create_namespace(admin, unique_name("watched"))
    admin.apply(configmap("some", name))
    requests: list[str] = []
    token = rest.request_observers.set((lambda host, method, path, status, seconds: requests.append(path),))
    try:
        report = delete_namespace(admin, name, timeout=60)
    finally:
        rest.request_observers.reset(token)
    reads = [path for path in requests if path == f"/api/v1/namespaces/{name}"]
    watches = [path for path in requests if "watch=true" in path and f"metadata.name%3D{name}" in path]
    assert report.deleted and report.seconds > 1, report  # long enough for 20+ polls of 50 ms
    assert watches and len(reads) <= 10, f"{len(reads)} reads, {len(watches)} watches: {requests}"


def test_a_change_that_never_comes_ends_the_wait_after_its_seconds(admin: Cluster, ns: str) -> None:
    made = admin.apply(configmap("still", ns))
    ref = ObjectRef("v1", "ConfigMap", "still", ns)
    assert admin.wait_for_change(ref, made, 1.0) is False
    changed = admin.patch(ref, {"data": {"k": "2"}})
    assert admin.wait_for_change(ref, made, 10.0) is True  # the patch came after the first read
    assert changed["metadata"]["resourceVersion"] != made["metadata"]["resourceVersion"]


def test_refuses_to_delete_a_namespace_ktest_did_not_create(admin: Cluster) -> None:
    from ktest.cluster.namespaces import delete_namespace

    with pytest.raises(ClusterError, match=r"refusing to delete namespace default: ktest did not create it"):
        delete_namespace(admin, "default")


@pytest.mark.slow
def test_background_namespace_deletion_is_drained_with_reports(admin: Cluster) -> None:
    from ktest.cluster.namespaces import NamespaceReaper, create_namespace, unique_name

    reaper = NamespaceReaper(admin, force_finalizers_after=1)
    name = create_namespace(admin, unique_name("bg"))
    stuck = configmap("stuck", name)
    stuck["metadata"]["finalizers"] = ["example.com/never-removed"]
    admin.apply(stuck)
    reaper.submit(name, requested_by="test-x")
    assert reaper.pending() == 1  # submit() did not wait for the deletion
    reports = reaper.drain()
    assert [(r.name, r.requested_by, r.error) for r in reports] == [(name, "test-x", None)]
    assert reports[0].deleted and reports[0].forced
    assert not admin.exists(("v1", "Namespace", name))
    assert reaper.pending() == 0


def test_children_of_a_freshly_installed_kind_are_collected_promptly(admin: Cluster, ns: str) -> None:
    """The GC sees new kinds only on its 30 s resync unless install_crds' hook restarts it."""
    admin.install_crds(crd("test.ktest.dev", "Sprocket", schema=WIDGET_SCHEMA, status=True))
    owner = admin.apply(
        {"apiVersion": "test.ktest.dev/v1", "kind": "Sprocket", "metadata": {"name": "s", "namespace": ns}}
    )
    child = configmap("owned", ns)
    child["metadata"]["ownerReferences"] = [
        {"apiVersion": "test.ktest.dev/v1", "kind": "Sprocket", "name": "s", "uid": owner["metadata"]["uid"]}
    ]
    admin.apply(child)
    admin.delete(owner)
    eventually(lambda: not admin.exists(child), timeout=10)


def test_background_deletion_failures_are_reported_not_lost(admin: Cluster) -> None:
    from ktest.cluster.namespaces import NamespaceReaper

    reaper = NamespaceReaper(admin)
    reaper.submit("default", requested_by="test-y")
    [report] = reaper.drain()
    assert report.requested_by == "test-y" and not report.deleted
    assert isinstance(report.error, ClusterError)
    assert "refusing to delete namespace default" in str(report.error)
    assert admin.exists(("v1", "Namespace", "default"))


@pytest.mark.slow
def test_join_can_wait_for_some_namespaces_only(admin: Cluster) -> None:
    """An operator limited to some namespaces waits only for their deletion before it stops."""
    from ktest.cluster.namespaces import NamespaceReaper, create_namespace, unique_name

    reaper = NamespaceReaper(admin, force_finalizers_after=60)
    quick = create_namespace(admin, unique_name("quick"))
    held = create_namespace(admin, unique_name("held"))
    stuck = configmap("stuck", held)
    stuck["metadata"]["finalizers"] = ["example.com/released-by-the-test"]
    admin.apply(stuck)
    reaper.submit(quick)
    reaper.submit(held)
    reaper.join(only=lambda name: name == quick)
    assert not admin.exists(("v1", "Namespace", quick))
    assert reaper.pending() == 1  # the held namespace is still being deleted
    admin.patch(stuck, {"metadata": {"finalizers": None}})
    reports = reaper.drain()
    assert sorted(r.name for r in reports) == sorted([quick, held])
    assert not any(r.forced for r in reports)
