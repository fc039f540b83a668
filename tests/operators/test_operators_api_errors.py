"""An official-client API error that an operator logs reads ``409 Conflict: <message>`` in
ktest's failures, never the client's HTTP dump (headers and body), and not twice."""

from __future__ import annotations

import logging

import kubernetes
import pytest
from builders import configmap, configmap_ref

from ktest.assertions import assert_survives_concurrent_writes
from ktest.cluster import Cluster
from ktest.operators import OperatorContext, run_callable
from ktest.wait import eventually


def conflict_logger(ns: str):
    """Keeps ``data.owner`` of ConfigMap ``target`` at "operator" with read-modify-replace, and
    logs a conflict at ERROR (with ``str(error)``, as many operators do) instead of retrying."""

    def operator(ctx: OperatorContext) -> None:
        logger = logging.getLogger("conflict-logger")
        kubernetes.config.load_kube_config(config_file=str(ctx.kubeconfig))
        api = kubernetes.client.CoreV1Api()
        ctx.ready()
        while not ctx.stop.wait(0.02):
            current = api.read_namespaced_config_map("target", ns)
            current.data = {**(current.data or {}), "owner": "operator"}
            ctx.stop.wait(0.05)  # a slow reconcile: another writer gets in between
            try:
                api.replace_namespaced_config_map("target", ns, current)
            except kubernetes.client.ApiException as error:
                logger.error("could not update target: %s", error)

    return operator


def test_a_logged_409_reads_as_status_reason_and_message(admin: Cluster, ns: str) -> None:
    admin.create(configmap("target", ns, {"owner": "test"}))
    with run_callable(conflict_logger(ns), admin, name="conflicts") as op:
        eventually(lambda: admin.get(configmap_ref("target", ns))["data"]["owner"] == "operator")
        with pytest.raises(AssertionError) as caught:
            assert_survives_concurrent_writes(
                admin, configmap_ref("target", ns), converged=lambda: True, duration=2.0, conflicts=0,
                interval=0.02,
            )
        # Stopped first: a write still in flight when the check ends logs one more 409.
        op.stop()
        op.acknowledge_error()
    message = str(caught.value)
    assert "409 Conflict: Operation cannot be fulfilled on configmaps \"target\"" in message, message
    assert "HTTP response headers" not in message and "HTTP response body" not in message, message
    assert "Reason: Conflict" not in message, message
