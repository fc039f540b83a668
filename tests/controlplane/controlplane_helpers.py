"""Small helpers shared by the control-plane tests."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import kubernetes
from builders import configmap, configmap_ref

from ktest.cluster import Cluster
from ktest.wait import eventually

COMPONENTS = ("etcd", "kube-apiserver", "kube-controller-manager")


def client_for(kubeconfig: Path) -> Any:
    """An ApiClient for one kubeconfig, without touching the kubernetes module's globals."""
    return kubernetes.config.new_client_from_config(config_file=str(kubeconfig))


def assert_collects_garbage(kubeconfig: Path, prefix: str) -> None:
    """In a fresh namespace, a child ConfigMap goes once its owner is deleted (the GC runs)."""
    with Cluster(kubeconfig) as cluster, cluster.namespace(prefix=prefix) as ns:
        owner = cluster.create(configmap("owner", ns))
        cluster.create(configmap("child", ns, owner=owner))
        cluster.delete(configmap_ref("owner", ns))
        eventually(
            lambda: cluster.get_or_none(configmap_ref("child", ns)) is None,
            timeout=30,
            description="the garbage collector to delete the child",
        )
