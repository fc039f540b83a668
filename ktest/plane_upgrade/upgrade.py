"""An in-place upgrade of a running control plane to the next Kubernetes minor.

kube-apiserver and kube-controller-manager stop and the next minor's start on the **same etcd
process and data**, port and certificates: connected operators see their connections drop and must
reconnect, as during a real control plane upgrade. :func:`plan_upgrade` checks the target first, as
the version-skew policy requires (one minor at a time, never down, only supported minors);
:func:`upgrade_plane` upgrades. ``ControlPlane.upgrade`` is the public way in.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ktest.assets.bundle import Assets
from ktest.assets.selectors import KubeVersion
from ktest.controlplane.upgrade_report import ServedApi, UpgradeReport
from ktest.errors import AssetsError, ControlPlaneError

if TYPE_CHECKING:
    from ktest.controlplane.apiserver import ApiServerClient
    from ktest.controlplane.controller_manager import ControllerManager

# The control plane being upgraded: a started ``ktest.controlplane.plane.ControlPlane``, whose parts
# this module drives. Not imported here: it reaches this module by name (``ktest.addon_registry``).
Plane = Any

# Aggregated discovery (apidiscovery.k8s.io/v2, GA since 1.30): every group, version and
# resource in one answer for /api and one for /apis.
_AGGREGATED_DISCOVERY = {
    "Accept": "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json"
}


@dataclass(frozen=True)
class UpgradePlan:
    """A checked upgrade: the binaries of the target and its version."""

    from_version: KubeVersion
    to_version: KubeVersion
    assets: Assets


def plan_upgrade(current: str, to: str, assets: Assets | Path | str | None = None) -> UpgradePlan:
    """Check an upgrade from ``current`` (``1.36.3``) to ``to`` (``1.37`` or ``1.37.2``) and find
    its binaries (``assets``: a directory or Assets; default: as ``ControlPlane`` obtains them).

    ControlPlaneError, saying what to do instead, for a target that is not a version, an
    unsupported minor, a skip of minors, a downgrade or the version already running."""
    from ktest.assets.minors import DEFAULT_MINOR, facts, supported_minors
    from ktest.assets.probe import reported_version
    from ktest.controlplane.binaries import plane_assets

    try:
        wanted = KubeVersion.parse(to)
    except AssetsError as error:
        raise ControlPlaneError(f"cannot upgrade to {to!r}: {error}.") from None
    running = KubeVersion.parse(current)
    try:
        facts(wanted.minor_text)
    except AssetsError:
        raise ControlPlaneError(
            f"cannot upgrade to Kubernetes {wanted}: ktest does not support that minor (supported: "
            f"{', '.join(supported_minors())}). {_next_step(running)}, or start a ControlPlane "
            f"of the version you need (the default is {DEFAULT_MINOR})."
        ) from None
    wanted_minor, running_minor = (wanted.major, wanted.minor), (running.major, running.minor)
    same_minor = wanted_minor == running_minor
    if wanted_minor < running_minor or (
        same_minor and wanted.patch is not None and running.patch is not None and wanted.patch < running.patch
    ):
        raise ControlPlaneError(
            f"cannot upgrade from {running} to {wanted}: that is a downgrade, which Kubernetes does not "
            "support (the newer API server may have written objects the older one cannot read). "
            f"Start a ControlPlane of {wanted} instead, and upgrade it if the test needs an upgrade."
        )
    if wanted_minor > running_minor and wanted_minor != (running.major, running.minor + 1):
        raise ControlPlaneError(
            f"cannot upgrade from {running} to {wanted}: that skips a minor. Kubernetes' version-skew "
            "policy allows one minor at a time (kube-apiserver and kube-controller-manager must be "
            f"at most one minor apart). Upgrade to {_next_minor(running)} first, then to {wanted}; "
            f"or start the ControlPlane at {_previous_minor(wanted)} to upgrade to {wanted} in one step."
        )
    try:
        target = plane_assets(assets, wanted.text)
    except AssetsError as error:
        raise ControlPlaneError(
            f"cannot upgrade to Kubernetes {wanted}: its binaries are not available.\n{error}"
        ) from None
    try:
        apiserver = target.binary("kube-apiserver")
        # binaries the caller points at are asked what they are, not believed to be `to`
        reported = target.version if assets is None else reported_version(apiserver, "kube-apiserver")
        resolved = KubeVersion.parse(reported) if reported else wanted
    except AssetsError as error:
        raise ControlPlaneError(f"cannot upgrade to Kubernetes {wanted}: {error}") from None
    if not wanted.text or (resolved.major, resolved.minor) != wanted_minor:
        raise ControlPlaneError(
            f"cannot upgrade to Kubernetes {wanted}: the binaries in {target.directory} are "
            f"Kubernetes {resolved}. Point assets= at binaries of {wanted}, or leave it out."
        )
    not_newer = same_minor and resolved.patch is not None and resolved.patch <= (running.patch or 0)
    if resolved == running or not_newer:
        raise ControlPlaneError(
            f"cannot upgrade from {running} to {resolved}: the control plane already runs "
            f"{running}. {_next_step(running)}."
        )
    return UpgradePlan(running, resolved, target)


def _next_step(running: KubeVersion) -> str:
    """What to upgrade ``running`` to instead: the next minor, when ktest supports it."""
    from ktest.assets.minors import MINORS

    if _next_minor(running) in MINORS:
        return f"Upgrade to the next minor, {_next_minor(running)}"
    return (
        f"{running.minor_text} is the newest minor ktest supports, so there is nothing to upgrade to; "
        f"start the ControlPlane at {_previous_minor(running)} to test an upgrade to {running.minor_text}"
    )


def _next_minor(version: KubeVersion) -> str:
    return f"{version.major}.{version.minor + 1}"


def _previous_minor(version: KubeVersion) -> str:
    return f"{version.major}.{version.minor - 1}"


def served_apis(client: ApiServerClient) -> frozenset[ServedApi]:
    """Every (group, version, resource) the API server serves, from aggregated discovery;
    subresources (``deployments/status``) are left out. ControlPlaneError if it does not answer."""
    found: set[ServedApi] = set()
    for path in ("/api", "/apis"):
        status, body = client.get(path, timeout=10.0, headers=_AGGREGATED_DISCOVERY)
        if status != 200:
            raise ControlPlaneError(f"the API server did not answer discovery ({path}: status {status}).")
        for group in json.loads(body).get("items", []):
            name = group.get("metadata", {}).get("name", "")
            for version in group.get("versions", []):
                for resource in version.get("resources", []):
                    found.add(ServedApi(name, version["version"], resource["resource"]))
    return frozenset(found)


def upgrade_plane(plane: Plane, to: str, *, assets: Assets | Path | str | None = None) -> UpgradeReport:
    """Upgrade ``plane`` in place to ``to`` (``"1.37"``; ``cp.upgrade("1.37")``).

    Returns once the new API server is ready and its controllers run; a target
    :func:`plan_upgrade` refuses is refused before anything stops. If the new API server does not
    come up, the old binaries start again and ControlPlaneError says why. ``assets``: the target's
    binaries (default: obtained as ``ControlPlane`` does). A plane others use
    (``shared_by``: the pytest session's, ``ktest up``'s) is refused."""
    with plane._lock:
        plane._require_started()
        if plane.shared_by:
            raise ControlPlaneError(
                f"cannot upgrade this control plane: {plane.shared_by} uses it, and an upgrade under "
                "them would restart their API server mid-test and leave their record of its processes "
                "stale. Upgrade a control plane of the test's own: the control_plane_upgrade fixture "
                "(pytest) or `with ControlPlane(...) as cp: cp.upgrade(...)`."
            )
        plan = plan_upgrade(plane.version, to, assets)
        from ktest.controlplane.controller_manager import ControllerManager, controllers_to_run

        new_controllers = controllers_to_run(plane._requested_controllers, plan.assets)
        client = plane._client
        assert client is not None
        before = served_apis(client)
        bootstrap = client.bootstrap_objects()
        old_assets, old_manager = plane._assets, plane._controller_manager
        started = time.monotonic()
        plane._stop_front()
        new_manager = None
        if new_controllers:
            binary = plan.assets.binary("kube-controller-manager")
            new_manager = ControllerManager(binary, new_controllers, plane.directory, plane._log_note())
        try:
            _start_front(plane, plan.assets, new_manager, bootstrap)
        except BaseException as error:
            _roll_back(plane, old_assets, old_manager, plan, error, bootstrap)
            raise  # _roll_back raised already; keeps the type checker informed
        finished = time.monotonic()
        after = served_apis(client)
        return UpgradeReport(
            from_version=plan.from_version.text,
            to_version=plane.version,
            duration=finished - started,
            removed_apis=tuple(sorted(before - after)),
            added_apis=tuple(sorted(after - before)),
            started=started,
            finished=finished,
            served_apis=after,
        )


def _start_front(
    plane: Plane, assets: Assets, manager: ControllerManager | None, bootstrap: dict[str, list[str]] | None
) -> None:
    """Start ``assets``' kube-apiserver (and kube-controller-manager) on the plane's etcd, port
    and certificates; return once the API server is ready and the controllers run."""
    from ktest.controlplane.apiserver import served_version

    plane._assets = assets
    plane._controller_manager = manager
    plane._launch_apiserver(assets)
    if manager is not None:
        plane._launch_controller_manager()
    # Ready once what the old minor's bootstrap hooks created is served again (see
    # ApiServerClient.ready), without their fixed second's wait: etcd holds those objects.
    plane._bootstrap = bootstrap
    plane._wait_for_apiserver()
    if manager is not None:
        manager.release(True, plane.start_timeout)
    client = plane._client
    assert client is not None
    plane._version = served_version(client, assets.version)


def _roll_back(
    plane: Plane,
    old_assets: Assets | None,
    old_manager: ControllerManager | None,
    plan: UpgradePlan,
    error: BaseException,
    bootstrap: dict[str, list[str]] | None,
) -> None:
    """The new minor did not come up: stop it, start the old binaries again, raise saying why."""
    failed = plane._apiserver
    log = failed.log_tail() if failed is not None else ""
    plane._stop_front()
    assert old_assets is not None
    headline = f"upgrading the control plane from {plan.from_version} to {plan.to_version} failed: {error}"
    if isinstance(error, KeyboardInterrupt):
        plane._teardown()
        raise error
    try:
        _start_front(plane, old_assets, old_manager, bootstrap)
    except BaseException as restore_error:
        plane._teardown()
        raise ControlPlaneError(
            f"{headline}\nStarting {plan.from_version} again failed too ({restore_error}); the control plane "
            "was stopped. Its logs were in " + str(plane.log_path("kube-apiserver"))
        ) from error
    detail = f"\nThe new kube-apiserver's log ends with:\n{log}" if log and log not in str(error) else ""
    raise ControlPlaneError(
        f"{headline}\nThe control plane runs {plane.version} again, on the same data (nothing was lost)."
        f"{detail}\nFix what the log says (a flag the new minor no longer accepts in apiserver_flags=, "
        "binaries that do not run here), then upgrade again."
    ) from error

