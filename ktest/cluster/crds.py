"""Install CustomResourceDefinitions and wait until they are really served.

A CRD's kinds are usable only once the API server accepted its names (``NamesAccepted``),
established it and serves each version through discovery; tests that start earlier fail with
confusing 404s, so installation waits for all three. Every CRD is checked before the first is sent
(its shape: the ``apiextensions.k8s.io/v1`` fields ktest and the API server rely on; and its size),
so a mistake in the last file installs nothing; errors name file, document, field and line.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NoReturn

from ktest.cluster.manifests import FieldPath, Manifest, ManifestSource, load_as
from ktest.cluster.rest import MAX_REQUEST_BODY_BYTES, size_text
from ktest.errors import CRDError
from ktest.errors.api import ApiError

if TYPE_CHECKING:
    from ktest.cluster.client import ClusterClient

CRD_API_VERSION = "apiextensions.k8s.io/v1"
CRD_KIND = "CustomResourceDefinition"
SCOPES = ("Namespaced", "Cluster")
_POLL = 0.05


@dataclass(frozen=True)
class _Pending:
    manifest: Manifest
    name: str
    kind: str
    group_versions: tuple[str, ...]


def install_crds(cluster: ClusterClient, *sources: ManifestSource, timeout: float = 60.0) -> list[str]:
    """Create or update every CRD in ``sources``; wait until established and served.

    Returns the CRD names. Every CRD is checked first (shape and size; see the module's
    docstring), so a :class:`~ktest.errors.CRDError` about one installs none. Errors name
    the file, the document (its index and line), the CRD, and the field with its line.
    """
    manifests = [m for source in sources for m in load_as(source, CRDError, "cannot read CRDs")]
    pending = [_check_is_crd(m) for m in manifests]
    new = [crd.name for crd in pending if not cluster.exists((CRD_API_VERSION, CRD_KIND, crd.name))]
    for crd in pending:
        try:
            cluster.apply(crd.manifest.obj)
        except ApiError as error:
            raise CRDError(
                f"{crd.manifest.origin}: the API server rejected CustomResourceDefinition "
                f"{crd.name}: {error.message}{_size_note(crd.manifest, error)}"
            ) from None
    deadline = time.monotonic() + timeout
    for crd in pending:
        _wait_served(cluster, crd, deadline, timeout)
    cluster.discovery.invalidate()
    if new and cluster.on_crds_installed is not None:
        cluster.on_crds_installed(new)
    return [crd.name for crd in pending]


def _check_is_crd(manifest: Manifest) -> _Pending:
    """The CRD in ``manifest`` checked for shape and size (CRDError naming the field and its line)."""
    obj = manifest.obj
    if obj.get("apiVersion") != CRD_API_VERSION or obj.get("kind") != CRD_KIND:
        raise CRDError(
            f"{manifest.origin}: {manifest.ref_text} ({obj.get('apiVersion')}) is not a "
            f"{CRD_KIND} ({CRD_API_VERSION}); CRD paths must hold only CRDs "
            "(install other objects with cluster.apply)"
        )
    shape = _Shape(manifest)
    metadata = shape.mapping(obj, ("metadata",), "the CRD's name")
    name = shape.string(
        metadata, ("metadata", "name"), "the CRD's name, <plural>.<group> (generateName is not allowed)"
    )
    spec = shape.mapping(obj, ("spec",), "group, names, scope and versions")
    group = shape.string(spec, ("spec", "group"), "the API group of its kinds, e.g. example.com")
    names = shape.mapping(spec, ("spec", "names"), "plural and kind, e.g. {plural: widgets, kind: Widget}")
    plural = shape.string(names, ("spec", "names", "plural"), "the resource name, e.g. widgets")
    kind = shape.string(names, ("spec", "names", "kind"), "the kind, e.g. Widget")
    for optional in ("singular", "listKind"):
        shape.string(names, ("spec", "names", optional), "a name", required=False)
    for listed in ("shortNames", "categories"):
        shape.strings(names, ("spec", "names", listed))
    if name != f"{plural}.{group}":
        shape.fail(
            ("metadata", "name"),
            f"is {name!r}, but a CustomResourceDefinition must be named <spec.names.plural>.<spec.group>",
            f"name it {plural}.{group}",
        )
    scope = shape.string(spec, ("spec", "scope"), f"one of {', '.join(SCOPES)}")
    if scope not in SCOPES:
        shape.fail(("spec", "scope"), f"is {scope!r}", f"use one of {', '.join(SCOPES)}")
    shape.boolean(spec, ("spec", "preserveUnknownFields"))
    conversion = shape.mapping(spec, ("spec", "conversion"), "its strategy", required=False)
    if conversion is not None:
        shape.string(conversion, ("spec", "conversion", "strategy"), "None or Webhook", required=False)
        shape.mapping(conversion, ("spec", "conversion", "webhook"), "clientConfig", required=False)
    versions = _check_versions(shape, spec)
    _check_size(manifest, name)
    served = tuple(f"{group}/{version['name']}" for version in versions if version.get("served") is True)
    return _Pending(manifest, name, kind, served)


def _check_versions(shape: _Shape, spec: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    path: FieldPath = ("spec", "versions")
    versions = spec.get("versions")
    if not isinstance(versions, list) or not versions:
        found = "is missing" if versions is None else f"is {_described(versions)}"
        shape.fail(
            path,
            f"{found}, not a non-empty list",
            "list each version, e.g. [{name: v1, served: true, storage: true, schema: ...}]",
        )
    checked: list[Mapping[str, Any]] = []
    seen: dict[str, int] = {}
    for index, version in enumerate(versions):
        at: FieldPath = (*path, index)
        if not isinstance(version, Mapping):
            shape.fail(
                at, f"is {_described(version)}, not a mapping", "give name, served, storage and schema"
            )
        name = shape.string(version, (*at, "name"), "the version's name, e.g. v1")
        if name in seen:
            shape.fail(
                (*at, "name"),
                f"repeats {name!r} (also spec.versions[{seen[name]}])",
                "name each version once",
            )
        seen[name] = index
        for flag in ("served", "storage", "deprecated"):
            shape.boolean(version, (*at, flag))
        shape.string(version, (*at, "deprecationWarning"), "a warning", required=False)
        schema = shape.mapping(version, (*at, "schema"), "openAPIV3Schema")
        shape.mapping(
            schema, (*at, "schema", "openAPIV3Schema"), "the version's structural schema, e.g. {type: object}"
        )
        subresources = shape.mapping(version, (*at, "subresources"), "status and scale", required=False)
        if subresources is not None:
            shape.mapping(subresources, (*at, "subresources", "status"), "{}", required=False)
            scale = shape.mapping(
                subresources, (*at, "subresources", "scale"), "the replica paths", required=False
            )
            if scale is not None:
                for field in ("specReplicasPath", "statusReplicasPath"):
                    shape.string(
                        scale, (*at, "subresources", "scale", field), "a JSON path such as .spec.replicas"
                    )
                shape.string(
                    scale, (*at, "subresources", "scale", "labelSelectorPath"), "a path", required=False
                )
        columns = version.get("additionalPrinterColumns")
        if columns is not None:
            if not isinstance(columns, list):
                shape.fail(
                    (*at, "additionalPrinterColumns"),
                    f"is {_described(columns)}, not a list",
                    "list the columns",
                )
            for position, column in enumerate(columns):
                column_at: FieldPath = (*at, "additionalPrinterColumns", position)
                if not isinstance(column, Mapping):
                    shape.fail(
                        column_at, f"is {_described(column)}, not a mapping", "give name, type and jsonPath"
                    )
                for field in ("name", "type", "jsonPath"):
                    shape.string(column, (*column_at, field), f"the column's {field}")
        checked.append(version)
    storage = [str(version["name"]) for version in checked if version.get("storage") is True]
    if len(storage) != 1:
        found = "none is" if not storage else f"{len(storage)} are ({', '.join(storage)})"
        shape.fail(
            path, f"must mark exactly one version storage: true; {found}", "set storage: true on one version"
        )
    return checked


def _check_size(manifest: Manifest, name: str) -> None:
    size = len(json.dumps(manifest.obj).encode())
    if size > MAX_REQUEST_BODY_BYTES:
        raise CRDError(
            f"{manifest.origin}: CustomResourceDefinition {name} is {size_text(size)} as JSON, over the "
            f"API server's limit of {size_text(MAX_REQUEST_BODY_BYTES)} for a request body (and etcd stores "
            "objects of at most 1.5 MiB): it cannot be installed. Shorten its descriptions "
            "(controller-gen: crd:maxDescLen=0) or split the schema; nothing was installed."
        )


def _size_note(manifest: Manifest, error: ApiError) -> str:
    """Why a rejection that is about size happened: the storage limits below the request limit."""
    text = error.message.lower()
    if error.status != 413 and "larger than max" not in text and "too large" not in text:
        return ""
    size = len(json.dumps(manifest.obj).encode())
    return (
        f" (the CRD is {size_text(size)} as JSON: the API server accepts request bodies up to 3 MiB, "
        "but stores objects through etcd, which takes at most 1.5 MiB by default (--max-request-bytes) "
        "and is sent at most 2 MiB by the API server. Shorten its descriptions "
        "(controller-gen: crd:maxDescLen=0) or split the schema)"
    )


class _Shape:
    """Checks one CRD's fields; each failure is a CRDError naming the file, document, field and line."""

    def __init__(self, manifest: Manifest) -> None:
        self.manifest = manifest
        metadata = manifest.obj.get("metadata")
        name = metadata.get("name") if isinstance(metadata, Mapping) else None
        self.title = f"CustomResourceDefinition {name}" if isinstance(name, str) and name else CRD_KIND

    def fail(self, path: FieldPath, problem: str, fix: str) -> NoReturn:
        line = self.manifest.line_of(path)
        where = f" (line {line})" if line is not None else ""
        raise CRDError(f"{self.manifest.origin}: {self.title}: {_field_text(path)}{where} {problem}; {fix}.")

    def mapping(
        self, parent: Mapping[str, Any], path: FieldPath, holds: str, *, required: bool = True
    ) -> Any:
        value = parent.get(str(path[-1]))
        if value is None and not required:
            return None
        if not isinstance(value, Mapping):
            found = "is missing" if value is None else f"is {_described(value)}"
            self.fail(path, f"{found}, not a mapping", f"give a mapping holding {holds}")
        return value

    def string(self, parent: Mapping[str, Any], path: FieldPath, holds: str, *, required: bool = True) -> Any:
        value = parent.get(str(path[-1]))
        if value is None and not required:
            return None
        if not isinstance(value, str) or not value:
            found = "is missing" if value is None else f"is {_described(value)}"
            self.fail(path, f"{found}, not a non-empty string", f"give {holds}")
        return value

    def strings(self, parent: Mapping[str, Any], path: FieldPath) -> None:
        value = parent.get(str(path[-1]))
        if value is not None and not (isinstance(value, list) and all(isinstance(v, str) for v in value)):
            self.fail(path, f"is {_described(value)}, not a list of strings", "list names, e.g. [wd]")

    def boolean(self, parent: Mapping[str, Any], path: FieldPath) -> None:
        value = parent.get(str(path[-1]))
        if value is not None and not isinstance(value, bool):
            self.fail(path, f"is {_described(value)}, not a boolean", "write true or false, unquoted")


def _field_text(path: FieldPath) -> str:
    text = ""
    for step in path:
        text += f"[{step}]" if isinstance(step, int) else (f".{step}" if text else step)
    return text


def _described(value: Any) -> str:
    """``value`` for an error message: its type and a short repr."""
    kinds = {
        dict: "a mapping",
        list: "a list",
        str: "a string",
        bool: "a boolean",
        int: "a number",
        float: "a number",
    }
    text = repr(value)
    shown = text if len(text) <= 40 else text[:37] + "..."
    return f"{kinds.get(type(value), type(value).__name__)} ({shown})"


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
    right after the installation would log that as an error. A version a CRD's update adds can
    be in discovery a moment before the API server's handler serves it (404 until then)."""
    for group_version in crd.group_versions:
        path = cluster.info(group_version, crd.kind).path()
        while True:
            try:
                cluster.rest.request("GET", path)
                break
            except ApiError as error:
                if error.status not in (404, 429):
                    raise
                if time.monotonic() >= deadline:
                    raise CRDError(
                        f"{crd.manifest.origin}: CustomResourceDefinition {crd.name}: {group_version} "
                        f"is served but its storage was not ready within {timeout:.0f}s: {error.message}"
                    ) from None
            time.sleep(_POLL)
