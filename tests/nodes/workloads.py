"""Workload objects for the simulated-node tests."""

from __future__ import annotations

from typing import Any


def deployment(name: str, namespace: str, replicas: int = 3, **pod_spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "main", "image": "registry.example/app:1"}], **pod_spec},
            },
        },
    }


def job(name: str, namespace: str, backoff_limit: int = 0) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "backoffLimit": backoff_limit,
            "template": {
                "metadata": {"labels": {"job": name}},
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [{"name": "work", "image": "registry.example/job:1"}],
                },
            },
        },
    }


def pods(cluster: Any, namespace: str, selector: str) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = cluster.list(("v1", "Pod"), namespace, label_selector=selector)
    return found


def condition(obj: dict[str, Any], kind: str) -> dict[str, Any]:
    return next((c for c in (obj.get("status") or {}).get("conditions") or [] if c["type"] == kind), {})
