"""The default lifecycle on simulated nodes: Pods scheduled, Running and Ready with the fields a
kubelet writes; Deployments become Available; a Job's Pods complete; deleted Pods go."""

from __future__ import annotations

import ipaddress

from workloads import deployment, finished_job_pod, job, pods

from ktest import eventually

KUBELET_CONDITIONS = {"PodReadyToStartContainers", "Initialized", "Ready", "ContainersReady", "PodScheduled"}


def test_a_deployment_becomes_available_with_kubelet_shaped_pod_status(sim, sim_ns):
    sim.create(deployment("web", sim_ns, replicas=3))
    eventually(
        lambda: sim.get(("apps/v1", "Deployment", "web", sim_ns))["status"]["availableReplicas"] == 3,
        timeout=30,
    )
    nodes = {n["metadata"]["name"]: n for n in sim.list(("v1", "Node"))}
    found = pods(sim, sim_ns, "app=web")
    assert len(found) == 3
    for pod in found:
        status = pod["status"]
        assert status["phase"] == "Running"
        assert {c["type"] for c in status["conditions"]} == KUBELET_CONDITIONS
        assert all(c["status"] == "True" for c in status["conditions"])
        (container,) = status["containerStatuses"]
        assert container["name"] == "main" and container["image"] == "registry.example/app:1"
        assert container["ready"] is True and container["started"] is True
        assert container["restartCount"] == 0
        assert "startedAt" in container["state"]["running"]
        assert container["containerID"].startswith("containerd://")
        node = nodes[pod["spec"]["nodeName"]]
        assert status["hostIP"] == node["status"]["addresses"][0]["address"]
        assert ipaddress.ip_address(status["podIP"]) in ipaddress.ip_network(node["spec"]["podCIDR"])
        assert status["startTime"]


def test_pods_spread_over_the_nodes_as_the_scheduler_decides(sim, sim_ns):
    sim.create(deployment("spread", sim_ns, replicas=6))
    eventually(
        lambda: len([p for p in pods(sim, sim_ns, "app=spread") if p["spec"].get("nodeName")]) == 6,
        timeout=30,
    )
    used = {p["spec"]["nodeName"] for p in pods(sim, sim_ns, "app=spread")}
    assert len(used) >= 2, f"the scheduler put every Pod on {used}"


def test_a_job_completes_as_its_pod_exits_zero(sim, sim_ns):
    sim.create(job("once", sim_ns))
    pod = finished_job_pod(sim, sim_ns, "once", "Complete")
    assert pod["status"]["phase"] == "Succeeded"
    terminated = pod["status"]["containerStatuses"][0]["state"]["terminated"]
    assert (terminated["exitCode"], terminated["reason"]) == (0, "Completed")


def test_a_deleted_pod_goes_and_its_replicaset_replaces_it(sim, sim_ns):
    sim.create(deployment("again", sim_ns, replicas=1))
    first = eventually(
        lambda: [p for p in pods(sim, sim_ns, "app=again") if p["status"].get("phase") == "Running"],
        timeout=30,
    )[0]
    sim.delete(("v1", "Pod", first["metadata"]["name"], sim_ns))
    eventually(
        lambda: (
            [
                p["metadata"]["name"]
                for p in pods(sim, sim_ns, "app=again")
                if p["status"].get("phase") == "Running"
            ]
            not in ([], [first["metadata"]["name"]])
        ),
        timeout=30,
    )
    eventually(lambda: sim.get_or_none(("v1", "Pod", first["metadata"]["name"], sim_ns)) is None, timeout=30)
