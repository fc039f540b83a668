"""One control plane for the proxy tests; each test works in its own namespace.

``tests/proxy`` is on ``sys.path`` (no ``__init__.py``), so the test operator
imports as ``mirror_operator``.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from ktest.assets import Assets
from ktest.cluster import Cluster
from ktest.controlplane import ControlPlane
from ktest.proxy import OperatorProxy


@pytest.fixture(scope="session")
def plane(k8s_assets: Assets) -> Iterator[ControlPlane]:
    with ControlPlane(assets=k8s_assets) as cp:
        yield cp


@pytest.fixture(scope="session")
def admin(plane: ControlPlane) -> Iterator[Cluster]:
    with Cluster(plane.kubeconfig, controllers=plane.controllers, user_issuer=plane.add_user) as cluster:
        yield cluster


@pytest.fixture
def ns(admin: Cluster) -> Iterator[str]:
    with admin.namespace(prefix="proxy", background=True) as name:
        yield name


@pytest.fixture
def proxy(admin: Cluster) -> Iterator[OperatorProxy]:
    """A proxy in front of the admin identity, as an operator named 'test-operator' would get."""
    started = OperatorProxy(admin, "test-operator").start()
    try:
        yield started
    finally:
        started.close()
