"""What only real nodes can show, on the session's kind cluster: pods run, DNS, Services, images."""

from __future__ import annotations

import urllib.request
from typing import Any

import pytest

from ktest.backends.kind.handle import KindHandle
from ktest.backends.kind.kubeadm_patches import COREDNS_PROBE_PERIOD
from ktest.backends.kind.recipe import IMAGE_REGISTRY, minor_recipe
from ktest.cluster import Cluster
from ktest.errors import KindError
from ktest.wait import eventually
from tests.on_kind.conftest import echo_deployment, one_shot_pod, service


def _available(cluster: Cluster, namespace: str, name: str) -> int:
    deployment = cluster.get(("apps/v1", "Deployment", name, namespace))
    return int(deployment.get("status", {}).get("availableReplicas") or 0)


def _pod_phase(cluster: Cluster, namespace: str, name: str) -> str:
    return str(cluster.get(("v1", "Pod", name, namespace)).get("status", {}).get("phase", ""))


def _serve_echo(cluster: Cluster, namespace: str, kind: KindHandle, image: str, name: str) -> None:
    """The echo server as Deployment and Service ``name``, once its one replica is available."""
    kind.load_image(image)
    cluster.apply(echo_deployment(name, image), namespace=namespace)
    cluster.apply(service(name), namespace=namespace)
    eventually(
        lambda: _available(cluster, namespace, name) == 1, timeout=90, description=f"{name} is available"
    )


def _run_to_success(cluster: Cluster, namespace: str, kind: KindHandle, pod: dict[str, Any]) -> str:
    """Run the one-shot ``pod`` to its end; its log, once it has succeeded (the log tells why not)."""
    name = pod["metadata"]["name"]
    cluster.create(pod, namespace=namespace)
    eventually(
        lambda: _pod_phase(cluster, namespace, name) in ("Succeeded", "Failed"),
        timeout=90,
        description=f"the {name} pod finished",
    )
    logs = kind.kubectl("logs", "-n", namespace, name)
    assert _pod_phase(cluster, namespace, name) == "Succeeded", logs
    return logs


def test_coredns_readiness_is_probed_every_second(cluster: Cluster) -> None:
    coredns = cluster.get(("apps/v1", "Deployment", "coredns", "kube-system"))
    [container] = [c for c in coredns["spec"]["template"]["spec"]["containers"] if c["name"] == "coredns"]
    assert container["readinessProbe"]["periodSeconds"] == COREDNS_PROBE_PERIOD
    assert container["readinessProbe"]["httpGet"]["path"] == "/ready", "the patch must keep kubeadm's probe"
    assert coredns["metadata"]["generation"] == 1, "kubeadm created it so: no rollout replaced its pods"


def test_a_pause_pod_runs_to_ready(cluster: Cluster, namespace: str, kind: KindHandle) -> None:
    """The node image's own pause image (pinned in containerd) runs: the kubelet and CNI work."""
    pause = f"{IMAGE_REGISTRY}/pause:{minor_recipe(kind.version).pause}"
    pod = one_shot_pod("pause", pause, [])
    pod["spec"]["containers"][0]["imagePullPolicy"] = "IfNotPresent"
    cluster.create(pod, namespace=namespace)

    def ready() -> bool:
        status = cluster.get(("v1", "Pod", "pause", namespace)).get("status", {})
        return any(c["type"] == "Ready" and c["status"] == "True" for c in status.get("conditions") or ())

    eventually(ready, timeout=60, description="the pause pod is Ready")
    assert cluster.get(("v1", "Pod", "pause", namespace))["status"]["podIP"].startswith("10.244.")


def test_a_deployment_becomes_available(
    cluster: Cluster, namespace: str, kind: KindHandle, echo_image: str
) -> None:
    kind.load_image(echo_image)
    cluster.apply(echo_deployment("echo", echo_image, replicas=2), namespace=namespace)
    eventually(
        lambda: _available(cluster, namespace, "echo") == 2,
        timeout=90,
        description="both echo replicas are available (readiness probe passing)",
    )


def test_a_service_resolves_by_dns_and_answers_through_kube_proxy(
    cluster: Cluster, namespace: str, kind: KindHandle, echo_image: str
) -> None:
    _serve_echo(cluster, namespace, kind, echo_image, "web")
    # `resolve` uses the pod's search list: "web" is the test namespace's Service.
    resolver = one_shot_pod("client", echo_image, ["resolve", "web", "kubernetes.default"])
    logs = _run_to_success(cluster, namespace, kind, resolver)
    assert "web: [10." in logs and "kubernetes.default: [10." in logs, logs

    fetcher = one_shot_pod("fetcher", echo_image, ["fetch", "http://web:8080/"])
    fetched = _run_to_success(cluster, namespace, kind, fetcher)
    assert "200 echo from web-" in fetched, fetched


def test_port_forward_reaches_a_service(
    cluster: Cluster, namespace: str, kind: KindHandle, echo_image: str
) -> None:
    _serve_echo(cluster, namespace, kind, echo_image, "fwd")
    with (
        kind.port_forward("svc/fwd", 8080, namespace=namespace) as port,
        urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=10) as response,
    ):
        assert response.read().decode().startswith("echo from fwd-")


def test_port_forward_to_a_missing_target_says_so(kind: KindHandle, namespace: str) -> None:
    with (
        pytest.raises(KindError, match=r"(?s)port-forward to svc/absent:80 failed:.*\"absent\" not found"),
        kind.port_forward("svc/absent", 80, namespace=namespace),
    ):
        pass


def test_load_image_skips_nodes_that_already_have_it(kind: KindHandle, echo_image: str) -> None:
    kind.load_image(echo_image)
    assert kind.load_image(echo_image) == []  # same image ID on every node: nothing to do


def test_load_image_refuses_latest(kind: KindHandle) -> None:
    with pytest.raises(KindError, match=r"refusing to load 'busybox:latest'.*imagePullPolicy Always"):
        kind.load_image("busybox:latest")
    with pytest.raises(KindError, match=r"refusing to load 'example/untagged'"):
        kind.load_image("example/untagged")


def test_load_image_of_an_unknown_image_names_it(kind: KindHandle) -> None:
    with pytest.raises(
        KindError, match=r"image 'ktest-fixtures/absent:v0' is not in the local Docker engine"
    ):
        kind.load_image("ktest-fixtures/absent:v0")


def test_users_get_rbac_on_kind(cluster: Cluster, namespace: str) -> None:
    """cluster.user() signs with the cluster's own (kubeadm, RSA) CA; RBAC applies to that user."""
    from kubernetes.client.exceptions import ApiException

    nobody = cluster.user("ktest-nobody")
    with pytest.raises(ApiException) as refused:
        nobody.list("v1", "ConfigMap", namespace)
    assert refused.value.status == 403


def _manager_manifests(image: str, namespace: str) -> list[dict[str, Any]]:
    labels = {"app": "go-manager"}
    return [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "go-manager"}},
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "Role",
            "metadata": {"name": "go-manager"},
            "rules": [
                {
                    "apiGroups": [""],
                    "resources": ["configmaps"],
                    "verbs": ["create", "get", "list", "update", "watch"],
                }
            ],
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": {"name": "go-manager"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "go-manager"},
            "subjects": [{"kind": "ServiceAccount", "name": "go-manager", "namespace": namespace}],
        },
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "go-manager"},
            "spec": {
                "replicas": 1,
                "selector": {"matchLabels": labels},
                "template": {
                    "metadata": {"labels": labels},
                    "spec": {
                        "serviceAccountName": "go-manager",
                        "containers": [
                            {
                                "name": "manager",
                                "image": "controller:latest",  # kubebuilder's placeholder, replaced by deploy
                                "args": [
                                    f"--namespace={namespace}",
                                    "--health-probe-bind-address=:8081",
                                    "--metrics-bind-address=0",
                                ],
                                "readinessProbe": {
                                    "httpGet": {"path": "/readyz", "port": 8081},
                                    "periodSeconds": 1,
                                },
                            }
                        ],
                    },
                },
            },
        },
    ]


# Building the Go manager (controller-runtime, static) takes minutes the first time.
@pytest.mark.timeout(1800)
def test_an_operator_deployed_in_cluster_reconciles(
    cluster: Cluster, namespace: str, kind: KindHandle, go_manager_image: str
) -> None:
    deployed = kind.deploy_operator(
        go_manager_image, _manager_manifests(go_manager_image, namespace), namespace=namespace
    )
    cluster.create(
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "settings", "labels": {"ktest.dev/mirror": "true"}},
            "data": {"a": "1"},
        },
        namespace=namespace,
    )
    eventually(
        lambda: (
            (cluster.get_or_none(("v1", "ConfigMap", "settings-mirror", namespace)) or {}).get("data")
            == {"a": "1"}
        ),
        timeout=60,
        description="the in-cluster manager mirrored the ConfigMap",
    )
    assert deployed.restarts() == 0
    report = deployed.report()  # what a failing test's report shows
    assert "container restarts: 0" in report
    assert "watching configmaps" in report, report


@pytest.mark.timeout(1800)
def test_a_crashing_in_cluster_operator_fails_with_its_logs(
    cluster: Cluster, namespace: str, kind: KindHandle, go_manager_image: str
) -> None:
    manifests = _manager_manifests(go_manager_image, namespace)
    manifests = [m for m in manifests if m["kind"] not in ("Role", "RoleBinding")]  # no RBAC: it cannot watch
    with pytest.raises(KindError) as failed:
        kind.deploy_operator(go_manager_image, manifests, namespace=namespace, timeout=20)
    message = str(failed.value)
    assert "not Available after 20s" in message
    assert "forbidden" in message.lower(), message  # the manager's own log says why
