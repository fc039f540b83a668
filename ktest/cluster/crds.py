"""Install CustomResourceDefinitions and wait until they are really served.

A CRD object exists long before its kinds can be used: the API server must
accept its names (``NamesAccepted``), establish it (``Established``) and serve
each version through discovery. Tests that start before that fail with
confusing 404s, so installation waits for all three.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ktest.api_error import ApiError
from ktest.cluster.manifests import Manifest, ManifestSource, load_located
from ktest.errors import CRDError, ManifestError

if TYPE_CHECKING:
    from ktest.cluster.client import ClusterClient

CRD_API_VERSION = "apiextensions.k8s.io/v1"
CRD_KIND = "CustomResourceDefinition"
_POLL = 0.05


@dataclass(frozen=True)
class _Pending:
    manifest: Manifest
    name: str
    kind: str
    group_versions: tuple[str, ...]


def install_crds(cluster: ClusterClient, *sources: ManifestSource, timeout: float = 60.0) -> list[str]:
    """Create or update every CRD in ``sources``; wait until established and served.

    Returns the CRD names. Errors name the file, the document and the CRD.
    """
    try:
        manifests = [m for source in sources for m in load_located(source)]
    except ManifestError as error:
        raise CRDError(f"cannot read CRDs: {error}") from None
    pending = [_check_is_crd(m) for m in manifests]
    new = [crd.name for crd in pending if not cluster.exists((CRD_API_VERSION, CRD_KIND, crd.name))]
    for crd in pending:
        try:
            cluster.apply(crd.manifest.obj)
        except ApiError as error:
            raise CRDError(
                f"{crd.manifest.origin}: the API server rejected CustomResourceDefinition "
                f"{crd.name}: {error.message}"
            ) from None
    deadline = time.monotonic() + timeout
    for crd in pending:
        _wait_served(cluster, crd, deadline, timeout)
    cluster.discovery.invalidate()
    if new and cluster.on_crds_installed is not None:
        cluster.on_crds_installed(new)
    return [crd.name for crd in pending]


def _check_is_crd(manifest: Manifest) -> _Pending:
    obj = manifest.obj
    if obj.get("apiVersion") != CRD_API_VERSION or obj.get("kind") != CRD_KIND:
        raise CRDError(
            f"{manifest.origin}: {manifest.ref_text} ({obj.get('apiVersion')}) is not a "
            f"{CRD_KIND} ({CRD_API_VERSION}); CRD paths must hold only CRDs "
            "(install other objects with cluster.apply)"
        )
    spec = obj.get("spec") or {}
    group = spec.get("group", "")
    served = tuple(
        f"{group}/{version['name']}" for version in spec.get("versions") or () if version.get("served", True)
    )
    kind = (spec.get("names") or {}).get("kind", "")
    return _Pending(manifest, obj["metadata"]["name"], kind, served)


def _wait_served(cluster: ClusterClient, crd: _Pending, deadline: float, timeout: float) -> None:
    ref = (CRD_API_VERSION, CRD_KIND, crd.name)
    conditions: dict[str, dict[str, Any]] = {}
    remaining = list(crd.group_versions)
    while True:
        current = cluster.get(ref)
        conditions = {c["type"]: c for c in (current.get("status") or {}).get("conditions") or ()}
        names = conditions.get("NamesAccepted", {})
        if names.get("status") == "False":
            raise CRDError(
                f"{crd.manifest.origin}: CustomResourceDefinition {crd.name}: names not accepted "
                f"({names.get('reason')}): {names.get('message')}. Another CRD already uses these names."
            )
        if conditions.get("Established", {}).get("status") == "True" and names.get("status") == "True":
            remaining = [gv for gv in remaining if not cluster.discovery.served(gv, crd.kind)]
            if not remaining:
                _wait_storage_ready(cluster, crd, deadline, timeout)
                return
        if time.monotonic() >= deadline:
            seen = ", ".join(f"{t}={c.get('status')}" for t, c in sorted(conditions.items())) or "none"
            raise CRDError(
                f"{crd.manifest.origin}: CustomResourceDefinition {crd.name} not served within "
                f"{timeout:.0f}s: versions not served yet: {', '.join(remaining)}; conditions: {seen}"
            )
        time.sleep(_POLL)


def _wait_storage_ready(cluster: ClusterClient, crd: _Pending, deadline: float, timeout: float) -> None:
    """Wait until a LIST of each version answers: a resource that is served can still answer
    429 "storage is (re)initializing" while its watch cache fills, and operators started
    right after the installation would log that as an error."""
    for group_version in crd.group_versions:
        path = cluster.info(group_version, crd.kind).path()
        while True:
            try:
                cluster.rest.request("GET", path)
                break
            except ApiError as error:
                if error.status != 429:
                    raise
                if time.monotonic() >= deadline:
                    raise CRDError(
                        f"{crd.manifest.origin}: CustomResourceDefinition {crd.name}: {group_version} "
                        f"is served but its storage was not ready within {timeout:.0f}s: {error.message}"
                    ) from None
            time.sleep(_POLL)
