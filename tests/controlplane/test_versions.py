"""A second, older Kubernetes minor runs too: users test a matrix of versions.

``make test`` installs the default version and ``KTEST_OLDER_K8S_VERSION``
(the previous minor, ``ktest.assets.minors.OLDER_MINOR``, unless set); the whole suite
also runs on any supported version with ``make test K8S_VERSION=1.34``.

The older minor's plane is the session's never-upgraded one (upgrade_planes.py): test_plane_upgrade's
rolled-back upgrade runs on it too, and leaves it serving the older minor on the same data.
"""

from __future__ import annotations

import os

import pytest
from upgrade_planes import never_upgraded_plane

from ktest.assets import minors, resolve_assets
from ktest.cluster import Cluster
from ktest.controlplane import ControlPlane
from ktest.wait import eventually

OLDER = os.environ.get("KTEST_OLDER_K8S_VERSION", minors.OLDER_MINOR)


@pytest.fixture(scope="session")
def older_plane(request: pytest.FixtureRequest) -> ControlPlane:
    """The session's plane of the older minor (upgrade_planes.py)."""
    return never_upgraded_plane(request, resolve_assets(OLDER))


def test_older_minor_starts_with_controllers_and_collects_garbage(older_plane: ControlPlane) -> None:
    assets, plane = resolve_assets(OLDER), older_plane
    assert assets.version.startswith(OLDER + ".")
    with Cluster(plane.kubeconfig, controllers=plane.controllers) as cluster:
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
