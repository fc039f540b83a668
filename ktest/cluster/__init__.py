"""The cluster handle: clients, object helpers, CRDs, namespaces, users."""

from ktest.cluster.handle import FIELD_MANAGER, Cluster, UserIssuer
from ktest.cluster.manifests import load_manifests
from ktest.cluster.refs import KindRef, ObjectRef, RefLike, as_kind, as_ref

__all__ = [
    "FIELD_MANAGER",
    "Cluster",
    "KindRef",
    "ObjectRef",
    "RefLike",
    "UserIssuer",
    "as_kind",
    "as_ref",
    "load_manifests",
]
