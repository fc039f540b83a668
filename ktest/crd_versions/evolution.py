"""Evolve a CustomResourceDefinition's versions as a real cluster does: a new revision, then
storage migration, then pruning ``status.storedVersions``.

:func:`evolve_crd` installs a revision once it is a valid evolution of the installed one (checked
before anything is sent); :func:`migrate_storage` re-stores every object in the storage version and
prunes ``status.storedVersions``; :func:`stored_versions` reads from etcd which version each object
is really stored in (bare backend: :mod:`ktest.crd_versions.etcd_reads`).
"""

from __future__ import annotations

import base64
import hashlib
import json
import time
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeAlias

from ktest.cluster.crds import CRD_API_VERSION, CRD_KIND, _check_is_crd, install_crds
from ktest.cluster.manifests import ManifestSource, load_as
from ktest.errors import ClusterError, CRDError
from ktest.errors.api import ApiError

if TYPE_CHECKING:
    from ktest.cluster.client import ClusterClient
    from ktest.controlplane.plane import ControlPlane
    from ktest.crd_versions.etcd_reads import EtcdReader

    EtcdAccess: TypeAlias = ControlPlane | EtcdReader

MIGRATION_FIELD_MANAGER = "ktest-storage-migration"
_POLL = 0.05
_CONFLICT_RETRIES = 5


class SchemaChangeWithoutConversionWarning(UserWarning):
    """Served versions with different schemas under conversion strategy None (allowed on request)."""


@dataclass(frozen=True)
class StorageMigration:
    """What :func:`migrate_storage` did."""

    crd: str
    storage_version: str
    rewritten: list[str] = field(default_factory=list)  # "namespace/name" (or "name") of each object
    gone: list[str] = field(default_factory=list)  # deleted while the migration ran
    stored_versions_before: list[str] = field(default_factory=list)
    stored_versions_after: list[str] = field(default_factory=list)
    checked_in_etcd: bool = False  # every object was read back from etcd in the storage version

    def __str__(self) -> str:
        checked = ", each read back from etcd" if self.checked_in_etcd else ""
        return (
            f"CustomResourceDefinition {self.crd}: {len(self.rewritten)} object(s) re-stored in "
            f"{self.storage_version}{checked}; status.storedVersions "
            f"{self.stored_versions_before} -> {self.stored_versions_after}"
        )


def etcd_reader(etcd: EtcdAccess) -> EtcdReader:
    """A reader of etcd from a :class:`~ktest.controlplane.ControlPlane` (or a reader itself)."""
    from ktest.crd_versions.etcd_reads import EtcdReader

    return etcd if isinstance(etcd, EtcdReader) else EtcdReader.of(etcd)


def stored_versions(
    cluster: ClusterClient, crd: str | Mapping[str, Any], etcd: EtcdAccess
) -> dict[str, list[str]]:
    """Which objects of a CRD etcd holds in which version: ``{"v1alpha1": ["ns/a", ...], ...}``.

    ``crd``: the CRD's name (``<plural>.<group>``) or the CRD object."""
    installed = cluster.get((CRD_API_VERSION, CRD_KIND, crd)) if isinstance(crd, str) else crd
    spec = installed["spec"]
    from ktest.crd_versions.etcd_reads import custom_resource_key

    reader = etcd_reader(etcd)
    found: dict[str, list[str]] = {}
    prefix = custom_resource_key(spec["group"], spec["names"]["plural"], None)
    for key, value in reader.scan(prefix):
        try:
            api_version = str(json.loads(value).get("apiVersion", "?"))
        except ValueError:
            api_version = "(not JSON)"
        found.setdefault(api_version.rpartition("/")[2], []).append(key.removeprefix(prefix))
    return found


def evolve_crd(
    cluster: ClusterClient,
    source: ManifestSource,
    *,
    etcd: EtcdAccess | None = None,
    allow_schema_change_without_conversion: bool = False,
    timeout: float = 60.0,
) -> str:
    """Install a new revision of a CRD (one CRD in ``source``) once it is a valid evolution of
    the installed one; return the CRD's name once the revision is served with its storage version.

    Refused with a :class:`~ktest.errors.CRDError` naming the fix, nothing changed:

    - a version listed in the installed CRD's ``status.storedVersions`` removed from
      ``spec.versions``, or no longer served: objects may still be stored in it. The error names
      them (read from etcd with ``etcd=``, the control plane; else the kind's objects, since the
      API cannot tell in which version each is stored). Fix: :func:`migrate_storage` first;
    - served versions with different schemas under conversion strategy ``None`` (the API
      server only rewrites ``apiVersion``, and prunes what the other schema lacks). Fix: a
      conversion webhook (e.g. :class:`ktest.webhooks.Webhooks` with a ``Handlers.convert``
      handler, installed before the revision), or ``allow_schema_change_without_conversion=True``
      (a warning instead);
    - what :func:`~ktest.cluster.crds.install_crds` refuses (shape; exactly one storage version).

    A CRD not installed yet is simply installed.
    """
    manifests = load_as(source, CRDError, "cannot read the CRD revision")
    if len(manifests) != 1:
        raise CRDError(
            f"evolve_crd takes one CustomResourceDefinition, got {len(manifests)} documents "
            f"({', '.join(m.origin for m in manifests) or 'none'}); evolve one CRD at a time"
        )
    manifest = manifests[0]
    pending = _check_is_crd(manifest)
    installed = cluster.get_or_none((CRD_API_VERSION, CRD_KIND, pending.name))
    if installed is None:
        return install_crds(cluster, manifest.obj, timeout=timeout)[0]
    revision = manifest.obj
    where = f"{manifest.origin}: CustomResourceDefinition {pending.name}"
    _check_stored_versions(cluster, where, installed, revision, etcd)
    _check_conversion(where, installed, revision, allow_schema_change_without_conversion)
    deadline = time.monotonic() + timeout
    install_crds(cluster, revision, timeout=timeout)
    _wait_storage_version(cluster, revision, deadline, timeout, where)
    return pending.name


def migrate_storage(
    cluster: ClusterClient,
    crd_or_kind: str | tuple[str, str],
    *,
    etcd: EtcdAccess | None = None,
    prune: bool = True,
) -> StorageMigration:
    """Re-store every object of a CRD in its storage version, then prune ``status.storedVersions``.

    ``crd_or_kind``: the CRD's name (``backups.example.com``) or a kind (``("example.com/v1",
    "Backup")``, any version). Each object gets a no-op update (PUT of what was read, at the
    storage version, retried on conflicts): the API server writes it back encoded in the
    storage version. With ``etcd=`` (the control plane), every object is then read back from
    etcd, and the pruning is refused (a ``ClusterError`` naming the objects) if one is still
    stored in another version. ``prune=False`` leaves ``status.storedVersions`` alone.
    """
    crd = _find_crd(cluster, crd_or_kind)
    name = crd["metadata"]["name"]
    spec = crd["spec"]
    storage = next(v["name"] for v in spec["versions"] if v.get("storage"))
    api_version, kind = f"{spec['group']}/{storage}", spec["names"]["kind"]
    before = list((crd.get("status") or {}).get("storedVersions") or ())
    rewritten: list[str] = []
    gone: list[str] = []
    for item in cluster.list(api_version, kind):
        (rewritten if _restore(cluster, item) else gone).append(_label(item))
    if etcd is not None:
        elsewhere = {
            version: keys
            for version, keys in stored_versions(cluster, crd, etcd).items()
            if version != storage
        }
        if elsewhere:
            listed = "; ".join(f"{version}: {', '.join(keys)}" for version, keys in sorted(elsewhere.items()))
            raise ClusterError(
                f"CustomResourceDefinition {name}: after re-storing {len(rewritten)} object(s), etcd still "
                f"holds objects in another version than the storage version {storage} ({listed}); "
                "status.storedVersions was not pruned. Were they created meanwhile by a client of an "
                "old version, or did the API server not switch to the new storage version yet? Run "
                "migrate_storage again."
            )
    after = before
    if prune and before != [storage]:
        answer = cluster.patch(
            (CRD_API_VERSION, CRD_KIND, name),
            {"status": {"storedVersions": [storage]}},
            subresource="status",
            field_manager=MIGRATION_FIELD_MANAGER,
        )
        after = list((answer.get("status") or {}).get("storedVersions") or ())
    return StorageMigration(name, storage, rewritten, gone, before, after, checked_in_etcd=etcd is not None)


def storage_version_hash(group: str, version: str, kind: str) -> str:
    """The ``storageVersionHash`` discovery shows for a resource stored as ``group/version``
    ``kind`` (the API server's: base64 of the first 8 bytes of sha256("group/version/kind"))."""
    digest = hashlib.sha256(f"{group}/{version}/{kind}".encode()).digest()
    return base64.b64encode(digest[:8]).decode()


# ------------------------------------------------------------------ checks


def _check_stored_versions(
    cluster: ClusterClient,
    where: str,
    installed: Mapping[str, Any],
    revision: Mapping[str, Any],
    etcd: EtcdAccess | None,
) -> None:
    stored = list((installed.get("status") or {}).get("storedVersions") or ())
    versions = {v["name"]: v for v in revision["spec"]["versions"]}
    problems = []
    for version in stored:
        if version not in versions:
            problems.append((version, f"removes version {version}"))
        elif versions[version].get("served") is not True:
            problems.append((version, f"stops serving version {version}"))
    if not problems:
        return
    storage = next(v["name"] for v in revision["spec"]["versions"] if v.get("storage"))
    objects = _objects_in(cluster, installed, etcd)
    lines = []
    for version, change in problems:
        said = f"it {change}, which status.storedVersions {stored} still lists"
        if etcd is not None and objects is not None:
            held = objects.get(version, [])
            said += (
                f"; etcd holds {len(held)} object(s) stored in {version}: {_names(held)}"
                if held
                else f" (etcd holds no object stored in {version}: only the pruning is missing)"
            )
        elif objects is not None:
            said += (
                "; objects of the kind that may be stored in it (the API cannot tell which; "
                f"pass etcd= to know): {_names(objects.get('*', []))}"
            )
        lines.append(said)
    raise CRDError(
        f"{where}: not a valid evolution of the installed revision: " + "; ".join(lines) + ". "
        f"Nothing was changed. Fix: re-store every object in the storage version and prune "
        f"status.storedVersions (ktest.cluster.migrate_storage(cluster, {installed['metadata']['name']!r}) "
        f"with the installed revision, whose storage version must already be {storage}), then install "
        "this revision."
    )


def _objects_in(
    cluster: ClusterClient, installed: Mapping[str, Any], etcd: EtcdAccess | None
) -> dict[str, list[str]] | None:
    """Objects by stored version (etcd), or all of the kind under "*" (the API); None if unknown."""
    if etcd is not None:
        return stored_versions(cluster, installed, etcd)
    spec = installed["spec"]
    served = [v["name"] for v in spec["versions"] if v.get("served")]
    if not served:
        return None
    try:
        items = cluster.list(f"{spec['group']}/{served[0]}", spec["names"]["kind"])
    except (ApiError, ClusterError):
        return None
    return {"*": [_label(item) for item in items]}


def _check_conversion(
    where: str, installed: Mapping[str, Any], revision: Mapping[str, Any], allowed: bool
) -> None:
    conversion = revision["spec"].get("conversion") or installed["spec"].get("conversion") or {}
    if conversion.get("strategy", "None") != "None":
        return
    schemas = {
        v["name"]: json.dumps((v.get("schema") or {}).get("openAPIV3Schema"), sort_keys=True)
        for v in revision["spec"]["versions"]
        if v.get("served")
    }
    if len(set(schemas.values())) <= 1:
        return
    message = (
        f"{where}: served versions {', '.join(schemas)} have different schemas, but the conversion "
        "strategy is None: the API server converts between them by rewriting apiVersion only, and "
        "prunes the fields the other schema lacks (data is lost). Fix: serve a conversion webhook "
        "(spec.conversion.strategy: Webhook; with ktest, Webhooks(cluster, handlers=...) with a "
        "Handlers.convert handler, started before the revision is installed), or give the versions "
        "one schema"
    )
    if not allowed:
        raise CRDError(message + "; nothing was changed.")
    warnings.warn(SchemaChangeWithoutConversionWarning(message), stacklevel=3)


def _wait_storage_version(
    cluster: ClusterClient, revision: Mapping[str, Any], deadline: float, timeout: float, where: str
) -> None:
    """Wait until discovery shows the revision's storage version for every served version: the
    API server switched its handler for the kind (objects written from now on use it)."""
    spec = revision["spec"]
    group, kind, plural = spec["group"], spec["names"]["kind"], spec["names"]["plural"]
    storage = next(v["name"] for v in spec["versions"] if v.get("storage"))
    expected = storage_version_hash(group, storage, kind)
    served = [v["name"] for v in spec["versions"] if v.get("served")]
    seen: dict[str, str | None] = {}
    while True:
        for version in served:
            try:
                resources = cluster.rest.request("GET", f"/apis/{group}/{version}").get("resources") or ()
            except ApiError as error:
                if error.status not in (404, 503):  # discovery of a changing group can lag for a moment
                    raise
                resources = ()
            seen[version] = next(
                (r.get("storageVersionHash") for r in resources if r.get("name") == plural), None
            )
        if all(value == expected for value in seen.values()):
            return
        if time.monotonic() >= deadline:
            raise CRDError(
                f"{where}: the API server did not switch to storage version {storage} within "
                f"{timeout:.0f}s (discovery's storageVersionHash per version: {seen}, expected {expected})"
            )
        time.sleep(_POLL)


# ------------------------------------------------------------------ helpers


def _find_crd(cluster: ClusterClient, crd_or_kind: str | tuple[str, str]) -> dict[str, Any]:
    if isinstance(crd_or_kind, str):
        found = cluster.get_or_none((CRD_API_VERSION, CRD_KIND, crd_or_kind))
        if found is None:
            raise ClusterError(
                f"no CustomResourceDefinition {crd_or_kind} is installed (give its name, "
                "<plural>.<group>, or a kind such as ('example.com/v1', 'Backup'))"
            )
        return found
    api_version, kind = crd_or_kind
    group = api_version.rpartition("/")[0]
    for crd in cluster.list(CRD_API_VERSION, CRD_KIND):
        if crd["spec"]["group"] == group and crd["spec"]["names"]["kind"] == kind:
            return crd
    raise ClusterError(f"no CustomResourceDefinition defines kind {kind} in group {group!r}")


def _restore(cluster: ClusterClient, item: dict[str, Any]) -> bool:
    """A no-op update of ``item`` (re-read on conflict); False when it was deleted meanwhile."""
    ref = (item["apiVersion"], item["kind"], item["metadata"]["name"], item["metadata"].get("namespace"))
    current: dict[str, Any] | None = item
    for _ in range(_CONFLICT_RETRIES):
        if current is None:
            return False
        try:
            cluster.update(current, field_manager=MIGRATION_FIELD_MANAGER)
            return True
        except ApiError as error:
            if error.status == 404:
                return False
            if error.status != 409:
                raise ClusterError(
                    f"migrate_storage: the API server refused to re-store {_label(item)} "
                    f"({item['apiVersion']} {item['kind']}): {error.message}"
                ) from None
        current = cluster.get_or_none(ref)
    raise ClusterError(
        f"migrate_storage: {_label(item)} ({item['kind']}) changed under every one of "
        f"{_CONFLICT_RETRIES} attempts to re-store it (409 Conflict); is something rewriting it in a loop?"
    )


def _label(obj: Mapping[str, Any]) -> str:
    metadata = obj["metadata"]
    namespace = metadata.get("namespace")
    return f"{namespace}/{metadata['name']}" if namespace else str(metadata["name"])


def _names(names: list[str], limit: int = 10) -> str:
    if not names:
        return "none"
    shown = ", ".join(names[:limit])
    return shown + (f" and {len(names) - limit} more" if len(names) > limit else "")
