"""The assertion tests use the shared ``plane`` and ``ns`` of tests/conftest.py, the test
CRDs installed, and short ``eventually`` timeouts.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from bare_wiring import plane_cluster

from ktest.cluster import Cluster
from ktest.controlplane import ControlPlane
from ktest.run_context import run_context
from ktest.wait import use_defaults

CRDS = Path(__file__).parent / "crds"


@pytest.fixture(scope="session")
def cluster(plane: ControlPlane) -> Iterator[Cluster]:
    """Overrides the plugin's ``cluster``: the shared plane's admin (wired as the bare backend's,
    see tests/bare_wiring.py) with the test CRDs installed."""
    with plane_cluster(plane, "assertions") as admin:
        admin.install_crds(CRDS)
        yield admin


@pytest.fixture
def ns(cluster: Cluster, ns: str) -> str:
    """tests/conftest.py's ``ns``, once ``cluster`` has installed the test CRDs, whichever test of
    the worker comes first (a test asking for ``plane`` and ``ns`` alone once met no Widget kind)."""
    return ns


@pytest.fixture(autouse=True)
def test_context(request: pytest.FixtureRequest) -> Iterator[None]:
    """A run context per test (health checks of in-test controllers), with timeouts
    short enough that failing tests fail fast."""
    with run_context(request.node.nodeid, test=True), use_defaults(timeout=5, duration=1):
        yield
