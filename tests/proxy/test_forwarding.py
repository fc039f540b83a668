"""The proxy forwards with the operator's identity, records every call, streams watches."""

from __future__ import annotations

import json
import socket
import ssl
import threading
import time

import pytest
import urllib3
from builders import configmap
from kubernetes.client.exceptions import ApiException

from ktest.cluster import Cluster
from ktest.proxy import OperatorProxy
from ktest.wait import eventually


def test_requests_are_forwarded_and_recorded(proxy: OperatorProxy, ns: str) -> None:
    via = proxy.cluster.as_field_manager("my-operator")
    via.create(configmap("settings", data={"a": "1"}), namespace=ns)
    via.patch(("v1", "ConfigMap", "settings", ns), {"data": {"a": "2"}})
    assert via.get(("v1", "ConfigMap", "settings", ns))["data"] == {"a": "2"}

    create, patch = proxy.traffic.writes(kind="ConfigMap", name="settings")
    creates = proxy.traffic.calls(verb="create", resource="configmaps", namespace=ns)
    assert creates == [create] and create.status == 201
    assert creates[0].field_manager == "my-operator"
    assert patch.verb == "patch" and patch.name == "settings" and patch.namespace == ns
    assert patch.status == 200 and patch.latency is not None and patch.latency < 5
    gets = proxy.traffic.calls(verb="get", resource="configmaps", name="settings")
    assert gets and gets[-1].status == 200
    assert proxy.traffic.count(kind="ConfigMap", namespace=ns) == 3
    assert "OpenAPI-Generator" in gets[-1].user_agent or gets[-1].user_agent


def test_the_real_server_authenticates_and_authorizes_the_identity(admin: Cluster, ns: str) -> None:
    nobody = admin.user("proxy-nobody")
    proxy = OperatorProxy(nobody, "nobody").start()
    try:
        with pytest.raises(ApiException) as refused:
            proxy.cluster.list("v1", "ConfigMap", ns)
        assert refused.value.status == 403
        message = json.loads(refused.value.body)["message"]
        assert 'User "proxy-nobody" cannot list resource "configmaps"' in message
        assert proxy.traffic.calls(verb="list", resource="configmaps")[-1].status == 403
    finally:
        proxy.close()


def test_only_the_operator_s_certificate_is_accepted(proxy: OperatorProxy) -> None:
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    with (
        socket.create_connection(("127.0.0.1", proxy.port)) as raw,
        pytest.raises((ssl.SSLError, ConnectionError)),
        context.wrap_socket(raw) as tls,
    ):
        tls.sendall(b"GET /api/v1/namespaces HTTP/1.1\r\nHost: x\r\n\r\n")
        if not tls.recv(100):
            raise ConnectionError("closed without an answer")
    assert len(proxy.traffic) == 0


def test_watch_events_are_streamed_without_buffering(proxy: OperatorProxy, admin: Cluster, ns: str) -> None:
    pool = _pool(proxy)
    listing = json.loads(pool.request("GET", f"/api/v1/namespaces/{ns}/configmaps").data)
    response = pool.request(
        "GET",
        f"/api/v1/namespaces/{ns}/configmaps?watch=true&resourceVersion={listing['metadata']['resourceVersion']}",
        preload_content=False,
    )
    seen: list[tuple[float, str]] = []

    def read() -> None:
        try:
            for line in response.stream(amt=None):
                for part in line.splitlines():
                    if part.strip():
                        seen.append((time.monotonic(), json.loads(part)["object"]["metadata"]["name"]))
        except urllib3.exceptions.HTTPError:  # shut down by the test
            pass

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    created_at = time.monotonic()
    admin.create(configmap("one", data={"a": "1"}), namespace=ns)
    eventually(lambda: [name for _, name in seen] == ["one"], timeout=5)
    assert seen[0][0] - created_at < 1.0  # delivered at once, not when the stream ends
    watch = proxy.traffic.calls(verb="watch", resource="configmaps")[-1]
    eventually(lambda: watch.events == 1 and watch.event_types == {"ADDED": 1}, timeout=2)
    assert watch.ended is None
    response.shutdown()
    response.release_conn()
    pool.close()


def test_closing_the_proxy_leaves_no_thread_and_ends_open_watches(admin: Cluster, ns: str) -> None:
    proxy = OperatorProxy(admin, "short-lived").start()
    pool = _pool(proxy)
    response = pool.request("GET", f"/api/v1/namespaces/{ns}/configmaps?watch=true", preload_content=False)
    eventually(lambda: proxy.open_connections == 1, timeout=5)
    proxy.close()
    with pytest.raises(urllib3.exceptions.ProtocolError):  # the stream ended with the connection
        response.read()
    eventually(lambda: not [t for t in threading.enumerate() if t.name.startswith("ktest-proxy-short-lived")],
               timeout=5)
    pool.close()


def _pool(proxy: OperatorProxy) -> urllib3.HTTPSConnectionPool:
    configuration = proxy.cluster.api_client.configuration
    return urllib3.HTTPSConnectionPool(
        "127.0.0.1", proxy.port, ca_certs=configuration.ssl_ca_cert, cert_file=configuration.cert_file,
        key_file=configuration.key_file, assert_hostname=False, retries=False,
    )


def test_an_upstream_connection_closed_while_idle_is_replaced(proxy: OperatorProxy, ns: str) -> None:
    pool = _pool(proxy)
    assert pool.request("GET", f"/api/v1/namespaces/{ns}/configmaps").status == 200
    server = proxy._server
    assert server is not None
    with server._lock:
        ((_, sockets),) = server._connections.values()
    upstream = sockets[1]
    assert upstream is not None
    upstream.shutdown(socket.SHUT_RDWR)  # as an API server closing an idle kept-alive connection
    assert pool.request("GET", f"/api/v1/namespaces/{ns}/configmaps").status == 200  # same client connection
    assert proxy.open_connections == 1 and sockets[1] is not upstream
    assert [c.status for c in proxy.traffic.calls(verb="list")] == [200, 200] and not server.errors
    pool.close()


def test_a_watch_the_operator_abandons_is_ended(proxy: OperatorProxy, ns: str) -> None:
    pool = _pool(proxy)
    response = pool.request("GET", f"/api/v1/namespaces/{ns}/configmaps?watch=true", preload_content=False)
    eventually(lambda: proxy.traffic.open_watches("configmaps"), timeout=5)
    response.shutdown()  # the operator closes its connection; no event ever comes on this quiet watch
    response.close()
    eventually(lambda: proxy.open_connections == 0, timeout=5)
    assert proxy.traffic.calls(verb="watch")[-1].closed_by == "client"
    pool.close()
