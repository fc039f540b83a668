"""Least privilege: roles from the operator's manifests, bound to a user, denials named precisely."""

from __future__ import annotations

from pathlib import Path

import pytest
from builders import configmap, configmap_ref
from kubernetes.client.exceptions import ApiException
from operator_helpers import GO_MANAGER, SAMPLES

from ktest.cluster import Cluster
from ktest.errors import ManifestError, OperatorError
from ktest.operators import find_denials, load_roles, operator_identity, run_kopf
from ktest.run_context import run_context
from ktest.wait import eventually

ROLE = GO_MANAGER / "config" / "rbac" / "role.yaml"


def test_find_denials_in_every_quoting_style() -> None:
    text = "\n".join(
        [
            r'E1130 reconciler error {"error": "configmaps \"x-mirror\" is forbidden: User \"op\" cannot'
            r' create resource \"configmaps\" in API group \"\" in the namespace \"ns1\""}',
            'APIForbiddenError(\'namespaces is forbidden: User "op" cannot list resource "namespaces"'
            ' in API group "" at the cluster scope\')',
            'widgets.example.com "w" is forbidden: User "u" cannot patch resource "widgets/status"'
            ' in API group "example.com" in the namespace "n"',
            "an unrelated line about being forbidden to eat cake",
        ]
    )
    found = find_denials(text)
    assert [(d.user, d.verb, d.resource, d.group, d.namespace) for d in found] == [
        ("op", "create", "configmaps", "", "ns1"),
        ("op", "list", "namespaces", "", None),
        ("u", "patch", "widgets/status", "example.com", "n"),
    ]
    assert found[0].describe() == 'user "op" may not create configmaps (core API group) in namespace "ns1"'
    assert found[1].where == "at cluster scope"
    assert (
        found[2].missing_rule()
        == '{apiGroups: ["example.com"], resources: ["widgets/status"], verbs: ["patch"]}'
    )


def test_load_roles_from_a_kubebuilder_rbac_directory(tmp_path: Path) -> None:
    rbac = tmp_path / "config" / "rbac"
    rbac.mkdir(parents=True)
    (rbac / "role.yaml").write_text(ROLE.read_text())
    (rbac / "role_binding.yaml").write_text(
        "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRoleBinding\n"
        "metadata: {name: manager-rolebinding}\n"
        "roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: manager-role}\n"
        "subjects: [{kind: ServiceAccount, name: controller-manager, namespace: system}]\n"
    )
    (rbac / "service_account.yaml").write_text(
        "apiVersion: v1\nkind: ServiceAccount\nmetadata: {name: controller-manager}\n"
    )
    (rbac / "kustomization.yaml").write_text("resources: [role.yaml]\n")
    roles = load_roles(rbac)
    assert [(m.obj["kind"], m.obj["metadata"]["name"]) for m in roles] == [("ClusterRole", "manager-role")]


def test_load_roles_rejects_what_is_not_a_role(tmp_path: Path) -> None:
    wrong = tmp_path / "deploy.yaml"
    wrong.write_text("apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: manager}\n")
    with pytest.raises(ManifestError, match=r"deploy\.yaml.*Deployment is not an RBAC role"):
        load_roles(wrong)
    only_binding = tmp_path / "binding.yaml"
    only_binding.write_text(
        "apiVersion: rbac.authorization.k8s.io/v1\nkind: RoleBinding\nmetadata: {name: b, namespace: x}\n"
        "roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: r}\n"
    )
    with pytest.raises(ManifestError, match="no ClusterRole or Role found"):
        load_roles(only_binding)


def test_identity_gets_exactly_the_role_and_loses_it_on_revoke(admin: Cluster, ns: str) -> None:
    with operator_identity(admin, ROLE, user="rbac-user") as identity:
        user = identity.cluster
        user.list("v1", "ConfigMap", ns)
        user.create(configmap("made-by-operator", ns))
        with pytest.raises(ApiException) as denied:
            user.delete(configmap_ref("made-by-operator", ns))
        assert denied.value.status == 403
        assert [obj["kind"] for obj in identity.objects] == ["ClusterRole", "ClusterRoleBinding"]
        assert identity.objects[0]["metadata"]["name"] == "ktest-rbac-user-manager-role"
    assert (
        admin.get_or_none(
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "ClusterRole",
                "metadata": {"name": "ktest-rbac-user-manager-role"},
            }
        )
        is None
    )

    def revoked() -> None:
        with pytest.raises(ApiException) as gone:
            user.list("v1", "ConfigMap", ns)
        assert gone.value.status == 403

    eventually(revoked)


def test_identity_limited_to_namespaces(admin: Cluster, ns: str) -> None:
    with (
        admin.namespace(prefix="other", background=True) as other,
        operator_identity(admin, ROLE, user="ns-user", namespaces=[ns]) as identity,
    ):
        identity.cluster.list("v1", "ConfigMap", ns)
        with pytest.raises(ApiException) as denied:
            identity.cluster.list("v1", "ConfigMap", other)
        assert denied.value.status == 403
        assert [obj["kind"] for obj in identity.objects] == ["ClusterRole", "RoleBinding"]


def test_namespaced_role_needs_a_namespace(admin: Cluster) -> None:
    role = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "Role",
        "metadata": {"name": "leader"},
        "rules": [{"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["get"]}],
    }
    with pytest.raises(ManifestError, match=r"has no namespace; set metadata\.namespace or pass namespaces"):
        operator_identity(admin, role, user="nobody")


KOPF_ROLE = {
    "apiVersion": "rbac.authorization.k8s.io/v1",
    "kind": "ClusterRole",
    "metadata": {"name": "kopf-operator"},
    "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list", "watch", "patch"]}],
}


def test_kopf_operator_as_least_privilege_user_is_denied_a_missing_verb(admin: Cluster, ns: str) -> None:
    with operator_identity(admin, KOPF_ROLE, user="kopf-op", namespaces=[ns]) as identity, run_context("t"):
        op = run_kopf(SAMPLES / "kopf_status.py", identity.cluster, namespaces=[ns])
        admin.create(configmap("a", ns, labels={"ktest.dev/seen": "true"}))
        with pytest.raises(OperatorError) as raised:
            eventually(lambda: admin.exists(configmap_ref("a-seen", ns)), timeout=60)
        op.close()
    message = str(raised.value)
    assert 'was refused by RBAC: user "kopf-op" may not create configmaps (core API group)' in message
    assert f'in namespace "{ns}"' in message
    assert 'add the rule {apiGroups: [""], resources: ["configmaps"], verbs: ["create"]}' in message


def test_kopf_operator_as_least_privilege_user_works_with_the_verb(admin: Cluster, ns: str) -> None:
    role = {
        **KOPF_ROLE,
        "rules": [{**KOPF_ROLE["rules"][0], "verbs": ["get", "list", "watch", "patch", "create"]}],
    }
    with (
        operator_identity(admin, role, user="kopf-op-full", namespaces=[ns]) as identity,
        run_kopf(SAMPLES / "kopf_status.py", identity.cluster, namespaces=[ns]),
    ):
        admin.create(configmap("b", ns, labels={"ktest.dev/seen": "true"}))
        eventually(lambda: admin.exists(configmap_ref("b-seen", ns)))
