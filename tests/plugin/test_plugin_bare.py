"""Backend bare: the inner run starts (and stops) its own embedded control plane.

Both sessions are plugin_planes.py's, shared with other modules: ``LONG_NAMES_SESSION`` (with
test_plugin_controllers_gate.py, whose test only reads the plane) and ``NO_CONTROLLERS_SESSION``
(with test_plugin_min_k8s_on_bare.py and test_plugin_apiserver_flags.py, whose tests open no
namespace and only read the plane)."""

from __future__ import annotations

from pathlib import Path

import pytest
from inner_runs import printed
from plugin_planes import LONG_NAMES_SESSION, NO_CONTROLLERS_SESSION, assert_passed, outcomes, shared_run

pytestmark = pytest.mark.own_plane("the bare backend's own plane: its users, components and their report")


@LONG_NAMES_SESSION.group
def test_bare_backend_fixtures_users_and_dead_component_report(
    pytester: pytest.Pytester, pytestconfig: pytest.Config, inner_env: dict
) -> None:
    """One session of the bare backend: its fixtures, users and the report of a component that
    died (its last test). Its controllers are given by their long names, which count as running:
    ``garbage-collector-controller`` is the garbage collector (restarted after new CRDs, so a new
    kind's children are collected at once), ``namespace-controller`` empties namespaces. (The
    default controllers' names: tests/nodes/test_plugin_nodes.py.)"""
    result = shared_run(pytester, pytestconfig, LONG_NAMES_SESSION)
    assert_passed(
        result,
        "test_control_plane",
        "test_users_get_rbac",
        "test_the_cluster_knows_they_run",
        "test_children_of_a_kind_installed_here_are_collected",
    )
    died = outcomes(result, "test_zz_controller_manager_dies")
    assert died == {"setup": "passed", "call": "failed", "teardown": "passed"}, (
        f"the test killing the controller manager: {died}\n{result.stdout.str()}"
    )
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


@NO_CONTROLLERS_SESSION.group
def test_bare_without_controllers(
    pytester: pytest.Pytester, pytestconfig: pytest.Config, inner_env: dict
) -> None:
    """``--ktest-controllers=none``: no controller runs, and the namespaces left Terminating are
    said once for the session (its two tests opening one each), not per test."""
    result = shared_run(pytester, pytestconfig, NO_CONTROLLERS_SESSION)
    assert_passed(result, "test_no_controller_runs", "test_a_second_namespace")
    assert result.stdout.str().count("NamespaceCleanupWarning: namespace ") == 1
    result.stdout.fnmatch_lines(["*left Terminating: no namespace controller runs on this cluster*"])
