"""Workload objects for the simulated-node tests."""

from __future__ import annotations

from typing import Any


def deployment(name: str, namespace: str, replicas: int = 3, **pod_spec: Any) -> dict[str, Any]:
    containers = [{"name": "main", "image": "registry.example/app:1"}]
    template = _pod_template({"app": name}, {"containers": containers, **pod_spec})
    spec = {"replicas": replicas, "selector": {"matchLabels": {"app": name}}, "template": template}
    return _workload("apps/v1", "Deployment", name, namespace, spec)


def job(name: str, namespace: str, backoff_limit: int = 0) -> dict[str, Any]:
    containers = [{"name": "work", "image": "registry.example/job:1"}]
    template = _pod_template({"job": name}, {"restartPolicy": "Never", "containers": containers})
    spec = {"backoffLimit": backoff_limit, "template": template}
    return _workload("batch/v1", "Job", name, namespace, spec)


def _workload(api_version: str, kind: str, name: str, namespace: str, spec: dict[str, Any]) -> dict[str, Any]:
    metadata = {"name": name, "namespace": namespace}
    return {"apiVersion": api_version, "kind": kind, "metadata": metadata, "spec": spec}


def _pod_template(labels: dict[str, str], spec: dict[str, Any]) -> dict[str, Any]:
    return {"metadata": {"labels": labels}, "spec": spec}


def pods(cluster: Any, namespace: str, selector: str) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = cluster.list(("v1", "Pod"), namespace, label_selector=selector)
    return found


def condition(obj: dict[str, Any], kind: str) -> dict[str, Any]:
    return next((c for c in (obj.get("status") or {}).get("conditions") or [] if c["type"] == kind), {})


def finished_job_pod(cluster: Any, namespace: str, name: str, outcome: str) -> dict[str, Any]:
    """The one Pod of Job ``name``, once the Job has the condition ``outcome`` (Complete, Failed)."""
    from ktest import eventually

    eventually(
        lambda: condition(cluster.get(("batch/v1", "Job", name, namespace)), outcome).get("status") == "True",
        timeout=30,
    )
    (pod,) = pods(cluster, namespace, f"job={name}")
    return pod
