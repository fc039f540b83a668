"""A kopf operator that configures the official client when its module is imported
(``load_kube_config()`` at the top of the file) and keeps one module-level API object.

Copies ConfigMaps labelled ``ktest.dev/import-client=true`` into ``<name>-copy``.
"""

from __future__ import annotations

from typing import Any

import kopf
import kubernetes

kubernetes.config.load_kube_config()
core = kubernetes.client.CoreV1Api()

LABELS = {"ktest.dev/import-client": "true"}


@kopf.on.create("configmaps", labels=LABELS)
def copy(body: Any, name: str, namespace: str, **_: Any) -> None:
    target = {"metadata": {"name": f"{name}-copy"}, "data": dict(body.get("data") or {})}
    core.create_namespaced_config_map(namespace, target)
