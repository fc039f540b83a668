"""One real control plane (etcd, kube-apiserver, kube-controller-manager with the
garbage collector) for every assertion test, the test CRDs installed, and a
namespace per test.

Binaries come from ``KTEST_ASSETS`` when set, else from ``resolve_assets()``.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from pathlib import Path

import pytest

from ktest.assets import Assets
from ktest.cluster import Cluster
from ktest.cluster.namespaces import dns_label
from ktest.context import run_context
from ktest.controlplane import ControlPlane
from ktest.wait import use_defaults

CRDS = Path(__file__).parent / "crds"


@pytest.fixture(scope="session")
def plane(k8s_assets: Assets) -> Iterator[ControlPlane]:
    """The control plane, with the test CRDs installed *before* kube-controller-manager's
    last start: its garbage collector looks for new resource kinds only every 30 s, so
    owners of a kind installed later go unnoticed for up to that long."""
    with ControlPlane(assets=k8s_assets) as cp:
        with Cluster(cp.kubeconfig, controllers=cp.controllers, name="installer") as installer:
            installer.install_crds(CRDS)
        cp.restart_controllers()
        yield cp


@pytest.fixture(scope="session")
def cluster(plane: ControlPlane) -> Iterator[Cluster]:
    # Like the bare backend's: CRDs installed through it restart the garbage collector.
    with Cluster(plane.kubeconfig, controllers=plane.controllers, user_issuer=plane.add_user,
                 name="assertions", on_crds_installed=lambda names: plane.restart_controllers()) as admin:
        yield admin


@pytest.fixture
def ns(cluster: Cluster, request: pytest.FixtureRequest) -> Iterator[str]:
    """A namespace of the test's own; deleted afterwards without waiting (the control
    plane goes away with the session anyway)."""
    name = dns_label(request.node.name, suffix=secrets.token_hex(2), max_length=50)
    cluster.create_namespace(name)
    yield name
    cluster.delete(("v1", "Namespace", name), missing_ok=True)


@pytest.fixture(autouse=True)
def test_context(request: pytest.FixtureRequest) -> Iterator[None]:
    """A run context per test (health checks of in-test controllers), with timeouts
    short enough that failing tests fail fast."""
    with run_context(request.node.nodeid, test=True), use_defaults(timeout=5, duration=1):
        yield
