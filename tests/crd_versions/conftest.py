"""CRD version evolution tests: each test evolves a CRD of its own (CRDs are cluster-wide), on
the session's control plane (``plane``: ktest owns its etcd, so tests read what etcd stores)."""

from __future__ import annotations

import secrets
from collections.abc import Iterator

import pytest
from crd_backups import Backups

from ktest.cluster import Cluster


@pytest.fixture
def backups(admin: Cluster, ns: str) -> Iterator[Backups]:
    """A Backup kind of the test's own, revision 1 (v1alpha1) installed; its CRD deleted after."""
    kinds = Backups(f"Backup{secrets.token_hex(3)}", ns)
    admin.install_crds(kinds.crd(1))
    yield kinds
    admin.delete(
        ("apiextensions.k8s.io/v1", "CustomResourceDefinition", kinds.crd_name), wait=True, missing_ok=True
    )
