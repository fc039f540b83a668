"""Backend bare: the inner run starts (and stops) its own embedded control plane."""

from __future__ import annotations

from pathlib import Path

import pytest
from builders import crd_yaml
from inner_runs import GC_OF_NEW_KIND_TEST, printed

pytestmark = pytest.mark.own_plane("the bare backend's own plane: its users, components and their report")


FIXTURES_TESTS = """
import pytest
from kubernetes.client.exceptions import ApiException
from ktest.wait import eventually

def test_control_plane(cluster, control_plane, namespace):
    print("DIR", control_plane.directory)
    assert cluster.server == control_plane.server
    assert cluster.version == control_plane.version
    assert control_plane.controllers == {"garbage-collector-controller", "namespace-controller"}
    assert cluster.gc_available and cluster.namespace_controller_available

def test_users_get_rbac(cluster, namespace):
    alice = cluster.user("alice", ["devs"])
    with pytest.raises(ApiException) as denied:
        alice.list("v1", "ConfigMap", namespace)
    assert denied.value.status == 403
    rbac = "rbac.authorization.k8s.io"
    cluster.apply({"apiVersion": rbac + "/v1", "kind": "Role",
                   "metadata": {"name": "cm-reader", "namespace": namespace},
                   "rules": [{"apiGroups": [""], "resources": ["configmaps"],
                              "verbs": ["get", "list", "watch"]}]})
    cluster.apply({"apiVersion": rbac + "/v1", "kind": "RoleBinding",
                   "metadata": {"name": "devs-read", "namespace": namespace},
                   "roleRef": {"apiGroup": rbac, "kind": "Role", "name": "cm-reader"},
                   "subjects": [{"apiGroup": rbac, "kind": "Group", "name": "devs"}]})

    def alice_can_list():  # RBAC sees the new binding a moment later
        try:
            return alice.list("v1", "ConfigMap", namespace) == []
        except ApiException as error:
            raise AssertionError(f"still {error.status}") from None

    eventually(alice_can_list)

def test_the_cluster_knows_they_run(cluster, namespace):
    assert cluster.gc_available and cluster.namespace_controller_available
"""

DIES_LAST = """
def test_zz_controller_manager_dies(control_plane):
    control_plane.processes()["kube-controller-manager"].kill()
    assert False, "operator stopped making progress"
"""


def test_bare_backend_fixtures_users_and_dead_component_report(
    pytester: pytest.Pytester, inner_env: dict
) -> None:
    """One session of the bare backend: its fixtures, users and the report of a component that
    died. Its controllers are given by their long names, which count as running:
    ``garbage-collector-controller`` is the garbage collector (restarted after new CRDs, so a new
    kind's children are collected at once), ``namespace-controller`` empties namespaces. (The
    default controllers' names: test_plugin_controllers_gate.py.)"""
    gc_test = GC_OF_NEW_KIND_TEST.format(crd=crd_yaml("gc.example.com", "Sprocket"))
    pytester.makepyfile(FIXTURES_TESTS + gc_test + DIES_LAST)
    # The last test kills the namespace controller: the earlier namespaces must be gone by then.
    result = pytester.runpytest_inprocess(
        "-s", "--ktest-namespace-deletion=wait",
        "--ktest-controllers=garbage-collector-controller,namespace-controller", "-W", "default",
    )
    result.assert_outcomes(passed=4, failed=1)
    result.stdout.fnmatch_lines(
        [
            "*ktest: kube-controller-manager died; last lines of its log*",
            "*I1*",  # klog lines of the controller manager's log
        ]
    )
    result.stdout.fnmatch_lines(["cluster: embedded control plane * at https://127.0.0.1:*"])
    (directory,) = printed(result, "DIR ")
    assert not Path(directory).exists(), "the control plane's directory outlived the session"
    assert "NamespaceCleanupWarning" not in result.stdout.str()  # namespace-controller emptied them


def test_bare_without_controllers(pytester: pytest.Pytester, inner_env: dict) -> None:
    pytester.makepyfile(
        """
        def test_one(cluster, control_plane, namespace):
            assert control_plane.controllers == frozenset()
            assert not cluster.namespace_controller_available

        def test_two(namespace):
            pass
        """
    )
    result = pytester.runpytest_inprocess("--ktest-controllers=none")
    result.assert_outcomes(passed=2)
    # Namespaces cannot finish deleting without the namespace controller: said once, not per test.
    assert result.stdout.str().count("NamespaceCleanupWarning: namespace ") == 1
    result.stdout.fnmatch_lines(["*left Terminating: no namespace controller runs on this cluster*"])
