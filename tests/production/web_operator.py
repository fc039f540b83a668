"""A kopf operator for the upgrade and RBAC tests: for each ConfigMap labelled ``ktest.dev/web=true``
it keeps a Deployment of the same name (Pod template labelled ``app: <name>``).

Its versions differ by ``memo`` (``run_kopf(memo=...)``, ``kopf_version(..., memo=...)``):
``pod_labels`` adds labels to the Pod template (the seeded bug: every workload restarts on upgrade),
``report_status`` patches the Deployment's status subresource (the seeded RBAC bug, when the Role
lacks ``patch`` on ``deployments/status``)."""

from __future__ import annotations

from typing import Any

import kopf
import kubernetes
from kubernetes.client.exceptions import ApiException

LABELS = {"ktest.dev/web": "true"}


def apps_api(kubeconfig: str) -> kubernetes.client.AppsV1Api:
    client = kubernetes.config.new_client_from_config(config_file=kubeconfig, persist_config=False)
    return kubernetes.client.AppsV1Api(client)


def desired(name: str, memo: Any) -> dict[str, Any]:
    labels = {"app": name, **(memo.get("pod_labels") or {})}
    return {
        "metadata": {"name": name, "labels": {"app": name}},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": labels},
                "spec": {"containers": [{"name": "web", "image": "nginx:1.27"}]},
            },
        },
    }


@kopf.on.resume("configmaps", labels=LABELS)
@kopf.on.create("configmaps", labels=LABELS)
def ensure(body: Any, name: str, namespace: str, memo: Any, **_: Any) -> None:
    api = apps_api(memo.kubeconfig)
    want = desired(name, memo)
    kopf.append_owner_reference(want, owner=body)
    try:
        have = api.read_namespaced_deployment(name, namespace)
    except ApiException as error:
        if error.status != 404:
            raise
        api.create_namespaced_deployment(namespace, want)
    else:
        labels = dict(have.spec.template.metadata.labels or {})
        wanted = want["spec"]["template"]["metadata"]["labels"]
        if labels != wanted:
            patch = {"spec": {"template": {"metadata": {"labels": wanted}}}}
            api.patch_namespaced_deployment(name, namespace, patch)
    if memo.get("report_status"):
        status = {"status": {"conditions": [{"type": "Managed", "status": "True", "reason": "Reconciled"}]}}
        api.patch_namespaced_deployment_status(name, namespace, status)
