"""A timeline recorded on a plane with simulated nodes has a lane for kube-scheduler (each Pod's
binding) and one for the simulated kubelet (KWOK's status writes), each event naming the Pod and
what changed: phase, Ready, a container's state and reason, restarts."""

from __future__ import annotations

from typing import Any

import pytest
from workloads import deployment

from ktest import eventually
from ktest.cluster import Cluster
from ktest.nodes import Kubelet
from ktest.timeline import recording


def pod(name: str, namespace: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "labels": {"app": name}},
        "spec": {"containers": [{"name": "main", "image": "registry.example/app:1"}]},
    }


def lane(data: dict[str, Any], lane_id: str, pod_name: str) -> list[dict[str, Any]]:
    """The events of ``lane_id`` about the Pod ``pod_name``."""
    found = [e for e in data["events"] if e["lane"] == lane_id]
    return [e for e in found if e["detail"].get("pod", "").endswith(f"/{pod_name}")]


def pod_view(data: dict[str, Any]) -> str:
    """What a failure shows of a recording: the Pods' watch events, the scheduler's and kubelet's
    lanes and what could not be recorded."""
    shown = [f"{e['t']:.2f} {e['lane']} {e['label']}" for e in data["events"]
             if (e["kind"] == "watch-event" and e["detail"]["object"].startswith("pods "))
             or e["lane"] in ("kube-scheduler", "simulated-kubelet")]
    return "\n".join(["events:", *shown, f"problems: {data.get('problems')}"])


def event_view(data: dict[str, Any]) -> str:
    """What a failure shows of a recording's Events: each one's lane and source, and what could
    not be recorded."""
    shown = [f"{e['t']:.2f} {e['lane']} [{e['detail']['source']}] {e['label']}" for e in data["events"]
             if e["kind"] == "k8s-event"]
    return "\n".join(["Events:", *shown, f"problems: {data.get('problems')}"])


def reported(cluster: Cluster, namespace: str) -> set[tuple[str, str]]:
    """(reason, object name) of the Events in ``namespace``."""
    events = cluster.list(("v1", "Event"), namespace)
    return {(event["reason"], event["involvedObject"]["name"]) for event in events}


@pytest.fixture
def recorded(sim: Cluster, sim_ns: str, kubelet: Kubelet) -> dict[str, Any]:
    """One recording: a Pod that becomes Running and Ready, one whose container crash-loops, a
    Deployment's Pod (made by kube-controller-manager)."""
    kubelet.crash_loop("app=crashy", backoff=0.2)
    with recording(sim, test="nodes") as rec:
        sim.create(pod("web", sim_ns))
        sim.create(pod("crashy", sim_ns))
        sim.create(deployment("made", sim_ns, replicas=1))
        web, crashy = ("v1", "Pod", "web", sim_ns), ("v1", "Pod", "crashy", sim_ns)
        eventually(lambda: sim.get(web)["status"].get("phase") == "Running", timeout=30)
        made = ("apps/v1", "Deployment", "made", sim_ns)
        eventually(lambda: sim.get(made)["status"].get("availableReplicas") == 1, timeout=30)
        eventually(lambda: sim.get(crashy)["status"]["containerStatuses"][0]["restartCount"] >= 1, timeout=30)
        wanted = {("Scheduled", "web"), ("Scheduled", "crashy"), ("BackOff", "crashy")}
        eventually(lambda: wanted <= reported(sim, sim_ns), timeout=30)
    return rec.data().as_json()


def test_the_scheduler_and_the_simulated_kubelet_have_lanes_of_their_own(recorded: dict[str, Any]) -> None:
    lanes = [entry["id"] for entry in recorded["lanes"]]
    assert lanes[-3:] == ["kube-scheduler", "simulated-kubelet", "faults"], lanes


def test_each_binding_is_on_the_scheduler_lane(recorded: dict[str, Any], sim_ns: str) -> None:
    for name in ("web", "crashy"):
        (bound,) = lane(recorded, "kube-scheduler", name)
        assert bound["kind"] == "scheduling"
        assert bound["detail"]["by"] == "kube-scheduler"
        assert bound["detail"]["node"].startswith("ktest-node-")
        assert bound["label"] == f"kube-scheduler bound Pod {sim_ns}/{name} to {bound['detail']['node']}"


def test_the_kubelets_status_writes_say_what_changed(recorded: dict[str, Any], sim_ns: str) -> None:
    web = lane(recorded, "simulated-kubelet", "web")
    assert web and all(e["kind"] == "kubelet" and e["detail"]["manager"] == "kwok" for e in web)
    changes = [change for e in web for change in e["detail"]["changes"]]
    assert "phase Pending -> Running" in changes, changes
    assert any(change.startswith("Ready ") and change.endswith("-> True") for change in changes), changes
    assert "container main running" in changes, changes
    running = next(e for e in web if "phase Pending -> Running" in e["detail"]["changes"])
    assert running["label"].startswith(f"simulated kubelet on {running['detail']['node']}: Pod {sim_ns}/web ")
    crashy_events = lane(recorded, "simulated-kubelet", "crashy")
    crashy = [change for e in crashy_events for change in e["detail"]["changes"]]
    assert "container main restarts 0 -> 1" in crashy, crashy
    assert "container main waiting (CrashLoopBackOff)" in crashy, crashy


def test_the_schedulers_and_kwoks_events_join_their_lanes(recorded: dict[str, Any], sim_ns: str) -> None:
    def reasons(lane_id: str) -> set[tuple[str, str]]:
        found = [e for e in recorded["events"] if e["lane"] == lane_id and e["kind"] == "k8s-event"]
        return {(e["detail"]["reason"], e["detail"]["object"]) for e in found}

    shown = event_view(recorded)
    assert {("Scheduled", "Pod/web"), ("Scheduled", "Pod/crashy")} <= reasons("kube-scheduler"), shown
    assert ("BackOff", "Pod/crashy") in reasons("simulated-kubelet"), shown
    assert not {what for _, what in reasons("controllers")} & {"Pod/web", "Pod/crashy"}


def test_a_deployments_pod_is_moved_by_the_scheduler_and_kwok_not_the_controllers(
    recorded: dict[str, Any], sim_ns: str
) -> None:
    """Its newest managedFields entry is kube-controller-manager's until KWOK writes: its binding
    is still the scheduler's, its status writes KWOK's."""
    bindings = [e for e in recorded["events"] if e["lane"] == "kube-scheduler" and e["kind"] == "scheduling"]
    made = [e for e in bindings if e["detail"]["pod"].startswith(f"{sim_ns}/made-")]
    assert len(made) == 1, bindings
    writes = lane(recorded, "simulated-kubelet", made[0]["detail"]["pod"].split("/")[1])
    assert "phase Pending -> Running" in [change for e in writes for change in e["detail"]["changes"]]
    controllers = [e for e in recorded["events"] if e["lane"] == "controllers" and e["kind"] == "gc"]
    assert [e["label"] for e in controllers if e["detail"]["object"].startswith("pods ")] == []


def test_a_deployments_pods_are_watched_without_the_test_touching_a_pod(sim: Cluster, sim_ns: str) -> None:
    with recording(sim, test="deployment only") as rec:
        sim.create(deployment("only", sim_ns, replicas=1))
        only = ("apps/v1", "Deployment", "only", sim_ns)
        eventually(lambda: sim.get(only)["status"].get("availableReplicas") == 1, timeout=30)
    data = rec.data().as_json()
    assert f"pods in {sim_ns}" in rec.watched, rec.watched
    bindings = [e for e in data["events"] if e["lane"] == "kube-scheduler" and e["kind"] == "scheduling"]
    assert [e["detail"]["pod"].startswith(f"{sim_ns}/only-") for e in bindings] == [True], pod_view(data)
    writes = lane(data, "simulated-kubelet", bindings[0]["detail"]["pod"].split("/")[1])
    assert "phase Pending -> Running" in [change for e in writes for change in e["detail"]["changes"]]
