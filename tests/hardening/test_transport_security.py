"""Nobody but the API server can talk to etcd; the API server listens on
loopback only and refuses anonymous writes. Each refusal has a positive control
(the legitimate client succeeds), so the test fails if the check itself is broken."""

from __future__ import annotations

import http.client
import json
import ssl
from pathlib import Path

import pytest
from hardening_helpers import is_loopback, listening_addresses

from ktest.controlplane import ControlPlane

_RANGE_ALL = json.dumps({"key": "AA==", "range_end": "AA=="})  # every key, base64 of "\0"


def _flag(plane: ControlPlane, component: str, name: str) -> str:
    process = plane.processes()[component]
    for argument in process.command:
        if argument.startswith(f"--{name}="):
            return argument.split("=", 1)[1]
    raise AssertionError(f"{component} has no --{name}: {process.command}")


def _etcd_port(plane: ControlPlane) -> int:
    return int(_flag(plane, "etcd", "listen-client-urls").rsplit(":", 1)[1])


def _etcd_peer_port(plane: ControlPlane) -> int:
    return int(_flag(plane, "etcd", "listen-peer-urls").rsplit(":", 1)[1])


def _etcd_range(port: int, context: ssl.SSLContext | None) -> tuple[int, bytes]:
    """POST /v3/kv/range for every key; (status, body)."""
    if context is None:
        connection: http.client.HTTPConnection = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    else:
        connection = http.client.HTTPSConnection("127.0.0.1", port, timeout=5, context=context)
    try:
        connection.request("POST", "/v3/kv/range", body=_RANGE_ALL)
        response = connection.getresponse()
        return response.status, response.read()
    finally:
        connection.close()


def _context(ca: Path, cert: Path | None = None, key: Path | None = None) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=str(ca))
    if cert is not None and key is not None:
        context.load_cert_chain(str(cert), str(key))
    return context


def test_etcd_serves_its_data_to_the_api_servers_certificate(plane: ControlPlane) -> None:
    """Positive control: the client the API server uses reads etcd's keys."""
    context = _context(
        Path(_flag(plane, "kube-apiserver", "etcd-cafile")),
        Path(_flag(plane, "kube-apiserver", "etcd-certfile")),
        Path(_flag(plane, "kube-apiserver", "etcd-keyfile")),
    )
    status, body = _etcd_range(_etcd_port(plane), context)
    assert status == 200 and b'"kvs"' in body, (status, body[:200])
    assert _flag(plane, "kube-apiserver", "etcd-servers").startswith("https://127.0.0.1:")


def test_etcd_refuses_plain_http(plane: ControlPlane) -> None:
    for port in (_etcd_port(plane), _etcd_peer_port(plane)):
        try:
            status, body = _etcd_range(port, None)
        except (OSError, http.client.HTTPException):
            continue  # connection dropped: refused as well
        assert status == 400 and b'"kvs"' not in body, (port, status, body[:200])


def test_etcd_refuses_tls_without_a_client_certificate(plane: ControlPlane) -> None:
    context = _context(Path(_flag(plane, "kube-apiserver", "etcd-cafile")))
    for port in (_etcd_port(plane), _etcd_peer_port(plane)):
        with pytest.raises((ssl.SSLError, ConnectionError, http.client.HTTPException)):
            _etcd_range(port, context)


def test_etcd_refuses_a_certificate_of_the_clusters_own_ca(plane: ControlPlane) -> None:
    """A user certificate for the API server (here: the admin's) is no key to etcd."""
    certs = plane.directory / "certs"
    etcd_ca = Path(_flag(plane, "kube-apiserver", "etcd-cafile"))
    context = _context(etcd_ca, certs / "admin.crt", certs / "admin.key")
    with pytest.raises((ssl.SSLError, ConnectionError, http.client.HTTPException)):
        _etcd_range(_etcd_port(plane), context)


def test_etcd_ca_key_is_never_written(plane: ControlPlane) -> None:
    etcd_certs = Path(_flag(plane, "kube-apiserver", "etcd-cafile")).parent
    assert sorted(p.name for p in etcd_certs.iterdir() if p.suffix == ".key") == [
        "apiserver-etcd-client.key",
        "server.key",
    ]


def test_every_listener_is_on_loopback(plane: ControlPlane) -> None:
    listeners = {
        name: listening_addresses(process.pid)
        for name, process in plane.processes().items()
        if process.pid is not None
    }
    assert listeners["etcd"] and listeners["kube-apiserver"], listeners
    exposed = {name: [a for a in found if not is_loopback(a[0])] for name, found in listeners.items()}
    assert not any(exposed.values()), f"listening beyond loopback: {exposed}"


def _anonymous(plane: ControlPlane, method: str, path: str, body: str | None = None) -> int:
    context = _context(plane.directory / "certs" / "ca.crt")
    port = int(plane.server.rsplit(":", 1)[1])
    connection = http.client.HTTPSConnection("127.0.0.1", port, timeout=5, context=context)
    try:
        headers = {"Content-Type": "application/json"}
        connection.request(method, path, body=body, headers=headers)
        return connection.getresponse().status
    finally:
        connection.close()


def test_anonymous_requests_cannot_write_or_read_secrets(plane: ControlPlane) -> None:
    namespace = json.dumps({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "anon-was-here"}})
    assert _anonymous(plane, "POST", "/api/v1/namespaces", namespace) in (401, 403)
    assert _anonymous(plane, "GET", "/api/v1/secrets") in (401, 403)
    assert _anonymous(plane, "DELETE", "/api/v1/namespaces/default") in (401, 403)
    # Positive control: the same request with the admin's certificate is allowed.
    certs = plane.directory / "certs"
    context = _context(certs / "ca.crt", certs / "admin.crt", certs / "admin.key")
    port = int(plane.server.rsplit(":", 1)[1])
    connection = http.client.HTTPSConnection("127.0.0.1", port, timeout=5, context=context)
    try:
        connection.request("GET", "/api/v1/secrets")
        assert connection.getresponse().status == 200
    finally:
        connection.close()
