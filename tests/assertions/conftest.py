"""The assertion tests use the shared ``plane`` and ``ns`` of tests/conftest.py, the test
CRDs installed, and short ``eventually`` timeouts.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from ktest.cluster import Cluster
from ktest.context import run_context
from ktest.controlplane import ControlPlane
from ktest.wait import use_defaults

CRDS = Path(__file__).parent / "crds"


@pytest.fixture(scope="session")
def cluster(plane: ControlPlane) -> Iterator[Cluster]:
    """Overrides the plugin's ``cluster``: the shared plane's admin with the test CRDs installed.
    Like the bare backend's, CRDs installed through it restart the garbage collector (which
    otherwise notices new kinds only every 30 s, so owners of a later kind go unnoticed)."""
    with Cluster(plane.kubeconfig, controllers=plane.controllers, user_issuer=plane.add_user,
                 name="assertions", on_crds_installed=lambda names: plane.restart_controllers()) as admin:
        admin.install_crds(CRDS)
        yield admin


@pytest.fixture(autouse=True)
def test_context(request: pytest.FixtureRequest) -> Iterator[None]:
    """A run context per test (health checks of in-test controllers), with timeouts
    short enough that failing tests fail fast."""
    with run_context(request.node.nodeid, test=True), use_defaults(timeout=5, duration=1):
        yield
