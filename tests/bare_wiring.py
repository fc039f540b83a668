"""How ktest's own tests reach a :class:`ControlPlane` they started: the one place that wires a
:class:`Cluster` to it as the bare backend does.

The cluster issues users from the plane's CA, knows the plane's controllers, and CRDs installed
through it restart the garbage collector (which otherwise notices new kinds only on its 30 s
discovery resync, so owners of a later kind go unnoticed). tests/conftest.py builds the shared
``admin`` with it; folders that need a Cluster of their own on the same plane call it too.
"""

from __future__ import annotations

from ktest.cluster import Cluster
from ktest.controlplane import ControlPlane


def plane_cluster(plane: ControlPlane, name: str) -> Cluster:
    """A Cluster (not yet entered) on ``plane``'s admin kubeconfig, named ``name`` in messages."""
    return Cluster(
        plane.kubeconfig,
        controllers=plane.controllers,
        user_issuer=plane.add_user,
        on_crds_installed=lambda names: plane.restart_controllers(),
        name=name,
    )
