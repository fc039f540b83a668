"""A cluster-wide kopf operator of a cluster-scoped kind, written as kopf's docs write one.

A ``ClusterPolicy`` (cluster-scoped, ``ops.ktest.dev/v1``) names a namespace label; the
operator stamps a ``policy-<name>`` ConfigMap into every namespace carrying that label
and removes them on deletion (kopf adds its finalizer because there is a delete handler).
It configures the official client in a startup handler and uses ``CoreV1Api()``.
"""

from __future__ import annotations

from typing import Any

import kopf
import kubernetes


@kopf.on.startup()
def configure(settings: kopf.OperatorSettings, **_: Any) -> None:
    kubernetes.config.load_kube_config()
    settings.posting.level = 20  # INFO and up as Events, as kopf's docs show


@kopf.on.create("ops.ktest.dev", "v1", "clusterpolicies")
def stamp(spec: Any, name: str, logger: Any, **_: Any) -> dict[str, int]:
    core = kubernetes.client.CoreV1Api()
    label = spec.get("namespaceLabel", "")
    stamped = 0
    for namespace in core.list_namespace(label_selector=label).items:
        body = {"metadata": {"name": f"policy-{name}"}, "data": {"policy": name}}
        core.create_namespaced_config_map(namespace.metadata.name, body)
        stamped += 1
    logger.info("stamped %d namespaces", stamped)
    return {"stamped": stamped}


@kopf.on.delete("ops.ktest.dev", "v1", "clusterpolicies")
def unstamp(spec: Any, name: str, **_: Any) -> None:
    core = kubernetes.client.CoreV1Api()
    for namespace in core.list_namespace(label_selector=spec.get("namespaceLabel", "")).items:
        try:
            core.delete_namespaced_config_map(f"policy-{name}", namespace.metadata.name)
        except kubernetes.client.ApiException as error:
            if error.status != 404:
                raise
