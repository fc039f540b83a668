"""The embedded control plane: etcd + kube-apiserver + kube-controller-manager as
child processes bound to the life of the Python process that started them."""

from __future__ import annotations

from ktest.controlplane.plane import ControlPlane
from ktest.controlplane.process import ManagedProcess

__all__ = ["ControlPlane", "ManagedProcess"]
