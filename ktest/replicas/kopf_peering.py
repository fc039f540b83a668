"""What kopf's peering needs in the cluster, as kopf's docs deploy it: the KopfPeering and
ClusterKopfPeering CRDs (group kopf.dev) and one peering object where the operator keeps alive."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ktest.cluster import Cluster

GROUP = "kopf.dev"


def _crd(kind: str, scope: str) -> dict[str, Any]:
    plural = kind.lower() + "s"
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{GROUP}"},
        "spec": {
            "scope": scope,
            "group": GROUP,
            "names": {"kind": kind, "plural": plural, "singular": kind.lower()},
            "versions": [{
                "name": "v1",
                "served": True,
                "storage": True,
                "schema": {"openAPIV3Schema": {
                    "type": "object",
                    "properties": {
                        "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
                    },
                }},
            }],
        },
    }


CRDS = [_crd("ClusterKopfPeering", "Cluster"), _crd("KopfPeering", "Namespaced")]
"""kopf's two peering CRDs."""


def kopf_peering(cluster: Cluster, name: str, *, namespaces: Sequence[str] | None = None) -> None:
    """Install kopf's peering CRDs (if missing) and the peering object ``name``: a KopfPeering in
    each of ``namespaces`` (the operator serves those), else one ClusterKopfPeering. Then
    ``run_kopf(..., peering=name)`` keeps alive there."""
    if isinstance(namespaces, str):
        raise ValueError(f"kopf_peering: namespaces must be a list such as [{namespaces!r}], not a string.")
    cluster.install_crds(CRDS)
    if namespaces is None:
        cluster.apply({"apiVersion": f"{GROUP}/v1", "kind": "ClusterKopfPeering", "metadata": {"name": name}})
        return
    for namespace in namespaces:
        metadata = {"name": name, "namespace": namespace}
        cluster.apply({"apiVersion": f"{GROUP}/v1", "kind": "KopfPeering", "metadata": metadata})
