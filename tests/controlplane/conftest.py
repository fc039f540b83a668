"""Fixtures for the control-plane tests: real etcd, kube-apiserver and
kube-controller-manager binaries, no fakes.

Binaries come from ``KTEST_ASSETS`` when set (used as a plain directory, so
unversioned development builds work too), else from ``resolve_assets()``.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import kubernetes
import pytest
from controlplane_helpers import client_for

from ktest.assets.assets import Assets
from ktest.controlplane import ControlPlane


@pytest.fixture(scope="session")
def assets(pytestconfig: pytest.Config) -> Assets:
    """One resolution of the binaries for the whole session (``--k8s-version`` if given)."""
    directory = os.environ.get("KTEST_ASSETS")
    if directory:
        return Assets(directory=Path(directory), version="", origin="KTEST_ASSETS")
    from ktest.assets import resolve_assets

    return resolve_assets(pytestconfig.getoption("--k8s-version", default=None))


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
