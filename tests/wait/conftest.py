"""A real control plane for the watch wake-up tests (started only if one of them runs).

Binaries come from ``KTEST_ASSETS`` when set, else from ``resolve_assets()``.
"""

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
    with Cluster(plane.kubeconfig, controllers=plane.controllers, user_issuer=plane.add_user,
                 name="admin") as cluster:
        yield cluster


@pytest.fixture
def cluster(plane: ControlPlane) -> Iterator[Cluster]:
    """A Cluster of its own, so a test sees exactly the watches it caused."""
    with Cluster(plane.kubeconfig, controllers=plane.controllers, user_issuer=plane.add_user,
                 name="own") as own:
        yield own


@pytest.fixture(scope="module")
def ns(admin: Cluster) -> Iterator[str]:
    """One namespace per module (deleting one takes seconds); tests use their own names."""
    with admin.namespace(prefix="wait") as name:
        yield name
