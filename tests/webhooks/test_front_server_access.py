"""Issue 23.3: only the API server may call ktest's webhook front server.

The front server listens where other local users (bare: 127.0.0.1) or Pods (kind: the
network's gateway) can connect. Every URL ktest writes into a clientConfig carries a
secret path segment, random per webhook set; a request without it is refused, is not
read, and never reaches a handler, the operator or the call log that assertions read."""

from __future__ import annotations

import http.client
import json
import ssl
import urllib.parse
from typing import Any

from builders import configmap

from ktest.cluster import Cluster
from ktest.webhooks import AdmissionRequest, Denied, Handlers, Webhooks


def _guard() -> Handlers:
    handlers = Handlers()

    @handlers.validate("", "v1", "configmaps")
    def no_forbidden_key(request: AdmissionRequest) -> None:
        if "forbidden" in (request.object.get("data") or {}):
            raise Denied("data.forbidden is not allowed")

    return handlers


def _review(namespace: str, name: str) -> bytes:
    obj = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": namespace}}
    return json.dumps(
        {
            "apiVersion": "admission.k8s.io/v1",
            "kind": "AdmissionReview",
            "request": {
                "uid": "00000000-0000-0000-0000-000000000001",
                "kind": {"group": "", "version": "v1", "kind": "ConfigMap"},
                "resource": {"group": "", "version": "v1", "resource": "configmaps"},
                "operation": "CREATE",
                "namespace": namespace,
                "name": name,
                "object": obj,
            },
        }
    ).encode()


def _post(wh: Webhooks, path: str, body: bytes, method: str = "POST") -> tuple[int, bytes]:
    """A TLS client that trusts ktest's CA (as a local user could: the CA certificate is public)."""
    context = ssl.create_default_context(cafile=str(wh.ca_file))
    assert wh.server is not None
    connection = http.client.HTTPSConnection(wh.host, wh.server.port, context=context, timeout=5)
    try:
        connection.request(method, path, body, {"Content-Type": "application/json"})
        response = connection.getresponse()
        return response.status, response.read()
    finally:
        connection.close()


def _installed_urls(cluster: Cluster, wh: Webhooks) -> list[str]:
    urls = []
    for kind, name in wh.installed.configurations:
        config = cluster.get(("admissionregistration.k8s.io/v1", kind, name))
        urls += [hook["clientConfig"]["url"] for hook in config["webhooks"]]
    return urls


def test_requests_without_the_path_secret_are_refused_and_never_logged(
    cluster: Cluster, namespace: str, webhooks: Any
) -> None:
    wh = webhooks(handlers=_guard())
    # Positive control: the API server's call is answered and recorded.
    cluster.create(configmap("real", namespace))
    recorded = len(wh.calls)
    assert recorded >= 1 and all("forged" not in call.object for call in wh.calls)

    body = _review(namespace, "forged")
    # What a local user or a Pod can try: the routes without the secret (their numbering is no
    # secret), the probe route, and a wrong secret in front of every real route.
    paths = [urllib.parse.urlsplit(url).path for url in _installed_urls(cluster, wh)]
    guesses = [f"/hook/{index}" for index in range(4)] + ["/ktest-probe/0", "/", "/hook"]
    guesses += [f"/{'A' * 32}/{path.split('/', 2)[2]}" for path in paths if path.count("/") >= 2]
    answers = {path: _post(wh, path, body) for path in guesses}
    assert {path: status for path, (status, _) in answers.items() if status != 403} == {}
    assert len(wh.calls) == recorded, [call.describe() for call in wh.calls]
    assert all("forged" not in call.object for call in wh.calls)
    status, _ = _post(wh, paths[0], b"", method="GET")
    assert status == 403

    secrets = {path.split("/")[1] for path in paths}
    assert len(secrets) == 1 and len(secrets.pop()) >= 32, paths

    # The API server still gets through with the secret (its URL) after all that.
    cluster.create(configmap("again", namespace))
    assert len(wh.calls) > recorded


def test_each_webhook_set_gets_its_own_secret(cluster: Cluster, namespace: str, webhooks: Any) -> None:
    first, second = webhooks(handlers=_guard()), webhooks(handlers=_guard())
    first_paths = {urllib.parse.urlsplit(url).path.split("/")[1] for url in _installed_urls(cluster, first)}
    second_paths = {urllib.parse.urlsplit(url).path.split("/")[1] for url in _installed_urls(cluster, second)}
    assert len(first_paths) == len(second_paths) == 1 and first_paths != second_paths
