"""``ClusterClient``: the part of :class:`ktest.cluster.Cluster` that the CRD and namespace
helpers use, as a protocol, so that they depend on what they call and not on ``cluster.py``
(which imports them: no import circle)."""

from __future__ import annotations

import builtins
from collections.abc import Callable
from typing import Any, Protocol

from ktest.cluster.discovery import Discovery, ResourceInfo
from ktest.cluster.manifests import ManifestSource
from ktest.cluster.refs import RefLike
from ktest.cluster.rest import Rest


class ClusterClient(Protocol):
    """Reads and writes of one identity on one API server (implemented by ``Cluster``)."""

    name: str
    rest: Rest
    discovery: Discovery
    on_crds_installed: Callable[[builtins.list[str]], None] | None

    @property
    def namespace_controller_available(self) -> bool: ...

    def info(self, api_version: str, kind: str) -> ResourceInfo: ...

    def get(self, target: RefLike, *, namespace: str | None = None) -> dict[str, Any]: ...

    def get_or_none(self, target: RefLike, *, namespace: str | None = None) -> dict[str, Any] | None: ...

    def exists(self, target: RefLike, *, namespace: str | None = None) -> bool: ...

    def list(
        self,
        api_version: str,
        kind: str,
        namespace: str | None = None,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
    ) -> builtins.list[dict[str, Any]]: ...

    def apply(
        self,
        source: ManifestSource,
        *,
        namespace: str | None = None,
        force: bool = True,
        subresource: str | None = None,
        field_manager: str | None = None,
    ) -> Any: ...

    def create(
        self,
        source: ManifestSource,
        *,
        namespace: str | None = None,
        subresource: str | None = None,
        field_manager: str | None = None,
    ) -> Any: ...

    def patch(
        self,
        target: RefLike,
        patch: Any,
        *,
        type: str = "merge",
        subresource: str | None = None,
        namespace: str | None = None,
        field_manager: str | None = None,
    ) -> dict[str, Any]: ...

    def delete(
        self,
        target: RefLike,
        *,
        namespace: str | None = None,
        propagation: str | None = None,
        grace_period: int | None = None,
        missing_ok: bool = False,
        wait: bool = False,
        timeout: float = 60.0,
    ) -> dict[str, Any] | None: ...


__all__ = ["ClusterClient"]
