"""The ``control_plane_upgrade`` fixture and the ``ktest_upgrade`` marker: a test that upgrades
the control plane under its operator gets a control plane of its own, at the minor before
the session's, never the session's shared one (other tests, xdist workers, use that).

    @pytest.mark.ktest_upgrade(from_="1.36", to="1.37")   # optional: these are the defaults
    def test_operator_survives_the_upgrade(control_plane_upgrade):
        cluster = control_plane_upgrade.cluster
        ...                                   # start the operator on `cluster`, create objects
        report = control_plane_upgrade.upgrade()
        ...                                   # assertions of ktest.plane_upgrade.assertions

A thin layer over :meth:`ktest.ControlPlane.upgrade`. An upgrade in place needs the bare
backend's binaries: on backend kind (whose node images cannot be upgraded in place) or an
existing cluster, the fixture skips the test and says what to do instead.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from ktest.cluster import Cluster
    from ktest.config import Settings
    from ktest.controlplane import ControlPlane
    from ktest.controlplane.upgrade_report import UpgradeReport

MARKER = (
    "ktest_upgrade(from_=None, to=None, apiserver_flags=()): the control_plane_upgrade fixture's "
    "versions (default: to the session's Kubernetes minor from the one before) and extra kube-apiserver "
    'flags for its control plane (e.g. ["--runtime-config=networking.k8s.io/v1beta1=true"])'
)
KIND_CANNOT_UPGRADE = (
    "control_plane_upgrade needs backend bare: kind cannot upgrade a cluster in place (a node image "
    "holds one Kubernetes version; kubeadm upgrades are not what ktest's kind clusters run), and ktest "
    "does not upgrade an existing cluster it does not own. Run this test with --ktest-backend bare; to "
    "test one version on kind, run the suite once per version (--ktest-k8s-version)."
)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", MARKER)


@dataclass
class ControlPlaneUpgrade:
    """The test's own control plane at ``from_version``, its admin :class:`~ktest.Cluster`, and
    the version :meth:`upgrade` goes to."""

    control_plane: ControlPlane
    cluster: Cluster
    from_version: str
    to_version: str
    report: UpgradeReport | None = None

    def upgrade(self, to: str | None = None) -> UpgradeReport:
        """``control_plane.upgrade(to or to_version)``; the report is kept in :attr:`report`, and
        :attr:`cluster` forgets what it discovered of the old minor's APIs."""
        self.report = self.control_plane.upgrade(to or self.to_version)
        self.cluster.discovery.invalidate()
        return self.report


@dataclass(frozen=True)
class UpgradeChoice:
    """What the ``ktest_upgrade`` marker asks for (checked, with a message naming the fix)."""

    from_version: str
    to_version: str
    apiserver_flags: tuple[str, ...]


def upgrade_choice(marker: pytest.Mark | None, settings: Settings) -> UpgradeChoice:
    """The versions and flags of ``@pytest.mark.ktest_upgrade(...)`` (or the defaults: to the
    session's minor, from the one before); a wrong use raises ValueError saying how to fix it."""
    from ktest.assets.minors import DEFAULT_MINOR
    from ktest.assets.selectors import KubeVersion
    from ktest.errors import AssetsError

    arguments: dict[str, Any] = dict(marker.kwargs) if marker is not None else {}
    if marker is not None and marker.args:
        raise ValueError(
            "ktest_upgrade takes keyword arguments only: "
            '@pytest.mark.ktest_upgrade(from_="1.36", to="1.37")'
        )
    unknown = sorted(set(arguments) - {"from_", "to", "apiserver_flags"})
    if unknown:
        raise ValueError(
            f"ktest_upgrade does not know {', '.join(unknown)}; it takes from_, to and apiserver_flags "
            '(e.g. @pytest.mark.ktest_upgrade(from_="1.36", to="1.37"))'
        )
    session = settings.k8s_version if settings.k8s_version not in (None, "", "latest") else DEFAULT_MINOR
    try:
        to = KubeVersion.parse(str(arguments.get("to") or session))
        start = KubeVersion.parse(str(arguments["from_"])) if arguments.get("from_") else None
    except AssetsError as error:
        raise ValueError(f"ktest_upgrade: {error}") from None
    from_version = start.text if start is not None else f"{to.major}.{to.minor - 1}"
    flags = arguments.get("apiserver_flags") or ()
    if isinstance(flags, str):
        raise ValueError(f"ktest_upgrade's apiserver_flags is a list, e.g. [{flags!r}], not a string")
    return UpgradeChoice(from_version, to.text, tuple(str(flag) for flag in flags))


@pytest.fixture
def control_plane_upgrade(
    ktest_settings: Settings, request: pytest.FixtureRequest
) -> Iterator[ControlPlaneUpgrade]:
    """A control plane of the test's own at the minor before the session's (or the
    ``ktest_upgrade`` marker's ``from_``), with the session's controllers, and its admin Cluster;
    ``.upgrade()`` upgrades it in place to the session's minor (or the marker's ``to``).
    Stopped after the test. Skipped, saying why, on backends other than bare."""
    from ktest import backend_registry as registry

    if not registry.spec(ktest_settings.backend).starts_control_plane:
        pytest.skip(f"{KIND_CANNOT_UPGRADE} (this session uses backend {ktest_settings.backend})")
    try:
        choice = upgrade_choice(request.node.get_closest_marker("ktest_upgrade"), ktest_settings)
    except ValueError as error:
        problem = str(error)
    else:
        problem = ""
    if problem:
        pytest.fail(problem, pytrace=False)
    from ktest.cluster import Cluster
    from ktest.controlplane import ControlPlane

    plane = ControlPlane(
        choice.from_version,
        controllers=ktest_settings.controllers or "none",
        root_directory=ktest_settings.run_dir,
        apiserver_flags=list(choice.apiserver_flags),
    )
    with plane:
        cluster = Cluster(
            plane.kubeconfig,
            controllers=plane.controllers,
            user_issuer=plane.add_user,
            on_crds_installed=lambda names: plane.restart_controllers(),
            name=f"{request.node.name} (upgrade {choice.from_version} -> {choice.to_version})",
        )
        with cluster:
            yield ControlPlaneUpgrade(plane, cluster, plane.version, choice.to_version)

