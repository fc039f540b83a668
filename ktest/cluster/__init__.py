"""The cluster handle: clients, object helpers, CRDs, namespaces, users.

``evolve_crd``, ``migrate_storage`` and ``StorageMigration`` belong to the CRD-versions add-on
(:mod:`ktest.crd_versions`) and are offered here too. Names are imported on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ktest.lazy import lazy_attributes

if TYPE_CHECKING:
    from ktest.cluster.cluster import FIELD_MANAGER as FIELD_MANAGER
    from ktest.cluster.cluster import Cluster as Cluster
    from ktest.cluster.cluster import UserIssuer as UserIssuer
    from ktest.cluster.manifests import load_manifests as load_manifests
    from ktest.cluster.refs import KindRef as KindRef
    from ktest.cluster.refs import ObjectRef as ObjectRef
    from ktest.cluster.refs import RefLike as RefLike
    from ktest.cluster.refs import as_kind as as_kind
    from ktest.cluster.refs import as_ref as as_ref
    from ktest.crd_versions.evolution import StorageMigration as StorageMigration
    from ktest.crd_versions.evolution import evolve_crd as evolve_crd
    from ktest.crd_versions.evolution import migrate_storage as migrate_storage

_EXPORTS = {
    **{name: "ktest.cluster.cluster" for name in ("FIELD_MANAGER", "Cluster", "UserIssuer")},
    "load_manifests": "ktest.cluster.manifests",
    **{name: "ktest.cluster.refs" for name in ("KindRef", "ObjectRef", "RefLike", "as_kind", "as_ref")},
    **{
        name: "ktest.crd_versions.evolution" for name in ("StorageMigration", "evolve_crd", "migrate_storage")
    },
}

__all__ = sorted(_EXPORTS)

if not TYPE_CHECKING:  # hidden from type checkers, so that a misspelt name is an error, not Any
    __getattr__, __dir__ = lazy_attributes(__name__, _EXPORTS, globals())
