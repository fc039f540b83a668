"""Only the API server may call ktest's webhook front server.

The front server listens where other local users (bare: 127.0.0.1) or Pods (kind: the
network's gateway) can connect. Every URL ktest writes into a clientConfig carries a
secret path segment, random per webhook set; a request without it is refused, is not
read, and never reaches a handler, the operator or the call log that assertions read.
On the embedded control plane the API server also presents a client certificate of a CA
of its own to admission webhooks, and a client without it fails the TLS handshake."""

from __future__ import annotations

import http.client
import json
import socket
import ssl
import urllib.parse
from pathlib import Path
from typing import Any

import pytest
from builders import configmap
from webhook_handlers import forbidden_key_guard, gadget_conversion
from webhook_helpers import gadget

from ktest.base.certs import CertificateAuthority
from ktest.base.kubeconfig import credentials_directory
from ktest.cluster import Cluster
from ktest.controlplane.admission import WEBHOOK_CLIENT_STEM
from ktest.webhooks import Webhooks


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


def _post(
    wh: Webhooks,
    path: str,
    body: bytes,
    method: str = "POST",
    *,
    identity: tuple[Path, Path] | None = None,
    port: int | None = None,
) -> tuple[int, bytes]:
    """A TLS client that trusts ktest's CA (as a local user could: the CA certificate is public),
    presenting ``identity`` (certificate, key) if given."""
    context = ssl.create_default_context(cafile=str(wh.ca_file))
    if identity is not None:
        context.load_cert_chain(*identity)
    assert wh.server is not None
    connection = http.client.HTTPSConnection(wh.host, port or wh.server.port, context=context, timeout=5)
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


def _apiserver_identity(cluster: Cluster) -> tuple[Path, Path] | None:
    """The certificate and key the embedded API server presents to admission webhooks
    (None where the backend configures none: kind, an existing cluster)."""
    if cluster.webhook_client_ca is None:
        return None
    directory = cluster.webhook_client_ca.parent
    return directory / f"{WEBHOOK_CLIENT_STEM}.crt", directory / f"{WEBHOOK_CLIENT_STEM}.key"


def _refused(wh: Webhooks, path: str, body: bytes, identity: tuple[Path, Path] | None) -> str:
    """How the front server refused a client presenting ``identity`` (or none); fails if it answered."""
    try:
        status, _ = _post(wh, path, body, identity=identity)
    except (OSError, http.client.HTTPException) as error:  # ssl.SSLError is an OSError
        return f"{type(error).__name__}: {error}"
    raise AssertionError(f"the front server answered HTTP {status} to a client with identity {identity}")


def test_requests_without_the_path_secret_are_refused_and_never_logged(
    cluster: Cluster, namespace: str, webhooks: Any
) -> None:
    wh = webhooks(handlers=forbidden_key_guard())
    # Where the API server presents a client certificate, these requests present it too:
    # what is tested here is the path secret behind it.
    apiserver = _apiserver_identity(cluster)
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
    answers = {path: _post(wh, path, body, identity=apiserver) for path in guesses}
    assert {path: status for path, (status, _) in answers.items() if status != 403} == {}
    assert len(wh.calls) == recorded, [call.describe() for call in wh.calls]
    assert all("forged" not in call.object for call in wh.calls)
    status, _ = _post(wh, paths[0], b"", method="GET", identity=apiserver)
    assert status == 403

    secrets = {path.split("/")[1] for path in paths}
    assert len(secrets) == 1 and len(secrets.pop()) >= 32, paths

    # The API server still gets through with the secret (its URL) after all that.
    cluster.create(configmap("again", namespace))
    assert len(wh.calls) > recorded


def test_each_webhook_set_gets_its_own_secret(cluster: Cluster, namespace: str, webhooks: Any) -> None:
    first, second = webhooks(handlers=forbidden_key_guard()), webhooks(handlers=forbidden_key_guard())
    first_paths = {urllib.parse.urlsplit(url).path.split("/")[1] for url in _installed_urls(cluster, first)}
    second_paths = {urllib.parse.urlsplit(url).path.split("/")[1] for url in _installed_urls(cluster, second)}
    assert len(first_paths) == len(second_paths) == 1 and first_paths != second_paths


@pytest.fixture
def apiserver_identity(cluster: Cluster) -> tuple[Path, Path]:
    identity = _apiserver_identity(cluster)
    if identity is None:
        pytest.skip("this backend's API server presents no client certificate ktest configured (bare only)")
    return identity


def test_admission_calls_need_the_api_servers_client_certificate(
    cluster: Cluster, namespace: str, webhooks: Any, apiserver_identity: tuple[Path, Path], tmp_path: Path
) -> None:
    wh = webhooks(handlers=forbidden_key_guard())
    assert wh.server is not None and wh.server.requires_client_certificate
    cluster.create(configmap("real", namespace))  # the API server gets through
    recorded = len(wh.calls)
    assert recorded >= 1

    # With the right path secret (as if it had leaked) but without the API server's certificate:
    # no certificate, one of the control plane's own CA (any user's), one of another CA.
    path = urllib.parse.urlsplit(_installed_urls(cluster, wh)[0]).path
    user = credentials_directory(cluster.user("webhook-impostor", ["system:masters"]).kubeconfig)
    stranger = CertificateAuthority(tmp_path / "ca", write_key=False).client("stranger", "kube-apiserver")
    identities = {
        "none": None,
        "a user of the control plane's CA": (user / "client.crt", user / "client.key"),
        "another CA's": (stranger.cert_path, stranger.key_path),
    }
    refusals = {
        name: _refused(wh, path, _review(namespace, "forged"), identity)
        for name, identity in identities.items()
    }
    assert all(
        "SSL" in how or "reset" in how.lower() or "closed" in how.lower() for how in refusals.values()
    ), refusals
    assert len(wh.calls) == recorded, [call.describe() for call in wh.calls]

    # The handshake itself fails without a certificate (TLS 1.3: the client hears of it on its first
    # read, as the server's alert or, when the server has already closed, as an EOF).
    context = ssl.create_default_context(cafile=str(wh.ca_file))
    with (
        socket.create_connection((wh.host, wh.server.port), timeout=5) as raw,
        context.wrap_socket(raw, server_hostname=wh.host) as tls,
        pytest.raises(ssl.SSLError, match=r"CERTIFICATE_REQUIRED|certificate required|EOF occurred"),
    ):
        tls.sendall(b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n")
        tls.recv(1)
    assert len(wh.calls) == recorded

    # The same request with the API server's certificate is answered: the certificate is what counted.
    status, _ = _post(wh, path, _review(namespace, "with-the-certificate"), identity=apiserver_identity)
    assert status == 200
    assert len(wh.calls) == recorded + 1


def test_conversions_get_a_listener_of_their_own_that_serves_nothing_else(
    cluster: Cluster, namespace: str, webhooks: Any, gadgets: str, apiserver_identity: tuple[Path, Path]
) -> None:
    """The API server presents no client certificate to CRD conversion webhooks (see
    test_apiserver_client_certificate): their calls go to a second port, guarded by the path
    secret, where admission routes and probes are refused."""
    handlers = gadget_conversion()
    handlers.registrations += forbidden_key_guard().registrations
    wh = webhooks(handlers=handlers)
    assert wh.server is not None and wh.server.conversion_port != wh.server.port
    cluster.create(gadget("g", namespace, size="10Gi"))
    assert cluster.get(("pyhooks.ktest.dev/v2", "Gadget", "g", namespace))["spec"]["sizeGi"] == 10
    recorded = len(wh.calls)
    assert any(call.kind == "conversion" for call in wh.calls)

    admission_paths = [urllib.parse.urlsplit(url).path for url in _installed_urls(cluster, wh)]
    secret = admission_paths[0].split("/")[1]
    body = _review(namespace, "forged")
    answers = {
        path: _post(wh, path, body, port=wh.server.conversion_port)[0]
        for path in [*admission_paths, f"/{secret}/ktest-probe/0", f"/{secret}/hook/999", f"/{secret}/"]
    }
    assert set(answers.values()) == {403}, answers
    assert len(wh.calls) == recorded
