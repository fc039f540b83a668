"""The WebApp operator (plain ``kubernetes`` client): owned children, status, config roll-out.

One operator runs for the whole session (one per xdist worker, each serving its
worker's namespaces: ``worker_namespace_selector``); each test works in its own
namespace. ktest's embedded control plane runs the
garbage collector but no kubelet and no deployment controller: a Deployment
never gets pods, so ``readyReplicas`` stays 0 unless a test writes the
Deployment's status itself (as ``test_ready_replicas_come_from_the_deployment``
does). With ``--ktest-backend kind`` the same suite runs on real nodes, where
``test_ready_replicas_come_from_running_pods`` sees the pods really run.
"""

from __future__ import annotations

from typing import Any

import pytest

from fixtures.operators.webapp import operator as webapp
from fixtures.operators.webapp.operator import CONFIG_HASH_ANNOTATION, config_hash
from ktest.assertions import (
    assert_condition,
    assert_garbage_collected,
    assert_gone,
    assert_observed_generation,
    assert_owned_by,
    assert_quiescent,
    assert_survives_concurrent_writes,
)
from ktest.backends.kind.handle import KindHandle
from ktest.cluster import Cluster
from ktest.operators import OperatorContext, run_callable
from ktest.wait import assert_matches, consistently, eventually

pytestmark = pytest.mark.usefixtures("webapp_operator")

API_VERSION = "platform.example.com/v1alpha1"


def web_app(
    name: str = "shop", *, image: str = "nginx:1.27", replicas: int = 2, config_ref: str | None = None
) -> dict[str, Any]:
    spec: dict[str, Any] = {"image": image, "replicas": replicas}
    if config_ref:
        spec["configRef"] = config_ref
    return {"apiVersion": API_VERSION, "kind": "WebApp", "metadata": {"name": name}, "spec": spec}


def config_map(name: str, data: dict[str, str]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": data}


def deployment_of(app: dict[str, Any]) -> tuple[str, str, str, str]:
    return ("apps/v1", "Deployment", app["metadata"]["name"], app["metadata"]["namespace"])


def service_of(app: dict[str, Any]) -> tuple[str, str, str, str]:
    return ("v1", "Service", app["metadata"]["name"], app["metadata"]["namespace"])


def reconciled(cluster: Cluster, namespace: str, app: dict[str, Any]) -> dict[str, Any]:
    """Create a WebApp and wait until the operator reports its children up to date (and, where
    its Pods run on simulated nodes, Available: until then the operator rightly writes status)."""
    created = cluster.create(app, namespace=namespace)
    assert_condition(cluster, created, "Reconciled", "True", reason="ChildrenUpToDate")
    if cluster.nodes.simulated():
        assert_condition(cluster, created, "Available", "True", timeout=60)
    return created


# ----------------------------------------------------------------------------- xdist workers


def test_another_workers_copy_leaves_this_workers_webapps_alone(cluster: Cluster, namespace: str) -> None:
    """With ``-n 2`` each worker runs its own session operator on the shared cluster; one
    that served every namespace would reconcile the other worker's WebApps too."""

    def other_worker(ctx: OperatorContext) -> None:
        webapp.run(str(ctx.kubeconfig), ctx.stop, ctx.ready, namespace_selector="ktest.dev/worker=elsewhere")

    with run_callable(other_worker, cluster, name="other-worker") as copy:
        app = reconciled(cluster, namespace, web_app())
        assert_quiescent(cluster, app, children=[deployment_of(app), service_of(app)], window=1)
        about_this_test = [call.describe() for call in copy.traffic.calls(namespace=namespace)]
        assert about_this_test == [], "the other worker's copy acted in this worker's namespace"


# ----------------------------------------------------------------------------- owned children


def test_a_deployment_and_a_service_are_owned_by_the_webapp(cluster: Cluster, namespace: str) -> None:
    app = cluster.create(web_app(), namespace=namespace)

    assert_owned_by(cluster, deployment_of(app), app, controller=True, block_owner_deletion=True)
    assert_owned_by(cluster, service_of(app), app, controller=True, block_owner_deletion=True)


@pytest.mark.parametrize("child", [deployment_of, service_of], ids=["deployment", "service"])
def test_a_deleted_child_is_recreated(cluster: Cluster, namespace: str, child: Any) -> None:
    app = reconciled(cluster, namespace, web_app())
    # Wait until the operator is idle, so that only the deletion can make it act again.
    assert_quiescent(cluster, app, children=[child(app)], window=1)
    original = cluster.get(child(app))

    cluster.delete(original)

    def recreated() -> None:
        current = cluster.get_or_none(child(app))
        assert current is not None, f"the deleted {original['kind']} was not recreated by the operator"
        assert current["metadata"]["uid"] != original["metadata"]["uid"], (
            "still the old object (being deleted)"
        )

    eventually(recreated)


def test_children_are_garbage_collected_with_the_webapp(cluster: Cluster, namespace: str) -> None:
    app = reconciled(cluster, namespace, web_app())
    service = cluster.get(service_of(app))

    assert_garbage_collected(cluster, deployment_of(app), app)  # deletes the WebApp, then waits
    assert_gone(cluster, service)


# ----------------------------------------------------------------------------- spec and status


def test_scaling_the_webapp_scales_its_deployment(cluster: Cluster, namespace: str) -> None:
    app = reconciled(cluster, namespace, web_app(replicas=2))

    cluster.patch(app, {"spec": {"replicas": 3}})

    eventually(lambda: assert_matches(cluster.get(deployment_of(app)), {"spec": {"replicas": 3}}))
    # The spec belongs to the user: the operator must never write it back.
    consistently(lambda: assert_matches(cluster.get(app), {"spec": {"replicas": 3}}), duration=1)


def test_status_follows_the_generation(cluster: Cluster, namespace: str) -> None:
    app = reconciled(cluster, namespace, web_app(image="nginx:1.27"))
    assert_observed_generation(cluster, app)

    cluster.patch(app, {"spec": {"image": "nginx:1.28"}})

    assert_observed_generation(cluster, app)
    assert_condition(cluster, app, "Reconciled", "True", observed_generation=True)
    assert_matches(
        cluster.get(deployment_of(app)),
        {"spec": {"template": {"spec": {"containers": [{"name": "web", "image": "nginx:1.28"}]}}}},
    )


def test_ready_replicas_come_from_the_deployment(cluster: Cluster, namespace: str) -> None:
    """No kubelet here: the test plays the deployment controller and writes the Deployment's status."""
    if cluster.controllers is None or "deployment" in cluster.controllers:
        pytest.skip("a real deployment controller owns Deployment status here; see ..._from_running_pods")
    app = reconciled(cluster, namespace, web_app(replicas=2))
    assert_condition(cluster, app, "Available", "False", reason="ReplicasNotReady")

    cluster.patch(
        deployment_of(app),
        {"status": {"replicas": 2, "readyReplicas": 2, "availableReplicas": 2}},
        subresource="status",
    )

    assert_condition(cluster, app, "Available", "True", reason="MinimumReplicasAvailable")
    assert_matches(cluster.get(app), {"status": {"readyReplicas": 2}})


def test_ready_replicas_come_from_running_pods(cluster: Cluster, namespace: str, kind: KindHandle) -> None:
    """Real nodes (--ktest-backend kind): the pods really run; the pause image is on every node."""
    app = reconciled(cluster, namespace, web_app(image=kind.pause_image(), replicas=2))
    assert_condition(cluster, app, "Available", "True", reason="MinimumReplicasAvailable", timeout=90)
    assert_matches(cluster.get(app), {"status": {"readyReplicas": 2}})


# ----------------------------------------------------------------------------- the referenced ConfigMap


def test_a_configmap_change_rolls_out_to_the_deployment(cluster: Cluster, namespace: str) -> None:
    settings = cluster.create(config_map("shop-settings", {"GREETING": "hello"}), namespace=namespace)
    app = reconciled(cluster, namespace, web_app(config_ref="shop-settings"))

    def template_hash() -> str:
        annotations = cluster.get(deployment_of(app))["spec"]["template"]["metadata"].get("annotations") or {}
        return str(annotations.get(CONFIG_HASH_ANNOTATION))

    assert template_hash() == config_hash({"GREETING": "hello"})

    cluster.patch(settings, {"data": {"GREETING": "bonjour"}})

    eventually(
        lambda: template_hash() == config_hash({"GREETING": "bonjour"}),
        description="the Deployment's pod template carries the new ConfigMap's hash",
    )


def test_a_missing_configmap_is_waited_for(cluster: Cluster, namespace: str) -> None:
    app = cluster.create(web_app(config_ref="shop-settings"), namespace=namespace)
    assert_condition(cluster, app, "Reconciled", "False", reason="ConfigMapNotFound")

    cluster.create(config_map("shop-settings", {"GREETING": "hello"}), namespace=namespace)

    assert_condition(cluster, app, "Reconciled", "True", reason="ChildrenUpToDate")
    assert cluster.exists(deployment_of(app))


# ----------------------------------------------------------------------------- concurrency and hot loops


def test_reconciling_survives_concurrent_writes(cluster: Cluster, namespace: str) -> None:
    app = reconciled(cluster, namespace, web_app(replicas=1))

    def converged() -> None:
        assert_matches(cluster.get(deployment_of(app)), {"spec": {"replicas": 4}})
        current = cluster.get(app)
        observed = current.get("status", {}).get("observedGeneration")
        assert observed == current["metadata"]["generation"], f"status.observedGeneration is {observed}"

    def scale_up() -> None:  # run once the writer runs and the operator's next updates are armed to conflict
        cluster.patch(app, {"spec": {"replicas": 4}})

    # The operator writes status with the resourceVersion it read: its writes after the scale-up
    # get 409 (ktest writes the WebApp right before each), and it must retry them, not give up.
    writer = assert_survives_concurrent_writes(
        cluster, app, converged, duration=2, mode="update", trigger=scale_up
    )
    assert writer.injector is not None and writer.injector.provoked >= 1


def test_nothing_is_written_once_converged(cluster: Cluster, namespace: str) -> None:
    app = reconciled(cluster, namespace, web_app())

    assert_quiescent(cluster, app, children=[deployment_of(app), service_of(app)])
