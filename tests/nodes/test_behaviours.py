"""Each Pod behaviour writes the status fields the real kubelet reports, for the Pods it selects
only; stopping it lets them recover."""

from __future__ import annotations

import pytest
from workloads import condition, deployment, finished_job_pod, job, pods

from ktest import eventually
from ktest.nodes import SimulationError


def first_container(cluster, namespace, selector):
    found = pods(cluster, namespace, selector)
    return (
        found[0]["status"]["containerStatuses"][0]
        if found and found[0]["status"].get("containerStatuses")
        else {}
    )


def test_crash_loop_reports_backoff_restarts_and_the_last_exit(sim, sim_ns, kubelet):
    kubelet.crash_loop("app=crashy")
    sim.create(deployment("crashy", sim_ns, replicas=1))
    sim.create(deployment("healthy", sim_ns, replicas=1))
    status = eventually(
        lambda: (s := first_container(sim, sim_ns, "app=crashy")).get("restartCount", 0) >= 2 and s,
        timeout=30,
    )
    eventually(
        lambda: (
            first_container(sim, sim_ns, "app=crashy").get("state", {}).get("waiting", {}).get("reason")
            == "CrashLoopBackOff"
        ),
        timeout=30,
    )
    status = first_container(sim, sim_ns, "app=crashy")
    assert status["ready"] is False and status["started"] is False
    terminated = status["lastState"]["terminated"]
    assert (terminated["exitCode"], terminated["reason"]) == (1, "Error")
    assert sim.get(("apps/v1", "Deployment", "crashy", sim_ns))["status"].get("availableReplicas") is None
    eventually(
        lambda: sim.get(("apps/v1", "Deployment", "healthy", sim_ns))["status"]["availableReplicas"] == 1,
        timeout=30,
    )


def test_oom_killed_reports_exit_137(sim, sim_ns, kubelet):
    kubelet.oom_killed({"app": "hungry"})
    sim.create(deployment("hungry", sim_ns, replicas=1))
    eventually(
        lambda: (
            first_container(sim, sim_ns, "app=hungry")
            .get("lastState", {})
            .get("terminated", {})
            .get("reason")
            == "OOMKilled"
        ),
        timeout=30,
    )
    assert first_container(sim, sim_ns, "app=hungry")["lastState"]["terminated"]["exitCode"] == 137


def test_image_pull_error_keeps_the_pod_pending(sim, sim_ns, kubelet):
    kubelet.image_pull_error("app=typo")
    sim.create(deployment("typo", sim_ns, replicas=1))
    eventually(
        lambda: (
            first_container(sim, sim_ns, "app=typo").get("state", {}).get("waiting", {}).get("reason")
            == "ImagePullBackOff"
        ),
        timeout=30,
    )
    (pod,) = pods(sim, sim_ns, "app=typo")
    assert pod["status"]["phase"] == "Pending"
    assert "registry.example/app:1" in pod["status"]["containerStatuses"][0]["state"]["waiting"]["message"]


def test_not_ready_holds_until_stopped_then_the_pod_recovers(sim, sim_ns, kubelet):
    behaviour = kubelet.not_ready("app=flaky")
    sim.create(deployment("flaky", sim_ns, replicas=1))
    eventually(lambda: first_container(sim, sim_ns, "app=flaky").get("state", {}).get("running"), timeout=30)
    (pod,) = pods(sim, sim_ns, "app=flaky")
    assert condition(pod, "Ready")["status"] == "False"
    assert condition(pod, "Ready")["reason"] == "ContainersNotReady"
    assert pod["status"]["phase"] == "Running"
    behaviour.stop()
    eventually(
        lambda: sim.get(("apps/v1", "Deployment", "flaky", sim_ns))["status"].get("availableReplicas") == 1,
        timeout=30,
    )


def test_slow_start_makes_ready_wait(sim, sim_ns, kubelet):
    kubelet.slow_start(2, "app=slow")
    sim.create(deployment("slow", sim_ns, replicas=1))
    eventually(lambda: first_container(sim, sim_ns, "app=slow").get("state", {}).get("running"), timeout=30)
    assert first_container(sim, sim_ns, "app=slow")["ready"] is False
    eventually(lambda: first_container(sim, sim_ns, "app=slow").get("ready") is True, timeout=30)


def test_fail_makes_a_job_fail(sim, sim_ns, kubelet):
    kubelet.fail("job=doomed", exit_code=3)
    sim.create(job("doomed", sim_ns))
    pod = finished_job_pod(sim, sim_ns, "doomed", "Failed")
    assert pod["status"]["phase"] == "Failed"
    assert pod["status"]["containerStatuses"][0]["state"]["terminated"]["exitCode"] == 3


def test_evict_fails_the_pod_and_its_replicaset_replaces_it(sim, sim_ns, kubelet):
    sim.create(deployment("evicted", sim_ns, replicas=1))
    eventually(
        lambda: sim.get(("apps/v1", "Deployment", "evicted", sim_ns))["status"].get("availableReplicas") == 1,
        timeout=30,
    )
    behaviour = kubelet.evict("app=evicted")
    eventually(
        lambda: any(p["status"].get("reason") == "Evicted" for p in pods(sim, sim_ns, "app=evicted")),
        timeout=30,
    )
    behaviour.stop()
    eventually(
        lambda: sim.get(("apps/v1", "Deployment", "evicted", sim_ns))["status"].get("availableReplicas") == 1,
        timeout=30,
    )
    evicted = next(p for p in pods(sim, sim_ns, "app=evicted") if p["status"].get("reason") == "Evicted")
    assert evicted["status"]["phase"] == "Failed"
    assert condition(evicted, "DisruptionTarget")["reason"] == "TerminationByKubelet"


def test_node_not_ready_is_tainted_by_node_lifecycle_and_recovers(sim, kubelet):
    behaviour = kubelet.node_not_ready("ktest-node-3")
    eventually(
        lambda: condition(sim.get(("v1", "Node", "ktest-node-3")), "Ready").get("status") == "False",
        timeout=30,
    )
    eventually(
        lambda: (
            "node.kubernetes.io/not-ready"
            in [t["key"] for t in sim.get(("v1", "Node", "ktest-node-3"))["spec"].get("taints") or []]
        ),
        timeout=30,
    )
    behaviour.stop()
    eventually(lambda: not sim.get(("v1", "Node", "ktest-node-3"))["spec"].get("taints"), timeout=30)


def test_unknown_behaviours_bad_selectors_and_unmatched_selectors_are_errors(sim, sim_ns, kubelet):
    with pytest.raises(
        SimulationError, match="unknown Pod behaviour 'crashloop'; known: complete, crash_loop"
    ):
        kubelet.behave("crashloop", "app=x")
    with pytest.raises(SimulationError, match=r"cannot read 'tier in db'"):
        kubelet.crash_loop("app=web,tier in db")
    with pytest.raises(SimulationError, match="no node 'ktest-node-99'"):
        kubelet.node_not_ready("ktest-node-99")
    kubelet.crash_loop("app=nothing-has-this")
    with pytest.raises(SimulationError, match=r"crash_loop\('app=nothing-has-this'\) selected no Pod"):
        kubelet.close()
    assert sim.list(("kwok.x-k8s.io/v1alpha1", "Stage"), label_selector=f"ktest.dev/stage={sim_ns}") == []


def test_a_failure_report_lists_the_pods_with_phase_reason_and_restarts(sim, sim_ns, kubelet):
    from ktest.plugin.diagnostics import describe_namespace

    kubelet.crash_loop("app=crashy")
    sim.create(deployment("crashy", sim_ns, replicas=1))
    eventually(lambda: first_container(sim, sim_ns, "app=crashy").get("restartCount", 0) >= 1, timeout=30)
    (pod,) = pods(sim, sim_ns, "app=crashy")

    def report_of_a_waiting_pod() -> str:
        # The crash loop cycles the container through running, terminated and waiting: the report
        # is checked as it was taken while the container waited, not against an earlier read.
        report = describe_namespace(sim, sim_ns)
        assert "container main: waiting CrashLoopBackOff, restarts " in report, report
        return report

    report = eventually(report_of_a_waiting_pod, timeout=30)
    assert f"Pod/{pod['metadata']['name']} (v1)" in report
    assert f"phase Running, node {pod['spec']['nodeName']}, Ready=False" in report
    assert "last terminated Error (exit 1)" in report
