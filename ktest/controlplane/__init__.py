"""The embedded control plane: etcd + kube-apiserver + kube-controller-manager as
child processes bound to the life of the Python process that started them.

    from ktest.controlplane import ControlPlane

    with ControlPlane("1.37") as cp:              # or assets=Path("/dir/with/binaries")
        cp.kubeconfig                              # admin kubeconfig (system:masters)
        cp.add_user("my-operator", groups=["g"])   # kubeconfig for a client-cert identity
        cp.restart()                               # same etcd data, same ports if free

Every child runs in its own session and gets SIGKILL from the kernel when this process dies; a
small janitor process removes what is left after ``kill -9``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ktest.lazy import lazy_attributes

if TYPE_CHECKING:
    from ktest.base.process import ManagedProcess as ManagedProcess
    from ktest.controlplane.plane import ControlPlane as ControlPlane

# Imported on first use: attaching to a running control plane needs only its small
# readiness client (ktest.controlplane.apiserver), not certificates and processes.
_EXPORTS = {"ControlPlane": "ktest.controlplane.plane", "ManagedProcess": "ktest.base.process"}

__all__ = ["ControlPlane", "ManagedProcess"]


if not TYPE_CHECKING:  # hidden from type checkers, so that a misspelt name is an error, not Any
    __getattr__, __dir__ = lazy_attributes(__name__, _EXPORTS, globals())
