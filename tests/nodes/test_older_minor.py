"""Simulated nodes on the older minor too (``KTEST_OLDER_K8S_VERSION``, else the previous minor):
every lifecycle and behaviour test of this folder runs again on a plane of that minor, with its
own kube-scheduler, and KWOK writes the same status fields. ``make test`` runs this file with the
older-minor tests, once those binaries are built."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from bare_wiring import plane_cluster
from test_behaviours import *  # noqa: F403  (each behaviour test, again on the older minor)
from test_pod_lifecycle import *  # noqa: F403  (the default lifecycle, again on the older minor)

from ktest.assets import minors, resolve_assets
from ktest.cluster import Cluster
from ktest.controlplane import ControlPlane

OLDER = os.environ.get("KTEST_OLDER_K8S_VERSION", minors.OLDER_MINOR)


@pytest.fixture(scope="module")
def nodes_plane() -> Iterator[ControlPlane]:
    with ControlPlane(assets=resolve_assets(OLDER), nodes=3) as plane:
        yield plane


@pytest.fixture(scope="module")
def sim(nodes_plane: ControlPlane) -> Iterator[Cluster]:
    with plane_cluster(nodes_plane, "simulated-older") as cluster:
        yield cluster


def test_the_older_minors_nodes_report_its_kubelet_version(sim: Cluster, nodes_plane: ControlPlane) -> None:
    assert sim.version.startswith(OLDER + ".")
    node = sim.get(("v1", "Node", "ktest-node-1"))
    assert node["status"]["nodeInfo"]["kubeletVersion"] == f"v{nodes_plane.version}"
