"""One control plane for the operator tests; each test works in its own namespace.

``tests/operators`` is on ``sys.path`` (no ``__init__.py``), so the small operators
written for these tests import as ``sample_operators.<name>``.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from operator_helpers import GO_MANAGER

from ktest.assets import Assets
from ktest.cluster import Cluster
from ktest.controlplane import ControlPlane


@pytest.fixture(scope="session")
def plane(k8s_assets: Assets) -> Iterator[ControlPlane]:
    with ControlPlane(assets=k8s_assets) as cp:
        yield cp


@pytest.fixture(scope="session")
def admin(plane: ControlPlane) -> Iterator[Cluster]:
    with Cluster(plane.kubeconfig, controllers=plane.controllers, user_issuer=plane.add_user) as cluster:
        yield cluster


@pytest.fixture
def ns(admin: Cluster, request: pytest.FixtureRequest) -> Iterator[str]:
    with admin.namespace(prefix="op", background=True) as name:
        yield name


@pytest.fixture(scope="session")
def go_manager() -> Path:
    """The Go controller-runtime manager of fixtures/go-manager, built once (cached across runs)."""
    from ktest.operators import build_go_binary

    return build_go_binary(GO_MANAGER)
