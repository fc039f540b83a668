"""What the embedded control plane's kube-apiserver presents to webhooks, so that only the
API server may call ktest's webhook front server.

ktest's admission configuration (ktest.controlplane.admission) gives the API server a
client certificate for admission webhooks; the apiextensions server calls CRD
conversion webhooks without one (it builds their client from an empty kubeconfig).
The front server is built on both facts (admission calls behind the certificate,
conversion calls on a listener of their own), so this test records what a plain
server sees: if a Kubernetes release changes either, it says so here."""

from __future__ import annotations

import json
import secrets
import ssl
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from threading import Thread
from typing import Any

import pytest
import yaml
from webhook_handlers import GADGETS_CRD

from ktest.cluster import Cluster
from ktest.controlplane.admission import WEBHOOK_CLIENT_USER
from ktest.wait import eventually
from ktest.webhooks.tls import WebhookTLS


class _Recorder(ThreadingHTTPServer):
    """Answers every admission review with 'allowed' and converts by relabelling; records
    (review kind, the client certificate's common name or None) for each call."""

    daemon_threads = True

    def __init__(self, context: ssl.SSLContext) -> None:
        super().__init__(("127.0.0.1", 0), _Answer)
        self.socket = context.wrap_socket(self.socket, server_side=True, do_handshake_on_connect=False)
        self.seen: list[tuple[str, str | None]] = []


class _Answer(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Recorder

    def do_POST(self) -> None:
        review = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        peer = self.connection.getpeercert()  # type: ignore[attr-defined]
        names = dict(item for rdn in peer["subject"] for item in rdn) if peer else {}
        self.server.seen.append((review["kind"], names.get("commonName")))
        request = review["request"]
        response: dict[str, Any] = {"uid": request["uid"], "allowed": True}
        if review["kind"] == "ConversionReview":
            desired = request["desiredAPIVersion"]
            converted = [{**obj, "apiVersion": desired} for obj in request["objects"]]
            response = {"uid": request["uid"], "convertedObjects": converted, "result": {"status": "Success"}}
        answer = json.dumps(
            {"apiVersion": review["apiVersion"], "kind": review["kind"], "response": response}
        )
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer.encode())

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def recorder(cluster: Cluster, tmp_path: Path) -> Iterator[tuple[_Recorder, WebhookTLS]]:
    if cluster.webhook_client_ca is None:
        pytest.skip("only ktest's embedded control plane (bare) is given a webhook client certificate")
    tls = WebhookTLS(tmp_path / "certs", ["127.0.0.1"])
    context = tls.server_context()
    context.verify_mode = ssl.CERT_OPTIONAL  # record whether a certificate came, refuse none
    context.load_verify_locations(cafile=str(cluster.webhook_client_ca))
    server = _Recorder(context)
    thread = Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server, tls
    server.shutdown()
    server.server_close()
    thread.join(timeout=5)


def test_admission_calls_carry_the_certificate_and_conversion_calls_none(
    cluster: Cluster, namespace: str, recorder: tuple[_Recorder, WebhookTLS]
) -> None:
    server, tls = recorder
    url = f"https://127.0.0.1:{server.server_address[1]}"
    token = secrets.token_hex(4)
    client_config = {"caBundle": tls.ca_bundle}
    webhook_configuration = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": f"ktest-client-certificate-{token}"},
        "webhooks": [
            {
                "name": "recorder.ktest.dev",
                "admissionReviewVersions": ["v1"],
                "sideEffects": "None",
                "clientConfig": {**client_config, "url": f"{url}/validate"},
                "objectSelector": {"matchLabels": {"ktest.dev/recorder": token}},
                "rules": [
                    {
                        "apiGroups": [""],
                        "apiVersions": ["v1"],
                        "resources": ["configmaps"],
                        "operations": ["CREATE"],
                    }
                ],
            }
        ],
    }
    crd = yaml.safe_load(GADGETS_CRD.read_text())
    group = f"c{token}.ktest.dev"
    crd["metadata"]["name"] = f"gadgets.{group}"
    crd["spec"]["group"] = group
    crd["spec"]["conversion"] = {
        "strategy": "Webhook",
        "webhook": {
            "conversionReviewVersions": ["v1"],
            "clientConfig": {**client_config, "url": f"{url}/convert"},
        },
    }
    configmap = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "probe", "namespace": namespace, "labels": {"ktest.dev/recorder": token}},
    }
    path = f"/api/v1/namespaces/{namespace}/configmaps"
    gadget = {
        "apiVersion": f"{group}/v1",
        "kind": "Gadget",
        "metadata": {"name": "g", "namespace": namespace},
    }
    cluster.create(webhook_configuration)
    try:
        cluster.install_crds(crd)
        cluster.create(gadget)

        def called(kind: str) -> set[str | None]:
            if kind == "AdmissionReview":
                cluster.rest.request("POST", path, query={"dryRun": "All"}, body=configmap)
            else:
                cluster.get((f"{group}/v2", "Gadget", "g", namespace))
            return {name for seen, name in server.seen if seen == kind}

        admission = eventually(lambda: called("AdmissionReview"), timeout=30, watch=False)
        conversion = eventually(lambda: called("ConversionReview"), timeout=30, watch=False)
    finally:
        cluster.delete(
            (
                "admissionregistration.k8s.io/v1",
                "ValidatingWebhookConfiguration",
                webhook_configuration["metadata"]["name"],
            ),
            missing_ok=True,
        )
        cluster.delete(
            ("apiextensions.k8s.io/v1", "CustomResourceDefinition", crd["metadata"]["name"]), missing_ok=True
        )
    assert admission == {WEBHOOK_CLIENT_USER}, server.seen
    assert conversion == {None}, server.seen
