"""The start-up gate in front of kube-controller-manager (ktest/controlplane/startup_gate.py).

Against a real API server: the gate holds the start-up ``/healthz`` until it is opened, refuses
anything else while it holds, then relays every connection to the API server byte for byte
(TLS end to end, the API server authenticating the client). In a control plane, on template
data or not, kube-controller-manager is behind it from its launch, never sees the API server
unhealthy, and the gate is gone once kube-controller-manager restarts or the plane stops: that is
checked on the planes of test_deferred_controllers.py, which start and restart them anyway.
"""

from __future__ import annotations

import http.client
import json
import socket
import ssl
from collections.abc import Iterator
from pathlib import Path

import pytest

from ktest.controlplane import ControlPlane
from ktest.controlplane.startup_gate import StartupGate
from ktest.wait import consistently


@pytest.fixture
def upstream(shared_plane: ControlPlane) -> ControlPlane:
    """A real API server for the gate to stand in front of: the folder's shared plane (a gate
    of the test's own only reads its certificates and relays to it)."""
    return shared_plane


def _gate_in_front_of(plane: ControlPlane) -> StartupGate:
    """A gate with the API server's own serving certificate, as the control plane makes one."""
    certs = plane.directory / "certs"
    return StartupGate(int(plane.server.rsplit(":", 1)[1]), certs / "apiserver.crt", certs / "apiserver.key")


@pytest.fixture
def gate(upstream: ControlPlane) -> Iterator[StartupGate]:
    with _gate_in_front_of(upstream) as gate:
        yield gate


def _client_context(plane: ControlPlane, *, identity: bool = False) -> ssl.SSLContext:
    """Trusts the plane's CA (and checks 127.0.0.1 is in the serving certificate); with
    ``identity``, presents the admin client certificate."""
    context = ssl.create_default_context(cafile=str(plane.directory / "certs" / "ca.crt"))
    if identity:
        credentials = Path(str(plane.kubeconfig) + ".credentials")
        context.load_cert_chain(str(credentials / "client.crt"), str(credentials / "client.key"))
    return context


def _send(gate: StartupGate, plane: ControlPlane, request: bytes) -> ssl.SSLSocket:
    raw = socket.create_connection(("127.0.0.1", gate.port), timeout=30)
    tls = _client_context(plane).wrap_socket(raw, server_hostname="127.0.0.1")
    tls.sendall(request)
    return tls


def _read_all(tls: ssl.SSLSocket) -> bytes:
    received = b""
    while chunk := tls.recv(65536):
        received += chunk
    return received


HEALTHZ = b"GET /healthz?timeout=32s HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"


def _get(gate: StartupGate, plane: ControlPlane, path: str) -> tuple[int, bytes]:
    connection = http.client.HTTPSConnection(
        "127.0.0.1", gate.port, context=_client_context(plane, identity=True), timeout=30
    )
    try:
        connection.request("GET", path)
        response = connection.getresponse()
        return response.status, response.read()
    finally:
        connection.close()


def test_holds_the_health_check_until_opened_then_answers_ok(
    gate: StartupGate, upstream: ControlPlane
) -> None:
    held = _send(gate, upstream, HEALTHZ)
    held.settimeout(0.2)

    def still_held() -> bool:
        try:
            held.recv(1)
        except TimeoutError:
            return True
        return False  # an answer, or the end of the connection

    consistently(still_held, duration=1.0, description="no answer before open()")
    assert not gate.answered
    gate.open()
    held.settimeout(30)
    reply = _read_all(held)
    assert reply.startswith(b"HTTP/1.1 200 OK\r\n")
    assert reply.endswith(b"\r\n\r\nok")
    assert gate.answered


def test_refuses_anything_but_the_health_check_while_it_holds(
    gate: StartupGate, upstream: ControlPlane
) -> None:
    reply = _read_all(_send(gate, upstream, b"GET /api HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"))
    assert reply.startswith(b"HTTP/1.1 503 Service Unavailable\r\n")
    assert b"Retry-After: 1\r\n" in reply
    assert not gate.answered


def test_after_the_answer_connections_reach_the_api_server_itself(
    gate: StartupGate, upstream: ControlPlane
) -> None:
    gate.open()
    assert _read_all(_send(gate, upstream, HEALTHZ)).startswith(b"HTTP/1.1 200 OK")
    status, body = _get(gate, upstream, "/version")
    assert status == 200
    assert json.loads(body)["gitVersion"].lstrip("v").startswith(upstream.version)
    # The client's own identity reaches the API server (TLS end to end): without a client
    # certificate the same request is anonymous and forbidden.
    connection = http.client.HTTPSConnection(
        "127.0.0.1", gate.port, context=_client_context(upstream), timeout=30
    )
    connection.request("GET", "/api/v1/namespaces")
    assert connection.getresponse().status in (401, 403)
    connection.close()
    status, body = _get(gate, upstream, "/api/v1/namespaces/default")
    assert status == 200 and json.loads(body)["metadata"]["name"] == "default"


def test_close_ends_the_held_request_and_the_listener(upstream: ControlPlane) -> None:
    certs = upstream.directory / "certs"
    gate = StartupGate(
        int(upstream.server.rsplit(":", 1)[1]), certs / "apiserver.crt", certs / "apiserver.key"
    )
    held = _send(gate, upstream, HEALTHZ)
    port = gate.port
    gate.close()
    assert _read_all(held) == b""  # no answer, the connection ended
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", port), timeout=5).close()
