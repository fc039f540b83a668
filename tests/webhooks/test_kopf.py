"""A kopf operator's admission handler, served by kopf's own webhook server."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from webhook_helpers import gadget

from ktest.assertions import assert_rejected
from ktest.cluster import Cluster
from ktest.operators import run_kopf

HERE = Path(__file__).parent


def test_kopf_validating_handler(cluster: Cluster, namespace: str, webhooks: Any, gadgets: str) -> None:
    wh = webhooks(HERE / "manifests" / "kopf-gadgets.yaml", start=False)

    def serve_webhooks(settings: Any) -> None:
        settings.admission.server = wh.kopf_server()  # kopf.WebhookServer on ktest's port and certificate

    # kopf logs each denial (kopf.AdmissionError) as an ERROR record; ktest knows it is no failure
    with run_kopf(HERE / "kopf_gadgets.py", cluster, namespaces=[namespace], configure=serve_webhooks):
        wh.start()
        cluster.create(gadget("fine", namespace, color="red"))
        purple = gadget("purple", namespace, color="purple")
        assert_rejected(
            lambda: cluster.create(purple),
            "spec.color 'purple' is not one of red, green, blue",
            status=422,
            webhook="color.gadgets.pyhooks.ktest.dev",
            cluster=cluster,
            obj=purple,
            webhooks=wh,
        )
    assert [(c.served_by.split(" at ")[0], c.allowed) for c in wh.calls] == [
        ("operator", True),
        ("operator", False),
    ]
