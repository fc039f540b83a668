"""One control plane with three simulated nodes for this folder (per xdist worker), a namespace
and a :class:`ktest.nodes.Kubelet` per test. The shared session plane of tests/conftest.py runs
no scheduler or workload controllers, which the tests elsewhere rely on."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from bare_wiring import plane_cluster

from ktest.assets import Assets
from ktest.cluster import Cluster
from ktest.controlplane import ControlPlane
from ktest.nodes import Kubelet


@pytest.fixture(scope="session")
def nodes_plane(k8s_assets: Assets) -> Iterator[ControlPlane]:
    with ControlPlane(assets=k8s_assets, nodes=3) as cp:
        yield cp


@pytest.fixture(scope="session")
def sim(nodes_plane: ControlPlane) -> Iterator[Cluster]:
    with plane_cluster(nodes_plane, "simulated") as cluster:
        yield cluster


@pytest.fixture
def sim_ns(sim: Cluster, request: pytest.FixtureRequest) -> Iterator[str]:
    with sim.namespace(prefix=request.node.name[:30], background=True) as name:
        yield name


@pytest.fixture
def kubelet(sim: Cluster, sim_ns: str) -> Iterator[Kubelet]:
    simulated = Kubelet(sim, sim_ns)
    yield simulated
    simulated.close(check=False)
