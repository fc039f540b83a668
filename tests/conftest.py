"""Fixtures shared by ktest's own test folders.

All folders use the same binaries: ``KTEST_ASSETS`` when set (any version,
used as is), else the version given with ``--ktest-k8s-version`` (the plugin's
option, so ``make test K8S_VERSION=1.35`` runs the whole suite on 1.35), else
the default.

``plane``, ``admin`` and ``ns`` are defined here once: one control plane per
session (per xdist worker) serves every folder that can share it. A folder
overrides one of them only where it needs something else, and says why
(``tests/wait``: a namespace per module; ``tests/hardening``: a plane per module
without controllers; ``tests/controlplane``: a plane of its own with the audit log).

Objects for tests are built with ``builders`` (tests/builders.py), messages checked
with ``messages.assert_says`` (tests/messages.py) and processes looked up with
``processes`` (tests/processes.py); a Cluster on a test's own control plane is wired with
``bare_wiring.plane_cluster`` (tests/bare_wiring.py); ``tests`` is on ``sys.path`` because this
conftest.py is in it. ``closed_port`` serves the folders that need a refused connection;
``inner_env`` the tests that run an inner pytest session with ``pytester`` (tests/plugin,
tests/sessions, the webhook report test), whose helpers are in tests/inner_runs.py.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from bare_wiring import plane_cluster

from ktest.assets import Assets, resolve_assets
from ktest.assets.store import Locations
from ktest.base.ports import free_ports
from ktest.cluster import Cluster
from ktest.controlplane import ControlPlane


@pytest.fixture(scope="session")
def k8s_assets(pytestconfig: pytest.Config) -> Assets:
    return resolve_assets(pytestconfig.getoption("--ktest-k8s-version", default=None))


@pytest.fixture(scope="session")
def plane(k8s_assets: Assets) -> Iterator[ControlPlane]:
    """The session's control plane (etcd, kube-apiserver, kube-controller-manager)."""
    with ControlPlane(assets=k8s_assets) as cp:
        yield cp


@pytest.fixture(scope="session")
def admin(plane: ControlPlane) -> Iterator[Cluster]:
    """The plane's admin, like the bare backend's: it issues users, and CRDs installed through
    it restart the garbage collector (which otherwise notices new kinds only every 30 s)."""
    with plane_cluster(plane, "admin") as cluster:
        yield cluster


@pytest.fixture
def ns(admin: Cluster, request: pytest.FixtureRequest) -> Iterator[str]:
    """A namespace of the test's own, deleted in the background afterwards; named after the
    test, cut short so that tests can derive names from it (``f"{ns}-other"``)."""
    with admin.namespace(prefix=request.node.name[:30], background=True) as name:
        yield name


@pytest.fixture
def closed_port() -> int:
    """A 127.0.0.1 port nothing listens on (connections are refused at once), picked by ktest's
    own port finder, below the ephemeral range that outgoing connections draw from."""
    (port,) = free_ports(1)
    return port


@pytest.fixture(scope="session")
def binary_cache() -> Path:
    """The binary cache as seen from the real HOME (before pytester replaces it)."""
    return Locations.from_env().cache_root


@pytest.fixture
def inner_env(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, binary_cache: Path, tmp_path: Path
) -> dict[str, str]:
    """Environment of an inner run: the real binary cache, a private state directory, no KTEST_*."""
    pytester.syspathinsert()
    for name in list(os.environ):
        if name.startswith("KTEST_") and name not in ("KTEST_CACHE_DIR", "KTEST_ASSETS"):
            monkeypatch.delenv(name)  # the outer run's settings must not leak in
    values = {
        "KTEST_CACHE_DIR": os.environ.get("KTEST_CACHE_DIR") or str(binary_cache),
        "XDG_STATE_HOME": str(tmp_path / "state"),
        "PYTEST_ADDOPTS": "-p no:cacheprovider -W ignore::DeprecationWarning",
    }
    for name, value in values.items():
        monkeypatch.setenv(name, value)
    return values
