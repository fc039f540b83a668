"""Simulated nodes on the older minor too (``KTEST_OLDER_K8S_VERSION``, else the previous minor):
its kube-scheduler, and the status fields KWOK writes for it, for the default lifecycle and a
crash loop. ``make test`` runs this file with the older-minor tests, once those binaries are built."""

from __future__ import annotations

import os

from workloads import deployment, pods

from ktest.assets import minors, resolve_assets
from ktest.cluster import Cluster
from ktest.controlplane import ControlPlane
from ktest.nodes import Kubelet
from ktest.wait import eventually

OLDER = os.environ.get("KTEST_OLDER_K8S_VERSION", minors.OLDER_MINOR)


def test_the_older_minor_schedules_runs_and_crash_loops_pods() -> None:
    assets = resolve_assets(OLDER)
    with ControlPlane(assets=assets, nodes=2) as plane, Cluster(plane.kubeconfig) as cluster:
        assert cluster.version.startswith(OLDER + ".")
        node = cluster.get(("v1", "Node", "ktest-node-1"))
        assert node["status"]["nodeInfo"]["kubeletVersion"] == f"v{assets.version}"
        namespace = cluster.create_namespace("older")
        cluster.create(deployment("web", namespace, replicas=2))
        eventually(
            lambda: (
                cluster.get(("apps/v1", "Deployment", "web", namespace))["status"].get("availableReplicas")
                == 2
            ),
            timeout=60,
        )
        kubelet = Kubelet(cluster, namespace)
        kubelet.crash_loop("app=crashy")
        cluster.create(deployment("crashy", namespace, replicas=1))

        def crashed() -> dict:
            found = pods(cluster, namespace, "app=crashy")
            statuses = found[0]["status"].get("containerStatuses") if found else None
            return statuses[0] if statuses and statuses[0].get("restartCount", 0) >= 1 else {}

        status = eventually(crashed, timeout=60)
        assert status["lastState"]["terminated"]["reason"] == "Error"
        kubelet.close()
