"""One test's Backup kind (tests/crd_versions): its CRD's revisions and objects, for the tests
and their conftest.py (a module of its own name: ``tests`` and ``examples`` each have a conftest)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from fixtures.operators.backup.crd import GROUP, backup, backup_crd


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
