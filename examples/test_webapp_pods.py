"""The WebApp operator against Pods that really get scheduled and become Ready (or do not).

On bare these run on simulated nodes (``ktest_nodes``, kube-scheduler + KWOK: no Docker); the
``kubelet`` fixture makes the WebApp's Pods start slowly or crash-loop. On kind the readiness
and scaling tests run unchanged on real nodes; the ones that need ``kubelet`` are skipped there
(a real kubelet cannot be told to crash a container), with that reason.

These catch the operator bugs only Pods reveal: reporting Available before its Pods are Ready,
counting crash-looping Pods as ready, and never scaling an existing Deployment.
"""

from __future__ import annotations

from typing import Any

import pytest

from fixtures.operators.webapp.operator import WEBAPP_LABEL
from ktest.assertions import assert_condition
from ktest.cluster import Cluster
from ktest.wait import consistently, eventually

pytestmark = pytest.mark.usefixtures("webapp_operator")

API_VERSION = "platform.example.com/v1alpha1"


@pytest.fixture
def image(cluster: Cluster, request: pytest.FixtureRequest) -> str:
    """An image the nodes can run: any name on simulated nodes, the pause image on kind."""
    if cluster.nodes.simulated():
        return "registry.example/shop:1"
    kind = request.getfixturevalue("kind")
    return str(kind.pause_image())


def web_app(name: str, image: str, replicas: int) -> dict[str, Any]:
    return {
        "apiVersion": API_VERSION,
        "kind": "WebApp",
        "metadata": {"name": name},
        "spec": {"image": image, "replicas": replicas},
    }


def ready_replicas(cluster: Cluster, app: dict[str, Any]) -> int:
    return int((cluster.get(app).get("status") or {}).get("readyReplicas") or 0)


def running_pods(cluster: Cluster, namespace: str, name: str) -> list[dict[str, Any]]:
    pods = cluster.list(("v1", "Pod"), namespace, label_selector=f"{WEBAPP_LABEL}={name}")
    return [
        pod
        for pod in pods
        if pod["status"].get("phase") == "Running" and not pod["metadata"].get("deletionTimestamp")
    ]


def test_available_only_once_its_pods_are_ready(
    cluster: Cluster, namespace: str, kubelet: Any, image: str
) -> None:
    kubelet.slow_start(4, f"{WEBAPP_LABEL}=shop")
    app = cluster.create(web_app("shop", image, replicas=2), namespace=namespace)
    eventually(lambda: len(running_pods(cluster, namespace, "shop")) == 2, timeout=20)
    consistently(lambda: ready_replicas(cluster, app) == 0, duration=1.5)
    assert_condition(cluster, app, "Available", "False", reason="ReplicasNotReady", timeout=1)
    assert_condition(cluster, app, "Available", "True", reason="MinimumReplicasAvailable", timeout=20)
    assert ready_replicas(cluster, app) == 2


def test_a_crash_loop_keeps_the_webapp_unavailable(
    cluster: Cluster, namespace: str, kubelet: Any, image: str
) -> None:
    kubelet.crash_loop(f"{WEBAPP_LABEL}=shop")
    app = cluster.create(web_app("shop", image, replicas=2), namespace=namespace)

    def restarted() -> bool:
        pods = cluster.list(("v1", "Pod"), namespace, label_selector=f"{WEBAPP_LABEL}=shop")
        return len(pods) == 2 and all(
            (pod["status"].get("containerStatuses") or [{}])[0].get("restartCount", 0) >= 1 for pod in pods
        )

    eventually(restarted, timeout=30)
    consistently(lambda: ready_replicas(cluster, app) == 0, duration=2)
    assert_condition(
        cluster, app, "Available", "False", reason="ReplicasNotReady", message="0/2 replicas ready"
    )


def test_scaling_brings_up_ready_pods(cluster: Cluster, namespace: str, image: str) -> None:
    app = cluster.create(web_app("shop", image, replicas=1), namespace=namespace)
    assert_condition(cluster, app, "Available", "True", timeout=60)
    cluster.patch(app, {"spec": {"replicas": 3}})
    eventually(lambda: ready_replicas(cluster, app) == 3, timeout=60)
    assert len(running_pods(cluster, namespace, "shop")) == 3
