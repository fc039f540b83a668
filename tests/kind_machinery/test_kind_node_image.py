"""A ktest node image, for real: its labels, and a kind cluster made from it that works.

One cluster for the module (CPU is scarce): the node becomes Ready, CoreDNS
resolves ``kubernetes.default`` for a Pod (libc lookup with the search list),
and a Pod of the preloaded pause image runs to Ready. Nothing is pulled: every
image comes from the node image itself.
"""

from __future__ import annotations

import json
import subprocess
import time
from typing import Any

import pytest
from kind_helpers import KindTestCluster  # type: ignore[import-not-found]

import ktest
from ktest.assets.progress import Progress
from ktest.backends.kind import recipe
from ktest_offline.node_image import expected_labels, find_node_image, list_node_images, node_image_tag

pytestmark = pytest.mark.slow


def test_image_carries_the_labels_of_its_inputs(
    node_image: str, node_version: str, docker_client: Any
) -> None:
    assert node_image == node_image_tag(node_version) == f"ktest/kind-node:v{node_version}"
    labels = docker_client.images.get(node_image).labels
    assert labels[recipe.LABEL_KUBERNETES_VERSION] == f"v{node_version}"
    assert labels[recipe.LABEL_KIND_VERSION] == recipe.KIND_VERSION
    assert labels[recipe.LABEL_RECIPE_VERSION] == recipe.RECIPE_VERSION
    time.strptime(labels[recipe.LABEL_BUILD_DATE], "%Y-%m-%dT%H:%M:%SZ")
    assert expected_labels(node_version).items() <= labels.items()
    assert find_node_image(node_version) == node_image
    listed = {info.reference: info for info in list_node_images()}
    assert listed[node_image].usable and listed[node_image].k8s_version == node_version


def test_image_holds_the_version_file_and_binaries_kind_reads(node_image: str, node_version: str) -> None:
    finished = subprocess.run(
        ["docker", "run", "--rm", "--entrypoint", "sh", node_image, "-c",
         "cat /kind/version; kubelet --version; kubeadm version -o short; crictl --version; "
         "grep sandbox_image /etc/containerd/config.toml"],
        capture_output=True, text=True, timeout=120, check=True,
    )
    lines = finished.stdout.splitlines()
    assert lines[0] == f"v{node_version}"
    assert lines[1] == f"Kubernetes v{node_version}"
    assert lines[2] == f"v{node_version}"
    assert lines[3] == f"crictl version {recipe.CRICTL_VERSION}"
    assert f'"registry.k8s.io/pause:{recipe.minor_recipe(node_version).pause}"' in lines[4]


def _node(cluster: KindTestCluster) -> dict[str, Any]:
    nodes = json.loads(cluster.kubectl("get", "nodes", "-o", "json"))["items"]
    assert len(nodes) == 1
    node: dict[str, Any] = nodes[0]
    return node


def test_node_becomes_ready_with_the_image_version(kind_cluster: KindTestCluster, node_version: str) -> None:
    def ready() -> bool:
        conditions = {c["type"]: c["status"] for c in _node(kind_cluster)["status"]["conditions"]}
        return conditions.get("Ready") == "True"

    ktest.eventually(ready, timeout=120, interval=1)
    info = _node(kind_cluster)["status"]["nodeInfo"]
    assert info["kubeletVersion"] == f"v{node_version}"
    assert info["containerRuntimeVersion"].startswith("containerd://")


def _pod(name: str, image: str, **container: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "restartPolicy": "Never",
            "containers": [{"name": "main", "image": image, "imagePullPolicy": "Never", **container}],
        },
    }


def _wait_for_default_service_account(cluster: KindTestCluster) -> None:
    ktest.eventually(
        lambda: "default" in cluster.kubectl("get", "serviceaccounts", "-o", "name", check=False),
        timeout=120, interval=1,
    )


def test_coredns_resolves_kubernetes_default_from_a_pod(
    kind_cluster: KindTestCluster, node_version: str
) -> None:
    kind_cluster.kubectl("-n", "kube-system", "rollout", "status", "deployment/coredns", "--timeout=180s",
                         timeout=200)
    _wait_for_default_service_account(kind_cluster)
    service_ip = kind_cluster.kubectl("get", "service", "kubernetes", "-o", "jsonpath={.spec.clusterIP}")
    # The kube-proxy image is Debian plus kube-proxy: it has getent (a libc lookup that applies
    # the Pod's DNS search list, unlike busybox nslookup).
    image = f"{recipe.IMAGE_REGISTRY}/kube-proxy:v{node_version}"
    kind_cluster.apply(_pod("dns-check", image, command=["getent", "hosts", "kubernetes.default"]))

    def finished() -> str:
        phase: str = kind_cluster.kubectl("get", "pod", "dns-check", "-o", "jsonpath={.status.phase}")
        assert phase != "Failed", kind_cluster.kubectl("logs", "dns-check", check=False)
        return phase

    ktest.eventually(lambda: finished() == "Succeeded", timeout=120, interval=1)
    answer = kind_cluster.kubectl("logs", "dns-check")
    assert answer.split()[:2] == [service_ip, "kubernetes.default.svc.cluster.local"], answer


def test_a_pod_of_the_preloaded_pause_image_runs_to_ready(
    kind_cluster: KindTestCluster, node_version: str
) -> None:
    _wait_for_default_service_account(kind_cluster)
    image = f"{recipe.IMAGE_REGISTRY}/pause:{recipe.minor_recipe(node_version).pause}"
    kind_cluster.apply(_pod("pause-check", image))
    kind_cluster.kubectl("wait", "pod/pause-check", "--for=condition=Ready", "--timeout=120s", timeout=150)
    pod = json.loads(kind_cluster.kubectl("get", "pod", "pause-check", "-o", "json"))
    assert pod["status"]["containerStatuses"][0]["ready"] is True
    assert pod["status"]["podIP"].startswith("10.244.")


def test_the_build_sweep_leaves_cluster_nodes_made_from_the_image_alone(
    kind_cluster: KindTestCluster, docker_client: Any
) -> None:
    """Node containers inherit the image's labels; the leftover sweep must never take them for its own."""
    from ktest.backends.kind.cache import KindCache
    from ktest_offline.node_image.build import build_lock, sweep_build_containers

    node = docker_client.containers.get(f"{kind_cluster.name}-control-plane")
    assert node.labels[recipe.LABEL_BUILD_CONTAINER] == recipe.BUILD_COMMITTED
    quiet = Progress(enabled=False)
    with build_lock(KindCache.from_env(), quiet):  # as a build does: no other build is running
        assert sweep_build_containers(docker_client, quiet) == 0
    node.reload()
    assert node.status == "running"
