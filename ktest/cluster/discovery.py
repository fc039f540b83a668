"""Which REST resource serves a kind: plural name, scope, subresources.

Looked up per group-version (one small request), cached, and refreshed on a
miss so that kinds of freshly installed CRDs are found without restarting.
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass

from kubernetes.client.exceptions import ApiException

from ktest.cluster.rest import Rest, segment
from ktest.errors import ClusterError


@dataclass(frozen=True)
class ResourceInfo:
    api_version: str
    kind: str
    plural: str
    namespaced: bool
    subresources: frozenset[str]
    verbs: frozenset[str]

    def path(
        self, namespace: str | None = None, name: str | None = None, subresource: str | None = None
    ) -> str:
        """The REST path of the collection, or of one object (and its subresource)."""
        root = f"/api/{self.api_version}" if "/" not in self.api_version else f"/apis/{self.api_version}"
        if self.namespaced and namespace:
            root += f"/namespaces/{segment(namespace)}"
        root += f"/{self.plural}"
        if name is not None:
            root += f"/{segment(name)}"
            if subresource:
                root += f"/{subresource}"
        return root


class Discovery:
    """Kind -> ResourceInfo for one API server, thread-safe."""

    def __init__(self, rest: Rest) -> None:
        self._rest = rest
        self._lock = threading.Lock()
        self._by_group_version: dict[str, dict[str, ResourceInfo]] = {}

    def info(self, api_version: str, kind: str) -> ResourceInfo:
        found = self._cached(api_version).get(kind)
        if found is None:
            found = self._refresh(api_version).get(kind)
        if found is None:
            served = ", ".join(sorted(self._cached(api_version))) or "nothing"
            raise ClusterError(
                f"the API server does not serve kind {kind} in {api_version} (it serves: {served}). "
                "Is its CustomResourceDefinition installed and established? "
                "Install it with cluster.install_crds(...) or the ktest_crds setting."
            )
        return found

    def served(self, api_version: str, kind: str) -> bool:
        return kind in self._refresh(api_version)

    def group_version_resources(self, api_version: str) -> dict[str, ResourceInfo]:
        return dict(self._refresh(api_version))

    def invalidate(self) -> None:
        with self._lock:
            self._by_group_version.clear()

    def _cached(self, api_version: str) -> dict[str, ResourceInfo]:
        with self._lock:
            cached = self._by_group_version.get(api_version)
        return cached if cached is not None else self._refresh(api_version)

    def _refresh(self, api_version: str) -> dict[str, ResourceInfo]:
        path = f"/api/{api_version}" if "/" not in api_version else f"/apis/{api_version}"
        try:
            listing = self._rest.request("GET", path)
        except ApiException as error:
            if error.status != 404:
                raise
            listing = {"resources": []}
        resources = listing.get("resources") or []
        subresources: dict[str, set[str]] = {}
        for entry in resources:
            parent, _, sub = entry["name"].partition("/")
            if sub:
                subresources.setdefault(parent, set()).add(sub)
        kinds = {
            entry["kind"]: ResourceInfo(
                api_version=api_version,
                kind=entry["kind"],
                plural=entry["name"],
                namespaced=bool(entry.get("namespaced")),
                subresources=frozenset(subresources.get(entry["name"], ())),
                verbs=frozenset(entry.get("verbs") or ()),
            )
            for entry in resources
            if "/" not in entry["name"]
        }
        with self._lock:
            self._by_group_version[api_version] = kinds
        return kinds

    def preferred_api_versions(self) -> list[str]:
        """``v1`` and the preferred version of every group (one request)."""
        groups = self._rest.request("GET", "/apis").get("groups") or []
        preferred = (group.get("preferredVersion") or {} for group in groups)
        return ["v1", *(str(version["groupVersion"]) for version in preferred if version)]

    def namespaced_kinds(self) -> list[ResourceInfo]:
        """Every namespaced kind one can list and delete, in its group's preferred version
        (each group-version's resources come from the cache)."""
        return [
            info
            for version in self.preferred_api_versions()
            for info in self._cached(version).values()
            if info.namespaced and {"list", "delete"} <= info.verbs
        ]

    def all_api_versions(self) -> list[str]:
        """Preferred and non-preferred group versions the server serves."""
        versions = list(self._rest.request("GET", "/api").get("versions") or [])
        for group in self._rest.request("GET", "/apis").get("groups") or []:
            versions.extend(v["groupVersion"] for v in group.get("versions") or [])
        return versions


def is_custom_api_version(api_version: str) -> bool:
    """Whether ``api_version`` belongs to a custom group (not core, not ``*.k8s.io``)."""
    group = api_version.rpartition("/")[0]
    return bool(group) and "." in group and not re.search(r"(^|\.)k8s\.io$", group)
