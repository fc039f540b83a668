"""What ktest changes in the objects kubeadm creates, applied by kubeadm itself (``patches``).

CoreDNS's readiness probe runs every :data:`COREDNS_PROBE_PERIOD` s instead of kubeadm's 10 s.
Patched after ``kind create cluster``, the Deployment would roll its pods (seconds slower,
racing the readiness wait), so kubeadm creates it patched: a patch (target
``corednsdeployment``) in the cluster's private directory, mounted read-only into the
control-plane node through the kind config (``extraMounts``, ``InitConfiguration.patches``).
A user kind config setting its own ``InitConfiguration.patches`` replaces ktest's (CoreDNS is
then ready up to 10 s later, nothing breaks).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from pathlib import Path
from typing import Any

COREDNS_PROBE_PERIOD = 1
"""Seconds between CoreDNS readiness probes. kubeadm leaves the default of 10 s, and the
first probe, right at container start, fails before CoreDNS has synced with the API
server: readiness (and so a usable cluster) then waits up to 10 s more."""

NODE_PATCHES_DIRECTORY = "/ktest/kubeadm-patches"
"""Where the patches are mounted in each control-plane node (kubeadm reads them there)."""

_COREDNS_PATCH = f"""\
spec:
  template:
    spec:
      containers:
      - name: coredns
        readinessProbe:
          periodSeconds: {COREDNS_PROBE_PERIOD}
"""

_INIT_CONFIGURATION_PATCH = f"kind: InitConfiguration\npatches:\n  directory: {NODE_PATCHES_DIRECTORY}\n"


def write_patches(directory: Path) -> Path:
    """Write kubeadm's patch files into ``directory/kubeadm-patches``, private like the rest of the
    cluster's directory: kind's privileged node containers read the mount as root (or, with a
    rootless engine, as this user)."""
    from ktest.base.certs import private_directory, write_private_file

    patches = directory / "kubeadm-patches"
    private_directory(patches)
    write_private_file(patches / "corednsdeployment+strategic.yaml", _COREDNS_PATCH.encode())
    return patches


def with_kubeadm_patches(config: Mapping[str, Any], patches: Path) -> dict[str, Any]:
    """``config`` with ``patches`` mounted into every control-plane node and named to kubeadm.

    ktest's kubeadm config patch comes first, so one of the user's can still override it.
    """
    merged: dict[str, Any] = copy.deepcopy(dict(config))
    merged["kubeadmConfigPatches"] = [_INIT_CONFIGURATION_PATCH, *merged.get("kubeadmConfigPatches", [])]
    nodes = merged.get("nodes") or [{"role": "control-plane"}]
    for node in nodes:
        if node.get("role", "control-plane") == "control-plane":
            node["extraMounts"] = [
                *node.get("extraMounts", []),
                {"hostPath": str(patches), "containerPath": NODE_PATCHES_DIRECTORY, "readOnly": True},
            ]
    merged["nodes"] = nodes
    return merged
