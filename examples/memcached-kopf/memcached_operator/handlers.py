"""The Memcached operator: one Deployment of memcached servers per ``Memcached`` object.

- **An owned child.** Each Memcached gets a Deployment ``<name>-memcached`` whose
  controller ownerReference points at it, so the garbage collector deletes the
  Deployment with it. Its ``replicas`` follow ``spec.size``, its image ``spec.image``.
- **A finalizer** (``cache.example.com/finalizer``): every server is listed in the
  namespace's ``memcached-servers`` ConfigMap, which clients read to find them. That
  ConfigMap belongs to no single Memcached, so no ownerReference can clean it up: the
  operator removes the entry before it lets the Memcached go.
- **Status through the status subresource**: ``observedGeneration``, the Deployment's
  name and a ``Ready`` condition, written only after the Deployment matches the spec.

Run it with ``kopf run -m memcached_operator.handlers``; it reads the in-cluster
configuration, else the kubeconfig (``$KUBECONFIG``, ``~/.kube/config``).
"""

from __future__ import annotations

import datetime
from typing import Any

import kopf
import kubernetes.client
import kubernetes.config
from kubernetes.client.exceptions import ApiException

GROUP, VERSION, PLURAL = "cache.example.com", "v1alpha1", "memcacheds"
FINALIZER = "cache.example.com/finalizer"
SERVERS_CONFIGMAP = "memcached-servers"
PORT = 11211


@kopf.on.startup()
def configure(settings: kopf.OperatorSettings, memo: kopf.Memo, **_: Any) -> None:
    """Our own finalizer name and annotation prefix; one API client for the handlers."""
    settings.persistence.finalizer = FINALIZER
    settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix=GROUP)
    settings.persistence.diffbase_storage = kopf.AnnotationsDiffBaseStorage(prefix=GROUP)
    try:
        kubernetes.config.load_incluster_config()
    except kubernetes.config.ConfigException:
        kubernetes.config.load_kube_config()
    memo.api = kubernetes.client.ApiClient()


@kopf.on.cleanup()
def close(memo: kopf.Memo, **_: Any) -> None:
    memo.api.close()


@kopf.on.resume(GROUP, VERSION, PLURAL)
@kopf.on.create(GROUP, VERSION, PLURAL)
@kopf.on.update(GROUP, VERSION, PLURAL, field="spec")
def reconcile(
    spec: kopf.Spec, meta: kopf.Meta, status: kopf.Status, body: kopf.Body, name: str, namespace: str | None,
    patch: kopf.Patch, memo: kopf.Memo, logger: kopf.Logger, **_: Any,
) -> None:
    """Make the Deployment match the spec, list the servers, then report it in the status."""
    assert namespace is not None  # Memcached is a namespaced kind
    deployment = _deployment(name, spec)
    kopf.adopt(deployment, owner=body)  # controller ownerReference, and our namespace
    apps = kubernetes.client.AppsV1Api(memo.api)
    try:
        apps.create_namespaced_deployment(namespace, deployment)
        logger.info(f"created Deployment {deployment['metadata']['name']}")
    except ApiException as error:
        if error.status != 409:
            raise
        apps.patch_namespaced_deployment(
            deployment["metadata"]["name"], namespace, {"spec": deployment["spec"]}
        )
    _list_servers(memo.api, namespace, name, spec["size"])

    patch.status["observedGeneration"] = meta["generation"]
    patch.status["deployment"] = deployment["metadata"]["name"]
    patch.status["conditions"] = [_ready_condition(status, meta["generation"], spec["size"])]


@kopf.on.delete(GROUP, VERSION, PLURAL)
def unlist(name: str, namespace: str | None, memo: kopf.Memo, logger: kopf.Logger, **_: Any) -> None:
    """Remove the servers from the ConfigMap; kopf then removes the finalizer."""
    assert namespace is not None
    core = kubernetes.client.CoreV1Api(memo.api)
    try:
        core.patch_namespaced_config_map(SERVERS_CONFIGMAP, namespace, {"data": {name: None}})
    except ApiException as error:
        if error.status != 404:  # no ConfigMap: nothing listed
            raise
    logger.info(f"removed {name} from {SERVERS_CONFIGMAP}")


def _deployment(name: str, spec: kopf.Spec) -> Any:  # a plain dict: the client takes it as well as a model
    labels = {"app.kubernetes.io/name": "memcached", "app.kubernetes.io/instance": name}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": f"{name}-memcached", "labels": labels},
        "spec": {
            "replicas": spec["size"],
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {"containers": [{
                    "name": "memcached",
                    "image": spec.get("image", "memcached:1.6-alpine"),
                    "args": ["-m", "64"],
                    "ports": [{"name": "memcached", "containerPort": PORT}],
                }]},
            },
        },
    }


def _list_servers(api: kubernetes.client.ApiClient, namespace: str, name: str, size: int) -> None:
    """``<name>: <server address>, ...`` in the namespace's ConfigMap of memcached servers."""
    core = kubernetes.client.CoreV1Api(api)
    addresses = ",".join(f"{name}-memcached-{i}.{namespace}:{PORT}" for i in range(size))
    entry: Any = {"data": {name: addresses}}  # a plain dict: the client takes it as well as a model
    try:
        core.patch_namespaced_config_map(SERVERS_CONFIGMAP, namespace, entry)
        return
    except ApiException as error:
        if error.status != 404:
            raise
    try:
        configmap: Any = {"metadata": {"name": SERVERS_CONFIGMAP}, **entry}
        core.create_namespaced_config_map(namespace, configmap)
    except ApiException as error:
        if error.status != 409:
            raise
        core.patch_namespaced_config_map(SERVERS_CONFIGMAP, namespace, entry)  # another Memcached made it


def _ready_condition(status: kopf.Status, generation: int, size: int) -> dict[str, Any]:
    """``Ready=True``; its lastTransitionTime changes only when its status does."""
    previous: dict[str, Any] = next((c for c in status.get("conditions", []) if c.get("type") == "Ready"), {})
    changed = previous.get("status") != "True"
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    return {
        "type": "Ready",
        "status": "True",
        "reason": "DeploymentReconciled",
        "message": f"Deployment runs {size} memcached server(s)",
        "observedGeneration": generation,
        "lastTransitionTime": now if changed else previous["lastTransitionTime"],
    }
