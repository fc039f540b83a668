"""One control plane for the Cluster tests; each test works in its own namespace."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from ktest.assets import Assets
from ktest.cluster import Cluster
from ktest.controlplane import ControlPlane


@pytest.fixture(scope="session")
def plane(k8s_assets: Assets) -> Iterator[ControlPlane]:
    with ControlPlane(assets=k8s_assets) as cp:
        yield cp


@pytest.fixture(scope="session")
def admin(plane: ControlPlane) -> Iterator[Cluster]:
    with Cluster(
        plane.kubeconfig,
        controllers=plane.controllers,
        user_issuer=plane.add_user,
        on_crds_installed=lambda names: plane.restart_controllers(),
    ) as cluster:
        yield cluster


@pytest.fixture
def ns(admin: Cluster, request: pytest.FixtureRequest) -> Iterator[str]:
    with admin.namespace(prefix=request.node.name, background=True) as name:
        yield name
