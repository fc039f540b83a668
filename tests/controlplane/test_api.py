"""The shared control plane behaves like a real cluster: CRUD, RBAC, CEL, audit."""

from __future__ import annotations

import json
import re
import uuid
from typing import Any

import kubernetes
import pytest
from builders import crd
from controlplane_helpers import client_for

from ktest.assets.bundle import Assets
from ktest.controlplane import ControlPlane
from ktest.wait import eventually

ApiException = kubernetes.client.ApiException


def test_properties_describe_the_running_plane(shared_plane: ControlPlane) -> None:
    assert re.fullmatch(r"https://127\.0\.0\.1:\d+", shared_plane.server)
    assert shared_plane.kubeconfig.is_file()
    assert shared_plane.directory.is_dir()
    assert shared_plane.log_path("kube-apiserver").is_file()
    assert shared_plane.log_path("etcd").is_file()
    assert shared_plane.version  # "1.37.2" for stamped binaries
    assert shared_plane.controllers == frozenset({"garbagecollector", "namespace"})


def test_version_matches_the_api_server(
    shared_plane: ControlPlane, admin_client: Any, assets: Assets
) -> None:
    reported = kubernetes.client.VersionApi(admin_client).get_code().git_version
    release = re.fullmatch(r"v(\d+\.\d+\.\d+)", reported)
    unstamped = reported.startswith("v0.0.0")  # built without version stamping: v0.0.0-master+$Format$
    assert release or unstamped, f"the API server reports {reported!r}: neither vX.Y.Z nor an unstamped build"
    # An unstamped binary cannot say its version: the plane says the binaries' version instead.
    expected = assets.version if unstamped else reported.removeprefix("v")
    assert re.fullmatch(r"\d+\.\d+\.\d+", expected), expected
    assert shared_plane.version == expected, f"the API server reports {reported!r}"


def test_create_read_update_delete(admin_client: Any, namespace: str) -> None:
    core = kubernetes.client.CoreV1Api(admin_client)
    body = {"metadata": {"name": "settings"}, "data": {"mode": "fast"}}
    created = core.create_namespaced_config_map(namespace, body)
    assert created.metadata.resource_version

    read = core.read_namespaced_config_map("settings", namespace)
    assert read.data == {"mode": "fast"}

    core.patch_namespaced_config_map("settings", namespace, {"data": {"mode": "safe"}})
    assert core.read_namespaced_config_map("settings", namespace).data == {"mode": "safe"}

    stale = created  # its resourceVersion is now outdated: a real conflict
    stale.data = {"mode": "stale"}
    with pytest.raises(ApiException) as conflict:
        core.replace_namespaced_config_map("settings", namespace, stale)
    assert conflict.value.status == 409

    core.delete_namespaced_config_map("settings", namespace)
    with pytest.raises(ApiException) as missing:
        core.read_namespaced_config_map("settings", namespace)
    assert missing.value.status == 404


def test_pods_can_be_created_in_a_new_namespace(admin_client: Any, namespace: str) -> None:
    """No default ServiceAccount exists, yet Pods are admitted (ServiceAccount plugin off)."""
    core = kubernetes.client.CoreV1Api(admin_client)
    pod = {
        "metadata": {"name": "web"},
        "spec": {"containers": [{"name": "web", "image": "nginx"}]},
    }
    created = core.create_namespaced_pod(namespace, pod)
    assert created.metadata.uid


def test_user_is_denied_until_rbac_grants_access(
    shared_plane: ControlPlane, admin_client: Any, namespace: str
) -> None:
    kubeconfig = shared_plane.add_user("alice", groups=["team-a"])
    user_client = client_for(kubeconfig)
    try:
        who = kubernetes.client.AuthenticationV1Api(user_client).create_self_subject_review(
            {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}
        )
        assert who.status.user_info.username == "alice"
        assert "team-a" in who.status.user_info.groups

        user_core = kubernetes.client.CoreV1Api(user_client)
        with pytest.raises(ApiException) as denied:
            user_core.list_namespaced_config_map(namespace)
        assert denied.value.status == 403
        assert "alice" in denied.value.body

        rbac = kubernetes.client.RbacAuthorizationV1Api(admin_client)
        rbac.create_namespaced_role(
            namespace,
            {
                "metadata": {"name": "read-configmaps"},
                "rules": [
                    {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list"]}
                ],
            },
        )
        rbac.create_namespaced_role_binding(
            namespace,
            {
                "metadata": {"name": "team-a-reads"},
                "roleRef": {
                    "apiGroup": "rbac.authorization.k8s.io",
                    "kind": "Role",
                    "name": "read-configmaps",
                },
                "subjects": [
                    {"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "team-a"}
                ],
            },
        )

        def allowed() -> bool:
            try:
                user_core.list_namespaced_config_map(namespace)
            except ApiException as error:
                if error.status != 403:
                    raise
                return False
            return True

        eventually(allowed, timeout=30, description="the RoleBinding to take effect")
        # The grant is for reading only.
        with pytest.raises(ApiException) as still_denied:
            user_core.create_namespaced_config_map(namespace, {"metadata": {"name": "x"}})
        assert still_denied.value.status == 403
    finally:
        user_client.close()


def test_add_user_same_name_twice_gives_two_kubeconfigs(shared_plane: ControlPlane) -> None:
    first = shared_plane.add_user("system:serviceaccount:ns:bob")
    second = shared_plane.add_user("system:serviceaccount:ns:bob", groups=["g"])
    assert first != second
    assert first.is_file() and second.is_file()


CRD = crd("example.com", "Widget", schema={
    "type": "object",
    "properties": {
        "spec": {
            "type": "object",
            "properties": {
                "replicas": {"type": "integer"},
                "maxReplicas": {"type": "integer"},
            },
            "x-kubernetes-validations": [
                {
                    "rule": "self.replicas <= self.maxReplicas",
                    "message": "replicas must not exceed maxReplicas",
                }
            ],
        }
    },
})


def test_cel_validation_rejects_a_bad_object(admin_client: Any, namespace: str) -> None:
    extensions = kubernetes.client.ApiextensionsV1Api(admin_client)
    extensions.create_custom_resource_definition(CRD)

    def established() -> bool:
        crd = extensions.read_custom_resource_definition("widgets.example.com")
        conditions = crd.status.conditions or []
        return any(c.type == "Established" and c.status == "True" for c in conditions)

    eventually(established, timeout=30, description="the CRD to be established")
    custom = kubernetes.client.CustomObjectsApi(admin_client)

    def widget(name: str, replicas: int) -> dict[str, Any]:
        return {
            "apiVersion": "example.com/v1",
            "kind": "Widget",
            "metadata": {"name": name},
            "spec": {"replicas": replicas, "maxReplicas": 3},
        }

    def create(body: dict[str, Any]) -> Any:
        return custom.create_namespaced_custom_object("example.com", "v1", namespace, "widgets", body)

    # Served may lag Established by a moment: the first create may 404.
    eventually(
        lambda: _created_or_not_found(create, widget("good", 2)), timeout=60,
        description="the CRD to be served",
    )
    with pytest.raises(ApiException) as rejected:
        create(widget("bad", 5))
    assert rejected.value.status == 422
    assert "replicas must not exceed maxReplicas" in rejected.value.body


def _created_or_not_found(create: Any, body: dict[str, Any]) -> bool:
    try:
        create(body)
    except ApiException as error:
        if error.status == 404:
            return False
        raise
    return True


def test_audit_log_records_requests(shared_plane: ControlPlane, admin_client: Any) -> None:
    assert shared_plane.audit_log is not None
    assert shared_plane.audit_log.parent == shared_plane.directory
    name = f"audit-probe-{uuid.uuid4().hex[:8]}"
    kubernetes.client.CoreV1Api(admin_client).create_namespaced_config_map(
        "default", {"metadata": {"name": name}}
    )

    def audited() -> bool:
        if not shared_plane.audit_log or not shared_plane.audit_log.exists():
            return False
        for line in shared_plane.audit_log.read_text().splitlines():
            event = json.loads(line)
            if (
                event.get("level") == "Metadata"
                and event.get("user", {}).get("username") == "ktest-admin"
                and event.get("objectRef", {}).get("resource") == "configmaps"
                and event.get("objectRef", {}).get("name") == name
                and event.get("verb") == "create"
                and "requestObject" not in event  # Metadata level: no bodies
            ):
                return True
        return False

    eventually(audited, timeout=30, description="the create to appear in the audit log")
