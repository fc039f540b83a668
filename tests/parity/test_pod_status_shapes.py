"""The same test on simulated nodes (bare, ``ktest_nodes``) and on real nodes (kind): the Pod and
workload status an operator reads has the same shape on both.

The bare suite runs it on the session's simulated nodes (pyproject.toml's ``ktest_nodes``); the
kind layer (``make test-kind``) runs it unchanged on a kind cluster, with the node image's pause
image (no registry is reachable there).
"""

from __future__ import annotations

from typing import Any

import pytest

from ktest.cluster import Cluster
from ktest.wait import eventually

POD_CONDITIONS = {"PodReadyToStartContainers", "Initialized", "Ready", "ContainersReady", "PodScheduled"}
CONTAINER_FIELDS = {
    "name",
    "image",
    "imageID",
    "containerID",
    "ready",
    "started",
    "restartCount",
    "state",
    "lastState",
}


@pytest.fixture
def image(cluster: Cluster, request: pytest.FixtureRequest) -> str:
    """Any name on simulated nodes; on real nodes an image they hold (kind's pause image)."""
    if cluster.nodes.simulated():
        return "registry.example/web:1"
    if not cluster.nodes.names():
        pytest.skip("this cluster has no nodes (backend bare without ktest_nodes): no Pod is scheduled")
    return str(request.getfixturevalue("kind").pause_image())


def web(namespace: str, image: str, replicas: int) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "namespace": namespace},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "web", "image": image}]},
            },
        },
    }


def test_a_ready_pod_and_its_deployment_read_alike(cluster: Cluster, namespace: str, image: str) -> None:
    cluster.create(web(namespace, image, 2))
    deployment = ("apps/v1", "Deployment", "web", namespace)
    eventually(lambda: cluster.get(deployment)["status"].get("availableReplicas") == 2, timeout=120)
    status = cluster.get(deployment)["status"]
    assert (status["replicas"], status["readyReplicas"], status["updatedReplicas"]) == (2, 2, 2)
    assert {c["type"]: c["status"] for c in status["conditions"]} == {
        "Available": "True",
        "Progressing": "True",
    }
    for pod in cluster.list(("v1", "Pod"), namespace, label_selector="app=web"):
        pod_status = pod["status"]
        assert pod_status["phase"] == "Running"
        assert {c["type"] for c in pod_status["conditions"]} == POD_CONDITIONS
        assert all(c["status"] == "True" for c in pod_status["conditions"])
        assert pod_status["podIP"] and pod_status["hostIP"] and pod_status["startTime"]
        assert [entry["ip"] for entry in pod_status["podIPs"]] == [pod_status["podIP"]]
        (container,) = pod_status["containerStatuses"]
        assert set(container) >= CONTAINER_FIELDS, f"missing: {CONTAINER_FIELDS - set(container)}"
        assert (container["ready"], container["started"], container["restartCount"]) == (True, True, 0)
        assert set(container["state"]) == {"running"} and container["lastState"] == {}
        assert pod_status["qosClass"] == "BestEffort"


def test_endpoints_follow_ready_pods(cluster: Cluster, namespace: str, image: str) -> None:
    cluster.create(web(namespace, image, 1))
    cluster.create(
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": "web", "namespace": namespace},
            "spec": {"selector": {"app": "web"}, "ports": [{"port": 80}]},
        }
    )

    def ready_endpoints() -> list[str]:
        slices = cluster.list(
            ("discovery.k8s.io/v1", "EndpointSlice"),
            namespace,
            label_selector="kubernetes.io/service-name=web",
        )
        return [
            address
            for piece in slices
            for endpoint in piece.get("endpoints") or ()
            if (endpoint.get("conditions") or {}).get("ready")
            for address in endpoint["addresses"]
        ]

    pod = eventually(lambda: cluster.list(("v1", "Pod"), namespace, label_selector="app=web")[0], timeout=60)
    eventually(lambda: ready_endpoints() == [cluster.get(pod)["status"].get("podIP")], timeout=120)
