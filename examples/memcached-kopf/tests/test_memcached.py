"""The Memcached operator against a real API server: what it creates, what it reports, how it
lets go."""

from __future__ import annotations

from typing import Any

import pytest

import ktest
from ktest.operators import OperatorHandle

pytestmark = pytest.mark.usefixtures("operator")


def memcached(name: str, namespace: str, size: int) -> dict[str, Any]:
    return {
        "apiVersion": "cache.example.com/v1alpha1",
        "kind": "Memcached",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"size": size},
    }


def deployment_of(name: str, namespace: str) -> tuple[str, str, str, str]:
    return ("apps/v1", "Deployment", f"{name}-memcached", namespace)


def test_a_memcached_gets_an_owned_deployment_of_its_size(cluster: ktest.Cluster, namespace: str) -> None:
    cache = cluster.create(memcached("sessions", namespace, size=3))

    ktest.eventually(lambda: cluster.get(deployment_of("sessions", namespace))["spec"]["replicas"] == 3)
    ktest.assert_owned_by(cluster, deployment_of("sessions", namespace), cache, controller=True)
    ktest.assert_condition(
        cluster, cache, "Ready", "True", reason="DeploymentReconciled", observed_generation=True
    )


def test_scaling_reaches_the_deployment_and_the_status_observes_it(
    cluster: ktest.Cluster, namespace: str
) -> None:
    cache = cluster.create(memcached("sessions", namespace, size=1))
    ktest.assert_observed_generation(cluster, cache)

    cluster.patch(cache, {"spec": {"size": 4}})

    ktest.eventually(lambda: cluster.get(deployment_of("sessions", namespace))["spec"]["replicas"] == 4)
    scaled = ktest.assert_observed_generation(cluster, cache)
    assert scaled["metadata"]["generation"] == 2
    ktest.assert_condition(cluster, cache, "Ready", message="Deployment runs 4 memcached server(s)")


def test_status_is_written_through_the_status_subresource(cluster: ktest.Cluster, namespace: str) -> None:
    cache = cluster.create(memcached("sessions", namespace, size=2))
    ktest.assert_observed_generation(cluster, cache)

    report = ktest.assert_status_subresource(cluster, cache)  # probes with real writes, then restores

    assert report.served and not report.skipped, report


def test_deletion_unlists_the_servers_and_takes_the_deployment_along(
    cluster: ktest.Cluster, namespace: str, operator: OperatorHandle
) -> None:
    cache = cluster.create(memcached("sessions", namespace, size=2))
    ktest.assert_has_finalizer(cluster, cache, "cache.example.com/finalizer")
    servers = ("v1", "ConfigMap", "memcached-servers", namespace)
    ktest.eventually(lambda: "sessions" in cluster.get(servers)["data"])
    deployment = ktest.eventually(lambda: cluster.get(deployment_of("sessions", namespace)))

    # deletes the Memcached; the operator unlists it and lets it go; the GC takes the Deployment
    ktest.assert_garbage_collected(cluster, deployment, cache)

    ktest.assert_gone(cluster, cache)
    assert "sessions" not in (cluster.get(servers).get("data") or {})
    assert operator.alive
