"""``cluster.nodes``: nodes with labels, taints and capacity are real scheduler decisions."""

from __future__ import annotations

import pytest
from workloads import condition, deployment, pods

from ktest import eventually
from ktest.errors import ControlPlaneError, KtestError


@pytest.mark.slow
def test_a_node_selector_and_a_taint_are_honoured(sim, sim_ns):
    sim.nodes.add(
        "gpu-1",
        labels={"accelerator": "gpu"},
        taints=["dedicated=gpu:NoSchedule"],
        capacity={"nvidia.com/gpu": "2"},
    )
    try:
        eventually(
            lambda: condition(sim.get(("v1", "Node", "gpu-1")), "Ready").get("status") == "True", timeout=30
        )
        sim.create(deployment("needs-gpu", sim_ns, replicas=1, nodeSelector={"accelerator": "gpu"}))
        pending = eventually(
            lambda: (
                condition(pods(sim, sim_ns, "app=needs-gpu")[0], "PodScheduled").get("reason")
                == "Unschedulable"
                and pods(sim, sim_ns, "app=needs-gpu")[0]
            ),
            timeout=30,
        )
        assert "untolerated taint" in condition(pending, "PodScheduled")["message"]
        sim.create(
            deployment(
                "tolerates",
                sim_ns,
                replicas=1,
                nodeSelector={"accelerator": "gpu"},
                tolerations=[{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}],
            )
        )
        eventually(
            lambda: pods(sim, sim_ns, "app=tolerates")[0]["spec"].get("nodeName") == "gpu-1", timeout=30
        )
        assert sim.get(("v1", "Node", "gpu-1"))["status"]["allocatable"]["nvidia.com/gpu"] == "2"
    finally:
        sim.nodes.remove("gpu-1")


def test_a_cordoned_node_takes_no_new_pods(sim, sim_ns):
    for name in ("ktest-node-1", "ktest-node-2"):
        sim.nodes.cordon(name)
    try:
        sim.create(deployment("squeezed", sim_ns, replicas=3))
        eventually(
            lambda: len([p for p in pods(sim, sim_ns, "app=squeezed") if p["spec"].get("nodeName")]) == 3,
            timeout=30,
        )
        assert {p["spec"]["nodeName"] for p in pods(sim, sim_ns, "app=squeezed")} == {"ktest-node-3"}
    finally:
        for name in ("ktest-node-1", "ktest-node-2"):
            sim.nodes.uncordon(name)


def test_bad_node_input_is_refused(sim):
    with pytest.raises(ControlPlaneError, match="not of the form key=value:Effect"):
        sim.nodes.add("bad-taint", taints=["dedicated=gpu:Sometimes"])
    with pytest.raises(KtestError, match="node 'ktest-node-1' already exists"):
        sim.nodes.add("ktest-node-1")
    with pytest.raises(ControlPlaneError, match="nodes= must be a whole number"):
        from ktest.controlplane import ControlPlane

        ControlPlane(nodes=-1)
