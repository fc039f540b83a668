"""Small helpers shared by the control-plane tests."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import kubernetes

COMPONENTS = ("etcd", "kube-apiserver", "kube-controller-manager")


def client_for(kubeconfig: Path) -> Any:
    """An ApiClient for one kubeconfig, without touching the kubernetes module's globals."""
    return kubernetes.config.new_client_from_config(config_file=str(kubeconfig))
