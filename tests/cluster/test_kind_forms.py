"""A kind reads one way throughout the Cluster API: ``(apiVersion, kind)``, the first half of the
``(apiVersion, kind, name[, namespace])`` tuple ``get`` takes, or the two strings apart.
Against the real API server."""

from __future__ import annotations

import pytest
from builders import configmap

from ktest.cluster import Cluster


def test_list_takes_the_kind_as_get_takes_the_object(admin: Cluster, ns: str) -> None:
    admin.create(configmap("one", ns))
    admin.create(configmap("two", ns, labels={"pick": "me"}))
    kind = ("v1", "ConfigMap")

    def names(items: list[dict]) -> set[str]:
        return {item["metadata"]["name"] for item in items}

    published = {"kube-root-ca.crt"}  # kube-controller-manager's, in every namespace sooner or later
    assert names(admin.list(kind, ns)) - published == {"one", "two"}
    assert names(admin.list(kind, namespace=ns)) - published == {"one", "two"}
    assert names(admin.list("v1", "ConfigMap", ns)) - published == {"one", "two"}  # the form apart
    assert names(admin.list(kind, ns, label_selector="pick=me")) == {"two"}
    assert ns in names(admin.list(("v1", "Namespace")))  # cluster-scoped, and everywhere by default
    found = admin.list(kind, ns)[0]
    assert admin.get((*kind, found["metadata"]["name"], ns))["metadata"]["uid"] == found["metadata"]["uid"]
    assert (found["apiVersion"], found["kind"]) == kind  # items are usable objects


def test_info_and_resource_take_it_too(admin: Cluster) -> None:
    assert admin.info(("apps/v1", "Deployment")) == admin.info("apps/v1", "Deployment")
    assert admin.info(("apps/v1", "Deployment")).plural == "deployments"
    assert admin.resource(("apps/v1", "Deployment")).name == "deployments"


@pytest.mark.parametrize(
    ("call", "says"),
    [
        (lambda c: c.list(("v1", "ConfigMap"), "ns-a", "ns-b"), "the next argument is the namespace"),
        (lambda c: c.list(("v1", "ConfigMap", "x")), "expected a kind as (apiVersion, kind)"),
        (lambda c: c.list("v1"), "without a kind"),
        (lambda c: c.info(("v1",)), "expected a kind as (apiVersion, kind)"),
    ],
    ids=["namespace-twice", "three-parts", "no-kind", "one-part"],
)
def test_a_kind_given_wrong_says_how_to_write_it(admin: Cluster, call, says: str) -> None:
    with pytest.raises(TypeError) as raised:
        call(admin)
    assert says in str(raised.value)
