"""Fixtures for the control-plane tests: real etcd, kube-apiserver and
kube-controller-manager binaries, no fakes.

Binaries come from the ``k8s_assets`` fixture of tests/conftest.py.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import kubernetes
import pytest
from controlplane_helpers import client_for

from ktest.assets.bundle import Assets
from ktest.controlplane import ControlPlane


@pytest.fixture(scope="session")
def assets(k8s_assets: Assets) -> Assets:
    """The session's binaries (see tests/conftest.py)."""
    return k8s_assets


@pytest.fixture(scope="session")
def shared_plane(assets: Assets) -> Iterator[ControlPlane]:
    """One control plane (with controllers and audit log) for the tests that can share it."""
    with ControlPlane(assets=assets, audit=True) as plane:
        yield plane


@pytest.fixture(scope="session")
def admin_client(shared_plane: ControlPlane) -> Iterator[Any]:
    client = client_for(shared_plane.kubeconfig)
    yield client
    client.close()


@pytest.fixture()
def namespace(admin_client: Any, request: pytest.FixtureRequest) -> Iterator[str]:
    """A fresh namespace for one test (deleted afterwards without waiting)."""
    core = kubernetes.client.CoreV1Api(admin_client)
    name = "t-" + request.node.name.lower().replace("_", "-")[:40].strip("-")
    core.create_namespace({"metadata": {"name": name}})
    yield name
    try:
        core.delete_namespace(name)
    except kubernetes.client.ApiException as error:
        if error.status != 404:
            raise
