"""What the API server rejects by itself, from the CRDs' schemas: no operator involved.

Validation at admission (OpenAPI schema, CEL rules) is tested against the real
API server, because only it evaluates the schema: defaults, enums, lengths and
``x-kubernetes-validations`` rules with ``oldSelf``.
"""

from __future__ import annotations

import pytest

from ktest.cluster import Cluster
from ktest.errors.api import ApiError

pytestmark = pytest.mark.usefixtures("crds")


def bucket_claim(**spec: object) -> dict[str, object]:
    return {
        "apiVersion": "storage.example.com/v1alpha1",
        "kind": "BucketClaim",
        "metadata": {"name": "photos"},
        "spec": {"region": "eu-west-1", **spec},
    }


def test_reclaim_policy_defaults_to_delete(cluster: Cluster, namespace: str) -> None:
    claim = cluster.create(bucket_claim(), namespace=namespace)

    assert claim["spec"]["reclaimPolicy"] == "Delete"


def test_the_region_is_immutable(cluster: Cluster, namespace: str) -> None:
    claim = cluster.create(bucket_claim(), namespace=namespace)

    with pytest.raises(ApiError) as rejected:
        cluster.patch(claim, {"spec": {"region": "us-east-1"}})

    assert rejected.value.status == 422
    assert "region is immutable" in rejected.value.message


def test_an_unknown_reclaim_policy_is_rejected(cluster: Cluster, namespace: str) -> None:
    with pytest.raises(ApiError) as rejected:
        cluster.create(bucket_claim(reclaimPolicy="Archive"), namespace=namespace)

    assert rejected.value.status == 422
    assert 'spec.reclaimPolicy: Unsupported value: "Archive"' in rejected.value.message


def test_a_region_name_too_short_is_rejected(cluster: Cluster, namespace: str) -> None:
    with pytest.raises(ApiError) as rejected:
        cluster.create(bucket_claim(region="eu"), namespace=namespace)

    assert rejected.value.status == 422
    assert "spec.region" in rejected.value.message


def test_negative_replicas_are_rejected(cluster: Cluster, namespace: str) -> None:
    web_app = {
        "apiVersion": "platform.example.com/v1alpha1",
        "kind": "WebApp",
        "metadata": {"name": "shop"},
        "spec": {"image": "nginx:1.27", "replicas": -1},
    }

    with pytest.raises(ApiError) as rejected:
        cluster.create(web_app, namespace=namespace)

    assert rejected.value.status == 422
    assert "spec.replicas" in rejected.value.message
