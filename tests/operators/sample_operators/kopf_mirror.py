"""A kopf operator: copies ConfigMaps labelled ``ktest.dev/kopf-copy=true`` into
``<name>-kopf``, with the kubeconfig ktest passes in ``memo.kubeconfig``."""

from __future__ import annotations

from typing import Any

import kopf
from kubernetes.client.exceptions import ApiException

from sample_operators.mirror import core_api

LABELS = {"ktest.dev/kopf-copy": "true"}


@kopf.on.create("configmaps", labels=LABELS)
@kopf.on.update("configmaps", labels=LABELS, field="data")
def copy(body: Any, name: str, namespace: str, memo: Any, logger: Any, **_: Any) -> None:
    api = core_api(memo.kubeconfig)
    data = dict(body.get("data") or {})
    target = {"metadata": {"name": f"{name}-kopf"}, "data": data}
    kopf.append_owner_reference(target, owner=body)  # adopt() would copy the labels too
    try:
        api.create_namespaced_config_map(namespace, target)
    except ApiException as error:
        if error.status != 409:
            raise
        api.patch_namespaced_config_map(f"{name}-kopf", namespace, {"data": data})
    logger.info("copied %s to %s-kopf", name, name)
