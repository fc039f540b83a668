"""A second, older Kubernetes minor runs too: users test a matrix of versions.

``make test`` installs the default version and ``KTEST_OLDER_K8S_VERSION``
(the previous minor, ``ktest.assets.minors.OLDER_MINOR``, unless set); the whole suite
also runs on any supported version with ``make test K8S_VERSION=1.34``.
"""

from __future__ import annotations

import os

from ktest.assets import minors, resolve_assets
from ktest.cluster import Cluster
from ktest.controlplane import ControlPlane
from ktest.wait import eventually

OLDER = os.environ.get("KTEST_OLDER_K8S_VERSION", minors.OLDER_MINOR)


def test_older_minor_starts_with_controllers_and_collects_garbage() -> None:
    assets = resolve_assets(OLDER)
    assert assets.version.startswith(OLDER + ".")
    with (
        ControlPlane(assets=assets) as plane,
        Cluster(plane.kubeconfig, controllers=plane.controllers) as cluster,
    ):
        assert cluster.version == assets.version
        assert plane.controllers == {"garbagecollector", "namespace"}
        owner = cluster.apply(
            {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "owner", "namespace": "default"}}
        )
        child = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {
                "name": "child",
                "namespace": "default",
                "ownerReferences": [
                    {
                        "apiVersion": "v1",
                        "kind": "ConfigMap",
                        "name": "owner",
                        "uid": owner["metadata"]["uid"],
                    }
                ],
            },
        }
        cluster.apply(child)
        cluster.delete(owner)
        eventually(lambda: not cluster.exists(child), timeout=20)
