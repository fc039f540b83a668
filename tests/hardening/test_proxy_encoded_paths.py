"""The operator proxy names a request by its path as the API server reads it (issue 50.6).

Go decodes every percent-escape of a request's path before kube-apiserver splits it into
resource parts, so ``DELETE /api/v1/namespaces/smuggle%2Fconfigmaps%2Fvictim`` deletes ConfigMap
``victim`` of namespace ``smuggle``. The proxy split first and decoded each part, and recorded a
delete of the namespace ``smuggle/configmaps/victim``: ``op.traffic`` named another resource than
the one the API server acted on. A ``%`` that starts no escape (which Go refuses, 400) is refused
by the proxy with a recorded 400.
"""

from __future__ import annotations

import json
import socket
import ssl
from collections.abc import Iterator
from typing import Any

import pytest

from ktest.base.kubeconfig import credentials_directory
from ktest.cluster import Cluster
from ktest.proxy import OperatorProxy


@pytest.fixture
def proxy(cluster: Cluster) -> Iterator[OperatorProxy]:
    started = OperatorProxy(cluster, "encoded-paths").start()
    try:
        yield started
    finally:
        started.close()


def _send(proxy: OperatorProxy, method: str, target: str) -> tuple[int, dict[str, Any]]:
    """One HTTP/1.1 request with the operator's own credentials (its kubeconfig's); the status
    and the JSON body of the answer."""
    assert proxy.kubeconfig is not None
    files = credentials_directory(proxy.kubeconfig)
    context = ssl.create_default_context(cafile=str(files / "ca.crt"))
    context.load_cert_chain(files / "client.crt", files / "client.key")
    raw = socket.create_connection(("127.0.0.1", proxy.port), timeout=10)
    with context.wrap_socket(raw, server_hostname="127.0.0.1") as sock:
        sock.sendall(f"{method} {target} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n".encode())
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    head, _, body = answer.partition(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1])
    if b"Transfer-Encoding: chunked" in head:
        body = _unchunk(body)
    return status, json.loads(body)


def _unchunk(body: bytes) -> bytes:
    data = b""
    while body:
        size_line, _, body = body.partition(b"\r\n")
        size = int(size_line.split(b";")[0], 16)
        if size == 0:
            break
        data, body = data + body[:size], body[size + 2:]
    return data


def _configmap(cluster: Cluster, name: str, namespace: str) -> None:
    metadata = {"name": name, "namespace": namespace}
    cluster.create({"apiVersion": "v1", "kind": "ConfigMap", "metadata": metadata, "data": {"k": "v"}})


@pytest.mark.parametrize("slash", ["%2F", "%2f"])
def test_an_encoded_slash_is_recorded_as_the_resource_the_api_server_deletes(
    cluster: Cluster, namespace: str, proxy: OperatorProxy, slash: str
) -> None:
    _configmap(cluster, "victim", namespace)
    target = f"/api/v1/namespaces/{namespace}{slash}configmaps{slash}victim"

    status, answer = _send(proxy, "DELETE", target)

    # the API server read the path decoded: it deleted the ConfigMap (and no namespace)
    details = answer.get("details") or {}
    assert status == 200 and (details["kind"], details["name"]) == ("configmaps", "victim"), answer
    assert not cluster.exists(("v1", "ConfigMap", "victim", namespace))
    assert cluster.exists(("v1", "Namespace", namespace))
    # and the record names what it acted on
    (call,) = proxy.traffic.calls(verb="delete")
    named = (call.request.resource, call.request.namespace, call.request.name)
    assert named == ("configmaps", namespace, "victim"), call.describe()
    assert call.status == 200
    assert proxy.traffic.calls(resource="namespaces") == []


def test_a_malformed_escape_is_refused_and_recorded(
    cluster: Cluster, namespace: str, proxy: OperatorProxy
) -> None:
    _configmap(cluster, "kept", namespace)
    status, answer = _send(proxy, "DELETE", f"/api/v1/namespaces/{namespace}/configmaps/kept%zz")
    assert status == 400 and "starts no escape" in str(answer["message"]), answer
    (call,) = proxy.traffic.calls()
    assert call.status == 400 and call.refused is not None and "%" in call.refused
    assert cluster.exists(("v1", "ConfigMap", "kept", namespace))
