"""Through the plugin: ``--ktest-nodes`` gives the session's bare cluster simulated nodes, the
session header names them, the ``kubelet`` fixture works in a test's namespace and fails a test
whose behaviour selected no Pod; without nodes it skips with the reason; a bad count is refused.

The session with nodes is also the one that runs the plugin's default controllers on a plane of
its own: its first test checks them and the plugin's wait for them (the gate of
tests/plugin/test_plugin_controllers_gate.py, there with controllers named by the user)."""

from __future__ import annotations

import pytest
from inner_runs import run_inner

from ktest.assets import Assets

INNER = """
from ktest import eventually

def test_default_controllers_run_before_the_first_test_body(ktest_backend):
    from ktest.controlplane.controller_manager import ready_markers
    from ktest.nodes.simulator import WORKLOAD_CONTROLLERS
    plane = ktest_backend.control_plane
    log = plane.log_path("kube-controller-manager").read_bytes()
    missing = [m for m in ready_markers(plane.controllers) if m not in log]
    assert not missing, f"the test body ran before the controllers: {missing}"
    # no --ktest-controllers: the default ones, by their short names (and those the nodes need)
    assert plane.controllers == {"garbagecollector", "namespace", *WORKLOAD_CONTROLLERS}

def deployment(name, namespace):
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "namespace": namespace},
            "spec": {"replicas": 2, "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}},
                                  "spec": {"containers": [{"name": "c", "image": "example/app:1"}]}}}}

def test_available(cluster, namespace, kubelet):
    kubelet.crash_loop("app=broken")
    cluster.create(deployment("web", namespace))
    cluster.create(deployment("broken", namespace))
    web = ("apps/v1", "Deployment", "web", namespace)
    eventually(lambda: cluster.get(web)["status"]["availableReplicas"] == 2, timeout=30)
    # the broken Pods may not exist yet when web is available: an IndexError is "not yet" too
    broken = lambda: cluster.list(("v1", "Pod"), namespace, label_selector="app=broken")[0]
    eventually(lambda: broken()["status"]["containerStatuses"][0]["restartCount"] >= 1, timeout=30)

def test_typo(cluster, namespace, kubelet):
    kubelet.not_ready("app=wbe")
    cluster.create(deployment("web", namespace))
"""


def test_the_plugin_runs_simulated_nodes_and_the_kubelet_fixture(
    pytester: pytest.Pytester, k8s_assets: Assets, inner_env: dict[str, str]
) -> None:
    result = run_inner(
        pytester, INNER, "--ktest-nodes=2", f"--ktest-k8s-version={k8s_assets.version}", "-p", "no:xdist"
    )
    result.assert_outcomes(passed=3, errors=1)
    result.stdout.fnmatch_lines(["*nodes=2*"])
    result.stdout.fnmatch_lines(
        ["cluster: embedded control plane *; 2 simulated nodes (kube-scheduler + KWOK 0.8.0))"]
    )
    result.stdout.fnmatch_lines(["*kubelet.not_ready('app=wbe') selected no Pod in namespace*"])


def test_the_kubelet_fixture_skips_without_simulated_nodes_and_bad_counts_are_refused(
    pytester: pytest.Pytester, k8s_assets: Assets, inner_env: dict[str, str]
) -> None:
    result = run_inner(
        pytester,
        "def test_it(kubelet):\n    pass\n",
        "-rs",
        f"--ktest-k8s-version={k8s_assets.version}",
        "-p",
        "no:xdist",
    )
    result.assert_outcomes(skipped=1)
    result.stdout.fnmatch_lines(["*the kubelet fixture needs simulated nodes*--ktest-nodes 3*"])
    refused = run_inner(
        pytester, "def test_it(cluster):\n    pass\n", "--ktest-nodes=three", "-p", "no:xdist"
    )
    refused.stdout.fnmatch_lines(
        ["*option --ktest-nodes: 'three' is not a valid nodes; give a whole number*"]
    )
    assert refused.ret != 0
