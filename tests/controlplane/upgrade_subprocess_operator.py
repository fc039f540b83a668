"""A subprocess operator that reconnects: ``python upgrade_subprocess_operator.py NAMESPACE``
copies ConfigMaps labelled ``ktest.dev/copy=true`` to ``<name>-copy``, with KUBECONFIG from the
environment; when its connection fails it waits half a second and lists and watches again, as
an operator that survives a control-plane upgrade does."""

from __future__ import annotations

import logging
import sys
import time

import kubernetes
from kubernetes.client.exceptions import ApiException

LABEL = "ktest.dev/copy"


def copy(api: kubernetes.client.CoreV1Api, namespace: str, source: kubernetes.client.V1ConfigMap) -> None:
    name = source.metadata.name + "-copy"
    body = {"metadata": {"name": name}, "data": source.data or {}}
    try:
        api.create_namespaced_config_map(namespace, body)
    except ApiException as error:
        if error.status != 409:
            raise
        api.patch_namespaced_config_map(name, namespace, {"data": source.data or {}})


def main() -> int:
    namespace = sys.argv[1]
    logging.basicConfig(level=logging.INFO, stream=sys.stdout, format="%(levelname)s %(message)s")
    log = logging.getLogger("upgrade-subprocess")
    kubernetes.config.load_kube_config()
    api = kubernetes.client.CoreV1Api()
    announced = False
    while True:
        try:
            listing = api.list_namespaced_config_map(namespace, label_selector=f"{LABEL}=true")
            for item in listing.items:
                copy(api, namespace, item)
            if not announced:
                log.info("watching configmaps in %s", namespace)
                announced = True
            watch = kubernetes.watch.Watch()
            for event in watch.stream(
                api.list_namespaced_config_map, namespace, label_selector=f"{LABEL}=true",
                resource_version=listing.metadata.resource_version, timeout_seconds=60,
            ):
                if event["type"] in ("ADDED", "MODIFIED"):
                    copy(api, namespace, event["object"])
        except Exception as error:  # the API server went away: connect again
            log.info("connection lost (%s); listing again", type(error).__name__)
            time.sleep(0.5)


if __name__ == "__main__":
    sys.exit(main())
