"""Install rewritten webhook configurations and CRDs, wait until the API server calls them, remove them.

"Installed" is not "in effect": the API server loads webhook configurations through an informer
and rebuilds a CRD's conversion when the CRD changes. So the API server itself proves readiness:
a dry-run create of a ConfigMap labelled with this set's token must reach every configuration's
probe webhook, and one of a probe custom resource at a non-storage version every conversion
webhook. The front server answers probes itself.
"""

from __future__ import annotations

import os
import stat
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ktest.errors import WebhookError
from ktest.errors.api import ApiError
from ktest.webhooks.manifests import ADMISSION_API_VERSION, PROBE_LABEL
from ktest.webhooks.routes import PROBE_PREFIX

if TYPE_CHECKING:
    from ktest.cluster import Cluster

_POLL = 0.05
CRD_REF = ("apiextensions.k8s.io/v1", "CustomResourceDefinition")
CONVERSION_FIELD_MANAGER = "ktest-webhooks"


@dataclass
class Installed:
    """What one :class:`~ktest.webhooks.Webhooks` put into the cluster (to remove it exactly)."""

    configurations: list[tuple[str, str]] = field(default_factory=list)  # (kind, name)
    conversions: list[str] = field(default_factory=list)  # CRD names whose conversion points at ktest
    locks: list[Any] = field(default_factory=list)  # held conversion locks (locks.RemovableLock)
    probes: dict[str, tuple[str, Callable[[], None]]] = field(default_factory=dict)
    """Probe key -> (what it proves, the request that hits it)."""


def install_configuration(
    cluster: Cluster,
    config: dict[str, Any],
    installed: Installed,
    probe_index: int,
    probe: Callable[[], None],
) -> None:
    """Create one rewritten admission configuration and register its probe."""
    try:
        cluster.create(config)
    except ApiError as error:
        raise WebhookError(
            f"the API server rejected {config['kind']} "
            f"{config['metadata']['annotations']['ktest.dev/original-name']} "
            f"(installed as {config['metadata']['name']}): {error.message}"
        ) from None
    installed.configurations.append((config["kind"], config["metadata"]["name"]))
    key = f"{PROBE_PREFIX}{probe_index}"
    installed.probes[key] = (f"{config['kind']} {config['metadata']['name']}", probe)


def install_conversion(
    cluster: Cluster,
    crd: dict[str, Any],
    installed: Installed,
    route_path: str,
    namespace: str,
    probe_name: str,
    lock_timeout: float = 300.0,
) -> None:
    """Install (or update) a CRD whose conversion points at ktest, and register its probe."""
    from ktest.errors import CRDError

    name = crd["metadata"]["name"]
    installed.locks.append(_conversion_lock(cluster, name, lock_timeout))
    installed.conversions.append(name)  # first: a failed install still gets its conversion reset
    # The conversion is applied under a field manager of its own: a later plain install of the
    # same CRD (another worker's session fixture, applied as 'ktest' without a conversion) then
    # leaves it alone instead of removing it mid-test.
    spec = {key: value for key, value in crd["spec"].items() if key != "conversion"}
    try:
        cluster.install_crds({**crd, "spec": spec})
        cluster.patch(
            (*CRD_REF, name),
            {
                "apiVersion": CRD_REF[0],
                "kind": CRD_REF[1],
                "metadata": {"name": name},
                "spec": {"conversion": crd["spec"]["conversion"]},
            },
            type="apply",
            field_manager=CONVERSION_FIELD_MANAGER,
        )
    except (CRDError, ApiError) as error:
        message = error.message if isinstance(error, ApiError) else str(error)
        raise WebhookError(f"cannot install the conversion webhook of CRD {name}: {message}") from None
    probe = _conversion_probe(cluster, crd, namespace, probe_name)
    if probe is not None:  # one served version: nothing is converted yet, so nothing can call it
        installed.probes[route_path] = (f"conversion webhook of CustomResourceDefinition {name}", probe)


def _conversion_lock(cluster: Cluster, crd_name: str, timeout: float) -> Any:
    """A CRD has one conversion webhook for the whole cluster: two webhook sets converting the
    same CRD on one API server (parallel test workers) take turns instead of overwriting each
    other's client config. Held until :func:`uninstall`."""
    import hashlib

    from ktest.webhooks.locks import LockTimeout, RemovableLock

    server = hashlib.sha256(cluster.server.encode()).hexdigest()[:12]
    path = lock_directory() / f"ktest-conversion-{server}-{crd_name}.lock"
    lock = RemovableLock(path)  # removed by uninstall(): one file per port and CRD would pile up
    try:
        lock.acquire(timeout=timeout)
    except LockTimeout:
        raise WebhookError(
            f"the conversion webhook of CustomResourceDefinition {crd_name} on {cluster.server} stayed in "
            f"use by another test for {timeout:g}s (lock {path}): conversion webhooks are cluster-wide, "
            "one set at a time"
        ) from None
    return lock


def lock_directory(env: Mapping[str, str] | None = None) -> Path:
    """This user's private (0700) directory for ktest's lock files, shared by all its processes.

    ``$XDG_RUNTIME_DIR/ktest`` when the runtime directory is this user's, else
    ``${XDG_CACHE_HOME:-~/.cache}/ktest/locks``: never the world-writable temp directory, where
    another user could create (and hold) a lock first or plant a symlink under its name.
    """
    from ktest.base.certs import private_directory

    env = os.environ if env is None else env
    runtime = env.get("XDG_RUNTIME_DIR")
    if runtime and _private_to_user(Path(runtime)):
        directory = Path(runtime) / "ktest"
    else:
        cache = env.get("XDG_CACHE_HOME") or str(Path(env.get("HOME") or Path.home()) / ".cache")
        directory = Path(cache) / "ktest" / "locks"
    private_directory(directory)
    try:
        info = os.lstat(directory)
        if stat.S_ISDIR(info.st_mode) and info.st_uid == os.getuid() and stat.S_IMODE(info.st_mode) & 0o077:
            os.chmod(directory, 0o700)
            info = os.lstat(directory)
    except OSError as error:
        raise WebhookError(f"cannot use the lock directory {directory}: {error.strerror or error}") from None
    if not _private_to_user(directory):
        raise WebhookError(
            f"the lock directory {directory} is not a directory private to this user (owner uid "
            f"{info.st_uid}, mode {oct(stat.S_IMODE(info.st_mode))}, symlink: "
            f"{stat.S_ISLNK(info.st_mode)}); remove it, or set XDG_CACHE_HOME to a directory of yours"
        )
    return directory


def _private_to_user(path: Path) -> bool:
    """A real directory (no symlink) of this user that nobody else may enter."""
    try:
        info = os.lstat(path)
    except OSError:
        return False
    private = not stat.S_IMODE(info.st_mode) & 0o077
    return stat.S_ISDIR(info.st_mode) and info.st_uid == os.getuid() and private


def admission_probe(cluster: Cluster, namespace: str, probe_name: str, token: str) -> Callable[[], None]:
    """A dry-run create of a ConfigMap only the probe webhooks of this set match."""
    body = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": probe_name, "namespace": namespace, "labels": {PROBE_LABEL: token}},
    }
    path = f"/api/v1/namespaces/{namespace}/configmaps"
    return lambda: _dry_run(cluster, path, body)


def _conversion_probe(
    cluster: Cluster, crd: dict[str, Any], namespace: str, probe_name: str
) -> Callable[[], None] | None:
    spec = crd["spec"]
    versions = [v["name"] for v in spec.get("versions") or () if v.get("served", True)]
    storage = next((v["name"] for v in spec.get("versions") or () if v.get("storage")), None)
    other = next((v for v in versions if v != storage), None)
    if other is None:
        return None  # one version: nothing is ever converted; ready once served
    group, kind = spec["group"], spec["names"]["kind"]
    body = {"apiVersion": f"{group}/{other}", "kind": kind, "metadata": {"name": probe_name}}
    path = f"/apis/{group}/{other}/{spec['names']['plural']}"
    if spec.get("scope", "Namespaced") == "Namespaced":
        body["metadata"]["namespace"] = namespace
        path = f"/apis/{group}/{other}/namespaces/{namespace}/{spec['names']['plural']}"
    return lambda: _dry_run(cluster, path, body)


def _dry_run(cluster: Cluster, path: str, body: dict[str, Any]) -> None:
    cluster.rest.request("POST", path, query={"dryRun": "All", "fieldManager": "ktest-probe"}, body=body)


def wait_called(installed: Installed, hits: set[str], timeout: float) -> None:
    """Send probes until the API server has called ktest for every configuration and conversion."""
    deadline = time.monotonic() + timeout
    last_errors: dict[str, str] = {}
    while True:
        pending = {key: probe for key, probe in installed.probes.items() if key not in hits}
        if not pending:
            return
        for key, (_, send) in pending.items():
            try:
                send()
            except ApiError as error:
                last_errors[key] = error.message
            if key in hits:
                last_errors.pop(key, None)
        if all(key in hits for key in pending):
            return
        if time.monotonic() >= deadline:
            lines = [
                f"  {proves}: the probe request failed: {last_errors[key]}"
                if key in last_errors
                else f"  {proves}: no call arrived"
                for key, (proves, _) in pending.items()
                if key not in hits
            ]
            raise WebhookError(
                f"the API server did not call ktest's webhook server within {timeout:g}s for:\n"
                + "\n".join(lines)
                + "\n(the API server must reach the address in the rewritten clientConfig and trust its CA)"
            )
        time.sleep(_POLL)


def uninstall(cluster: Cluster, installed: Installed) -> list[str]:
    """Delete the configurations, reset the conversions to None; the problems met (never raises)."""
    problems = []
    for kind, name in reversed(installed.configurations):
        try:
            cluster.delete((ADMISSION_API_VERSION, kind, name), missing_ok=True)
        except Exception as error:
            problems.append(f"could not delete {kind} {name}: {error}")
    for name in installed.conversions:
        try:
            cluster.patch((*CRD_REF, name), {"spec": {"conversion": {"strategy": "None", "webhook": None}}})
        except Exception as error:
            if not (isinstance(error, ApiError) and error.status == 404):
                problems.append(f"could not reset the conversion of CustomResourceDefinition {name}: {error}")
    installed.configurations.clear()
    installed.conversions.clear()
    for lock in installed.locks:
        lock.release()
    installed.locks.clear()
    return problems
