"""Webhooks on kind: the API server runs in a node container, so ktest serves on the kind
network's gateway, with that address in the certificate (examples/test_webhooks.py runs the
Go manager there too)."""

from __future__ import annotations

import ipaddress
from typing import Any

from cryptography import x509
from webhook_handlers import GADGETS_CRD, gadget_conversion

from ktest.assertions import assert_converts, assert_rejected
from ktest.backends.kind.handle import KindHandle
from ktest.backends.kind.network import host_gateway
from ktest.cluster import Cluster
from ktest.webhooks import AdmissionRequest, Denied


def test_python_webhooks_are_served_on_the_kind_gateway(
    cluster: Cluster, namespace: str, kind: KindHandle, webhooks: Any
) -> None:
    cluster.install_crds(GADGETS_CRD)
    handlers = gadget_conversion()

    @handlers.validate("pyhooks.ktest.dev", "v1", "gadgets")
    def known_color(request: AdmissionRequest) -> None:
        if request.object["spec"].get("color") == "purple":
            raise Denied("spec.color: purple is not for sale")

    wh = webhooks(handlers=handlers)
    gateway = host_gateway(kind.name)
    assert wh.host == gateway == cluster.webhook_host and not ipaddress.ip_address(gateway).is_loopback
    certificate = x509.load_pem_x509_certificate(wh.cert_file.read_bytes())
    addresses = certificate.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert ipaddress.ip_address(gateway) in addresses.get_values_for_type(x509.IPAddress)

    def gadget(name: str, **spec: Any) -> dict[str, Any]:
        return {
            "apiVersion": "pyhooks.ktest.dev/v1",
            "kind": "Gadget",
            "metadata": {"name": name, "namespace": namespace},
            "spec": spec,
        }

    purple = gadget("purple", color="purple")
    assert_rejected(lambda: cluster.create(purple), "purple is not for sale", cluster=cluster, obj=purple)
    created = cluster.create(gadget("g", size="5Gi", color="red"))
    assert_converts(cluster, created, to="v2", expect={"spec": {"sizeGi": 5, "color": "red"}})
