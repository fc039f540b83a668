"""The objects an operator version works on, as they are at one moment: every object of every
resource the version sent a request about (watched, listed, read or written), in the namespaces
it sent them in (a request across all namespaces: the ones the operator serves, else all)."""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ktest.cluster.rest import segment

if TYPE_CHECKING:
    from ktest.cluster import Cluster
    from ktest.proxy.api_request import ApiRequest
    from ktest.proxy.traffic import Call

BOOKKEEPING = frozenset({("", "events"), ("events.k8s.io", "events"), ("coordination.k8s.io", "leases")})
"""Resources an operator writes as it runs whatever it reconciles (its events, its leader
lease): not part of the state an upgrade is judged on."""


@dataclass(frozen=True, order=True)
class ObjectKey:
    """One object: its resource (group, version, plural), namespace and name."""

    group: str
    version: str
    resource: str
    namespace: str | None
    name: str

    def describe(self) -> str:
        resource = f"{self.resource}.{self.group}" if self.group else self.resource
        return f"{resource} {self.namespace}/{self.name}" if self.namespace else f"{resource} {self.name}"


@dataclass(frozen=True, order=True)
class Collection:
    """The objects of one resource in one namespace (None: every namespace, or cluster-scoped)."""

    group: str
    version: str
    resource: str
    namespace: str | None

    def path(self) -> str:
        root = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        if self.namespace is not None:
            root += f"/namespaces/{segment(self.namespace)}"
        return f"{root}/{self.resource}"

    def holds(self, request: ApiRequest) -> bool:
        return (request.group, request.resource) == (self.group, self.resource) and (
            self.namespace is None or request.namespace == self.namespace
        )


def is_bookkeeping(request: ApiRequest) -> bool:
    return (request.group, request.resource) in BOOKKEEPING


def collections_of(calls: Iterable[Call], served: Sequence[str] | None) -> set[Collection]:
    """Where the objects of ``calls`` live; a request across all namespaces stands for the
    namespaces ``served`` (names; globs and None: every namespace)."""
    found: set[Collection] = set()
    names = [namespace for namespace in served or () if not any(ch in namespace for ch in "*?[")]
    narrow = served is not None and len(names) == len(served)
    for call in calls:
        request = call.request
        if not request.resource or request.problem is not None or is_bookkeeping(request):
            continue
        if request.namespace is not None or not narrow:
            found.add(Collection(request.group, request.version, request.resource, request.namespace))
        else:
            found.update(Collection(request.group, request.version, request.resource, ns) for ns in names)
    return _without_covered(found)


def _without_covered(found: set[Collection]) -> set[Collection]:
    """A namespace's collection is left out when the same resource is listed everywhere."""
    everywhere = {(c.group, c.resource) for c in found if c.namespace is None}
    return {c for c in found if c.namespace is None or (c.group, c.resource) not in everywhere}


def take(cluster: Cluster, collections: Iterable[Collection],
         served: Sequence[str] | None = None) -> dict[ObjectKey, dict[str, Any]]:
    """Every object of ``collections`` now, read with ``cluster`` (the test's own credentials);
    objects outside the namespaces ``served`` (names or globs) are left out."""
    from ktest.errors import ClusterError

    objects: dict[ObjectKey, dict[str, Any]] = {}
    for collection in sorted(collections):
        try:
            listed = cluster.rest.request("GET", collection.path())
        except ClusterError:
            continue  # a resource no longer served (or never listable): nothing to compare there
        for item in listed.get("items") or []:
            metadata = item.get("metadata") or {}
            namespace = metadata.get("namespace")
            if served is not None and namespace is not None and not any(
                fnmatch.fnmatchcase(namespace, pattern) for pattern in served
            ):
                continue
            key = ObjectKey(collection.group, collection.version, collection.resource, namespace,
                            str(metadata.get("name")))
            objects[key] = item
    return objects
