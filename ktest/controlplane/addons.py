"""What a control plane asks of an add-on that runs beside it (simulated nodes), and the door to the
add-on that upgrades it in place (:func:`upgrade`).

The plane starts an add-on once the API server is ready, waits for it with the controllers,
lists its processes with its own, and stops it first; the add-on says which controllers and
kube-controller-manager flags it needs. :func:`plane_addons` makes them from the plane's keywords.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol

from ktest import addon_registry
from ktest.assets.bundle import Assets
from ktest.base.process import ManagedProcess
from ktest.controlplane.upgrade_report import UpgradeReport


class PlaneAddon(Protocol):
    controllers: tuple[str, ...]
    controller_manager_flags: tuple[str, ...]

    def prepare(self, assets: Assets) -> None:
        """Find its binaries; raise on bad input, before any process starts."""

    def start(self, *, request: Any, plane: Any, version: str, log_note: str) -> None:
        """The API server of ``plane`` (``version``) is ready: create the add-on's objects and
        launch its processes (``plane.kubeconfig_path``, ``plane.directory``)."""

    def wait_until_ready(self, timeout: float) -> None: ...

    def processes(self) -> dict[str, ManagedProcess]: ...

    def describe(self) -> str: ...

    def stop(self, timeout: float) -> None: ...


def with_addon_controllers(requested: tuple[str, ...], addons: tuple[PlaneAddon, ...]) -> tuple[str, ...]:
    """The requested controllers and those the add-ons need, each once."""
    return tuple(dict.fromkeys(requested + tuple(name for addon in addons for name in addon.controllers)))


def plane_addons(*, nodes: int = 0) -> tuple[PlaneAddon, ...]:
    """The add-ons ``ControlPlane(nodes=...)`` asks for."""
    found: list[PlaneAddon] = []
    if nodes:
        found.append(addon_registry.load("plane.nodes")(nodes))
    elif not isinstance(nodes, int) or isinstance(nodes, bool):
        addon_registry.load("plane.nodes")(nodes)  # raises the add-on's own error for bad input
    return tuple(found)


def upgrade(plane: Any, to: str, assets: Assets | Path | str | None) -> UpgradeReport:
    """Upgrade ``plane`` in place to ``to``: :func:`ktest.plane_upgrade.upgrade.upgrade_plane`."""
    report: UpgradeReport = addon_registry.load("plane.upgrade")(plane, to, assets=assets)
    return report
