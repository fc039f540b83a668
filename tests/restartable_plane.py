"""One private control plane, started once a session, for the tests that restart it or stop its API
server (which the session's shared ``plane`` must never see): tests/wait/test_wakeup.py and
tests/operators/test_operators_kopf_request_retries.py.

Loaded as a plugin (``pytest_plugins = ("restartable_plane",)``) by the modules that use it, so that
its fixture is one for all of them (a fixture imported into two modules starts twice). Every test
using it carries ``pytest.mark.xdist_group("restartable-plane")`` (checked at collection), so that
one worker runs them all and starts the plane once. Tests run in any order (pytest-randomly): each
one finds the plane serving and leaves it serving; ``restartable_plane`` restarts it, on the same
etcd data, after a test that stopped a component.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from ktest.assets import Assets
from ktest.controlplane import ControlPlane
from ktest.errors import ControlPlaneError

GROUP = "restartable-plane"
SESSION_FIXTURE = "shared_restartable_plane"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Refuses a test on the plane that another worker could run (it would start a second plane)."""
    for item in items:
        if SESSION_FIXTURE not in getattr(item, "fixturenames", ()):
            continue
        groups = {str(mark.args[0] if mark.args else mark.kwargs.get("name", "default")) for mark in
                  item.iter_markers("xdist_group")}
        if groups != {GROUP}:
            raise pytest.UsageError(
                f"{item.nodeid} uses the restartable plane: mark it pytest.mark.xdist_group({GROUP!r}) "
                f"(and no other group), so that one worker runs every test on it; it has {sorted(groups)}"
            )


@pytest.fixture(scope="session")
def shared_restartable_plane(k8s_assets: Assets) -> Iterator[ControlPlane]:
    """The plane itself, without controllers. Tests take ``restartable_plane``; a fixture of wider
    scope that stops a component takes this one and restarts the plane itself before it returns."""
    with ControlPlane(assets=k8s_assets, controllers=None) as cp:
        yield cp


def _serving(plane: ControlPlane) -> ControlPlane:
    """``plane`` with every component running: restarted on the same etcd data (the same plane, the
    same ports while free) if one was stopped; started afresh only if a failed restart tore it down."""
    if not plane.running:
        return plane.start()
    try:
        plane.check()
    except ControlPlaneError:
        plane.restart()
    return plane


@pytest.fixture
def restartable_plane(shared_restartable_plane: ControlPlane) -> Iterator[ControlPlane]:
    """The plane, serving; after the test, serving again for the next one (whatever the test stopped)."""
    yield _serving(shared_restartable_plane)
    _serving(shared_restartable_plane)
