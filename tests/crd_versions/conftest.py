"""CRD version evolution tests: each test evolves a CRD of its own (CRDs are cluster-wide), on
the session's control plane (``plane``: ktest owns its etcd, so tests read what etcd stores)."""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from fixtures.operators.backup.crd import GROUP, backup, backup_crd
from ktest.cluster import Cluster


@dataclass(frozen=True)
class Backups:
    """One test's Backup kind: its CRD's revisions and objects."""

    kind: str
    namespace: str

    @property
    def api_version(self) -> str:
        return f"{GROUP}/v1alpha1"

    @property
    def crd_name(self) -> str:
        return f"{self.kind.lower()}s.{GROUP}"

    def crd(self, revision: int) -> dict[str, Any]:
        return backup_crd(revision, kind=self.kind)

    def obj(self, name: str, **spec: Any) -> dict[str, Any]:
        return backup(name, self.namespace, kind=self.kind, **spec)

    def ref(self, name: str, version: str = "v1alpha1") -> tuple[str, str, str, str]:
        return (f"{GROUP}/{version}", self.kind, name, self.namespace)


@pytest.fixture
def backups(admin: Cluster, ns: str) -> Iterator[Backups]:
    """A Backup kind of the test's own, revision 1 (v1alpha1) installed; its CRD deleted after."""
    kinds = Backups(f"Backup{secrets.token_hex(3)}", ns)
    admin.install_crds(kinds.crd(1))
    yield kinds
    admin.delete(
        ("apiextensions.k8s.io/v1", "CustomResourceDefinition", kinds.crd_name), wait=True, missing_ok=True
    )
