"""The cluster handle: clients, object helpers, CRDs (and their version evolution), namespaces, users."""

from ktest.cluster.cluster import FIELD_MANAGER, Cluster, UserIssuer
from ktest.cluster.crd_evolution import StorageMigration, evolve_crd, migrate_storage
from ktest.cluster.manifests import load_manifests
from ktest.cluster.refs import KindRef, ObjectRef, RefLike, as_kind, as_ref

__all__ = [
    "FIELD_MANAGER",
    "Cluster",
    "KindRef",
    "ObjectRef",
    "RefLike",
    "StorageMigration",
    "UserIssuer",
    "as_kind",
    "as_ref",
    "evolve_crd",
    "load_manifests",
    "migrate_storage",
]
