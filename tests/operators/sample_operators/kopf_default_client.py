"""A kopf operator written the way kopf's docs and most operators in the wild write it:
the official client is configured once, in a startup handler, and every handler then
builds its API with no argument (``kubernetes.client.CoreV1Api()``).

Copies ConfigMaps labelled ``ktest.dev/default-client=true`` into ``<name>-copy``.
"""

from __future__ import annotations

from typing import Any

import kopf
import kubernetes

LABELS = {"ktest.dev/default-client": "true"}


@kopf.on.startup()
def configure(logger: Any, **_: Any) -> None:
    try:
        kubernetes.config.load_incluster_config()
    except kubernetes.config.ConfigException:
        kubernetes.config.load_kube_config()
    logger.info("kubernetes client configured")


@kopf.on.create("configmaps", labels=LABELS)
def copy(body: Any, name: str, namespace: str, **_: Any) -> None:
    api = kubernetes.client.CoreV1Api()
    target = {"metadata": {"name": f"{name}-copy"}, "data": dict(body.get("data") or {})}
    api.create_namespaced_config_map(namespace, target)
