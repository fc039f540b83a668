"""A request head holding CR, LF or NUL is never written to the API server.

The proxy forwards every request over HTTP/1.1, whatever the operator spoke. Before h2 4.3.0
(CVE-2025-57804) an HTTP/2 header value could hold ``\\r\\n``: written into the HTTP/1.1 head,
it ended the request early and started a second one, run with the operator's identity, on the
API server connection the proxy reuses, and missing from ``op.traffic``. ktest's own encoder
refuses such heads whichever h2 is installed; these tests run at any h2 (``make test-floors``
runs them at the floor), and prove the encoder's refusal when h2 lets the value through (run them
with h2 4.1.0 on ``PYTHONPATH`` to see it: the end-to-end test takes the 400 branch).
"""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator

import h2
import h2.config
import h2.connection
import h2.errors
import h2.events
import pytest
from h2_client import RawH2Client, client_context

from ktest.cluster import Cluster
from ktest.proxy import OperatorProxy
from ktest.proxy.http1 import Head, UnsafeHeadError
from ktest.wait import consistently

# h2 4.3.0 (CVE-2025-57804) refuses such header values itself: it ends the whole connection.
H2_REFUSES_LINE_BREAKS = tuple(int(part) for part in h2.__version__.split(".")[:2]) >= (4, 3)


@pytest.fixture
def h2_proxy(admin: Cluster) -> Iterator[OperatorProxy]:
    started = OperatorProxy(admin, "smuggler", http2=True).start()
    try:
        yield started
    finally:
        started.close()


def _victim(admin: Cluster, ns: str) -> None:
    admin.create({"apiVersion": "v1", "kind": "ConfigMap",
                  "metadata": {"name": "victim", "namespace": ns}, "data": {"k": "v"}})


def test_an_http2_header_value_holding_crlf_smuggles_no_request(
    admin: Cluster, ns: str, h2_proxy: OperatorProxy
) -> None:
    _victim(admin, ns)
    target = f"/api/v1/namespaces/{ns}/configmaps/victim"
    # ends the GET (with a Host of its own) and starts a DELETE that the proxy's own Host and
    # credentials would complete
    smuggling = ("x-note", f"a\r\nHost: 127.0.0.1\r\n\r\nDELETE {target} HTTP/1.1")
    client = RawH2Client(h2_proxy, check_outbound=False)
    try:
        answer = client.answer(client.get(target, (smuggling,)))
        # no DELETE ran: the object stays, and the record (which would not show it) has none
        victim = ("v1", "ConfigMap", "victim", ns)
        consistently(lambda: admin.get(victim)["data"] == {"k": "v"}, duration=2)
        assert h2_proxy.traffic.calls(verb="delete") == []
        if H2_REFUSES_LINE_BREAKS:
            # h2 refuses the header block: the connection ends with PROTOCOL_ERROR, and the
            # proxy's record says so (no call: h2 never handed the request over)
            assert answer is None and client.terminated is not None, (answer, client.terminated)
            assert client.terminated.error_code == h2.errors.ErrorCodes.PROTOCOL_ERROR
            assert any("HTTP/2 connection refused" in text for _, text in h2_proxy.traffic.notes())
            assert "HTTP/2 connection refused" in h2_proxy.traffic.describe()
            client.close()
            client = RawH2Client(h2_proxy, check_outbound=False)
        else:
            # h2 lets it through: ktest's encoder refuses it, answers 400 and records why
            assert answer is not None and answer[0] == "400", answer
            status = json.loads(answer[1])
            assert "carriage return (CR)" in status["message"] and "x-note" in status["message"], status
            (refused,) = h2_proxy.traffic.calls(name="victim")
            assert refused.status == 400 and refused.protocol == "HTTP/2", refused.describe()
            assert refused.refused is not None and "'x-note' holds a carriage return" in refused.refused
            assert "refused by the proxy" in refused.describe()
        # the next request (on the same connection when it is still open) gets its own answer
        follow_up = client.answer(client.get(target))
        assert follow_up is not None and follow_up[0] == "200", follow_up
        assert json.loads(follow_up[1])["metadata"]["name"] == "victim"
        assert h2_proxy._server is not None and h2_proxy._server.errors == []
    finally:
        client.close()


def test_an_http1_header_holding_nul_or_a_bare_cr_is_refused_and_recorded(
    admin: Cluster, ns: str, h2_proxy: OperatorProxy
) -> None:
    """HTTP/1.1 lines end at LF, so CR and NUL are what could get through: the same refusal."""
    _victim(admin, ns)
    target = f"/api/v1/namespaces/{ns}/configmaps/victim"
    for value, what in ((b"a\x00b", "a NUL byte"), (b"a\rDELETE / HTTP/1.1", "a carriage return (CR)")):
        raw = socket.create_connection(("127.0.0.1", h2_proxy.port), timeout=10)
        with client_context(h2_proxy, "http/1.1").wrap_socket(raw, server_hostname="127.0.0.1") as sock:
            request = b"GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Note: %s\r\n\r\n" % (target.encode(), value)
            sock.sendall(request)
            answer = b""
            while chunk := sock.recv(65536):  # the proxy closes the connection after the refusal
                answer += chunk
        head, _, body = answer.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 400 ") and b"X-Ktest-Refused: malformed-head" in head, answer
        assert what in json.loads(body)["message"]
    calls = h2_proxy.traffic.calls(name="victim")
    assert [(call.status, call.protocol, call.refused is not None) for call in calls] == [
        (400, "HTTP/1.1", True), (400, "HTTP/1.1", True)
    ], h2_proxy.traffic.describe(calls)
    assert admin.get(("v1", "ConfigMap", "victim", ns))["data"] == {"k": "v"}


@pytest.mark.parametrize(
    ("head", "says"),
    [
        (Head("GET /a HTTP/1.1", [("x-note", "a\r\nHost: b\r\n\r\nDELETE /x HTTP/1.1")]),
         "the value of header 'x-note' holds a carriage return (CR)"),
        (Head("GET /a HTTP/1.1", [("x-note", "a\nb")]), "'x-note' holds a line feed (LF)"),
        (Head("GET /a HTTP/1.1", [("x-note", "a\x00b")]), "the value of header 'x-note' holds a NUL byte"),
        (Head("GET /a HTTP/1.1", [("x-a\r\nx-b", "c")]), "the header name 'x-a\\r\\nx-b' is not a token"),
        (Head("GET /a HTTP/1.1", [("x note", "c")]), "the header name 'x note' is not a token"),
        # an HTTP/2 request's :path and :method become the request line
        (Head("GET /a\r\nDELETE /x HTTP/1.1", []), "holds a carriage return (CR)"),
        (Head("GET /a\x00 HTTP/1.1", []), "holds a NUL byte"),
    ],
)
def test_the_encoder_refuses_cr_lf_and_nul_whatever_h2_let_through(head: Head, says: str) -> None:
    problem = head.request_problem()
    assert problem is not None and says in problem
    with pytest.raises(UnsafeHeadError) as refused:
        head.encode()
    assert says in str(refused.value)


def test_the_encoder_refuses_what_the_proxy_adds_and_request_lines_with_extra_words() -> None:
    with pytest.raises(UnsafeHeadError, match="'Authorization' holds a line feed"):
        Head("GET /a HTTP/1.1", []).encode(extra=[("Authorization", "Bearer x\nX-Other: y")])
    for first in ("GET /a b HTTP/1.1", "GET /a\tb HTTP/1.1", "G(T /a HTTP/1.1", "GET  HTTP/1.1"):
        problem = Head(first, []).request_problem()
        assert problem is not None and "is not 'METHOD target HTTP/version'" in problem, first
    # what passes is written as it was: a dropped header is gone, an added one is last
    head = Head("GET /api?watch=1 HTTP/1.1", [("Accept", "application/json"), ("Te", "trailers"),
                                                ("X-Tab", "a\tb")])
    assert head.request_problem() is None
    assert head.encode(frozenset({"te"}), [("Host", "h:1")]) == (
        b"GET /api?watch=1 HTTP/1.1\r\nAccept: application/json\r\nX-Tab: a\tb\r\nHost: h:1\r\n\r\n"
    )
