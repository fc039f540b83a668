"""HTTP/2 through the operator proxy: a Go manager multiplexes over h2, Python clients keep HTTP/1.1."""

from __future__ import annotations

from pathlib import Path

from h2_client import RawH2Client
from traffic_helpers import answered

from ktest import faults
from ktest.cluster import Cluster
from ktest.operators import build_go_binary, run_subprocess
from ktest.proxy import OperatorProxy
from ktest.proxy.defaults import use_operator_proxy_http2
from ktest.wait import eventually

GO_MANAGER = Path(__file__).resolve().parents[2] / "fixtures" / "go-manager"
LABELS = {"ktest.dev/mirror": "true"}


def test_a_go_manager_speaks_http2_and_a_python_client_http_1_1_on_the_same_proxy(
    admin: Cluster, ns: str
) -> None:
    manager = build_go_binary(GO_MANAGER)
    with use_operator_proxy_http2(True), run_subprocess(
        [manager], admin, args=["--health-probe-bind-address=127.0.0.1:{port}"],
        ready_http="http://127.0.0.1:{port}/readyz", proxy=True,
    ) as op:
        assert op.proxy is not None and op.proxy.http2
        admin.create({"apiVersion": "v1", "kind": "ConfigMap",
                      "metadata": {"name": "a", "namespace": ns, "labels": LABELS}, "data": {"k": "v"}})
        eventually(lambda: admin.get(("v1", "ConfigMap", "a-mirror", ns))["data"] == {"k": "v"})
        go_calls = [call for call in op.traffic.calls() if call.user_agent.startswith("go-manager/")]
        assert go_calls and {call.protocol for call in go_calls} == {"HTTP/2"}, op.traffic.describe(go_calls)
        # client-go multiplexes: its watches and writes share one connection instead of one each
        # (a second one dialled in a race at start-up is closed by Go's connection pool at once)
        eventually(lambda: op.proxy is not None and op.proxy.open_connections == 1, timeout=5)
        watches = op.traffic.calls(verb="watch", resource="configmaps")
        assert watches and watches[0].events >= 1
        events_before = watches[0].events
        writes = eventually(lambda: answered(op.traffic.writes(resource="configmaps", namespace=ns)))
        assert {call.status for call in writes} <= {200, 201}, op.traffic.describe(writes)

        # status faults over h2: two conflicts, then client-go's requeue gets the update through
        with op.faults.inject(faults.conflict("configmaps", name="a-mirror", verb="update", times=2)):
            admin.patch(("v1", "ConfigMap", "a", ns), {"data": {"k": "w"}})
            eventually(lambda: admin.get(("v1", "ConfigMap", "a-mirror", ns))["data"] == {"k": "w"})
        conflicts = eventually(lambda: answered(op.traffic.calls(verb="update", name="a-mirror")))
        assert [call.status for call in conflicts if call.answered_by_fault] == [409, 409]
        assert conflicts[-1].status == 200 and conflicts[-1].protocol == "HTTP/2"
        # the patch of a and the update of a-mirror came to the manager as events on its h2 watch
        eventually(lambda: watches[0].events >= events_before + 2, timeout=5)

        # a watch stream the proxy closes ends cleanly; client-go opens a new one on the same connection
        opened = len(op.traffic.calls(verb="watch", resource="configmaps"))
        with op.faults.inject(faults.close_watches("configmaps")):
            pass
        eventually(lambda: len(op.traffic.calls(verb="watch", resource="configmaps")) > opened, timeout=15)
        closed = op.traffic.calls(verb="watch", resource="configmaps")[:opened]
        assert any((call.closed_by or "").startswith("close_watches") for call in closed), (
            op.traffic.describe(closed)
        )
        assert op.traffic.calls(verb="watch", resource="configmaps")[-1].protocol == "HTTP/2"

        # the kubernetes Python client (urllib3) speaks HTTP/1.1 to the same proxy
        op.proxy.cluster.list("v1", "ConfigMap", ns)
        python_calls = op.traffic.calls(verb="list", resource="configmaps", namespace=ns)
        assert python_calls and python_calls[-1].protocol == "HTTP/1.1" and python_calls[-1].status == 200
        assert op.proxy._server is not None and op.proxy._server.errors == []


def test_events_of_a_gzip_compressed_protobuf_watch_are_counted() -> None:
    """The API server gzips client-go's watches (it accepts gzip): one gzip member per flush."""
    import gzip
    import struct

    from ktest.proxy.api_request import parse_request
    from ktest.proxy.traffic import Call, EventCounter

    frames = [struct.pack(">I", len(body)) + body for body in (b"k8s\x00one", b"k8s\x00second event")]
    flushes = [gzip.compress(frames[0] + frames[1][:6]), gzip.compress(frames[1][6:])]
    call = Call.of(parse_request("GET", "/api/v1/configmaps?watch=true"), 0.0)
    counter = EventCounter("application/vnd.kubernetes.protobuf;stream=watch", "gzip")
    counter.feed(flushes[0][:10], call, 0.0)  # a member split across chunks
    counter.feed(flushes[0][10:] + flushes[1], call, 0.0)  # members back to back in one chunk
    assert call.events == 2
    plain = Call.of(call.request, 0.0)
    EventCounter("application/vnd.kubernetes.protobuf;stream=watch").feed(b"".join(flushes), plain, 0.0)
    assert plain.events != 2  # without the encoding the bytes are not frames: the count is wrong


def test_streams_share_a_connection_within_flow_control_and_reset_alone(admin: Cluster, ns: str) -> None:
    import json

    for index in range(3):  # a list answer of ~10 KiB against a 1 KiB window
        admin.create({"apiVersion": "v1", "kind": "ConfigMap",
                      "metadata": {"name": f"big-{index}", "namespace": ns}, "data": {"k": "x" * 3000}})
    proxy = OperatorProxy(admin, "raw-h2", http2=True).start()
    client = RawH2Client(proxy, window=1024)
    try:
        watch = client.get(f"/api/v1/namespaces/{ns}/configmaps?watch=true&resourceVersion=0")
        listing = client.get(f"/api/v1/namespaces/{ns}/configmaps")
        client.until(lambda: listing in client.ended)
        assert client.status[listing] == "200" and watch not in client.ended
        names = {item["metadata"]["name"] for item in json.loads(client.body[listing])["items"]}
        assert {"big-0", "big-1", "big-2"} <= names
        assert client.window_updates_sent >= 10  # the proxy waited for the window, again and again

        with proxy.faults.inject(faults.reset("configmaps", verb="get", name="big-0")):
            broken = client.get(f"/api/v1/namespaces/{ns}/configmaps/big-0")
            client.until(lambda: broken in client.reset)
        assert client.reset[broken] == 2  # INTERNAL_ERROR on that stream only
        again = client.get(f"/api/v1/namespaces/{ns}/configmaps/big-1")
        client.until(lambda: again in client.ended)
        assert client.status[again] == "200"

        admin.create({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "late", "namespace": ns}})
        client.until(lambda: b'"name":"late"' in client.body[watch])  # the watch streamed meanwhile
        client.cancel(watch)
        watch_call = proxy.traffic.calls(verb="watch", namespace=ns)[0]
        eventually(lambda: watch_call.closed_by == "client", timeout=5)
        assert watch_call.events >= 4 and watch_call.protocol == "HTTP/2"
        resets = proxy.traffic.calls(verb="get", name="big-0")
        assert [(call.error, call.answered_by_fault) for call in resets] == [("connection reset", True)]
        assert proxy.open_connections == 1 and proxy._server is not None and proxy._server.errors == []
    finally:
        client.close()
        proxy.close()


def test_http2_is_on_by_default_and_the_setting_turns_it_off(admin: Cluster) -> None:
    from ktest.config import resolve_settings
    from ktest.operators import OperatorContext, run_callable

    assert resolve_settings(env={}).operator_proxy_http2 is True
    assert resolve_settings(env={"KTEST_OPERATOR_PROXY_HTTP2": "off"}).operator_proxy_http2 is False

    def idle(ctx: OperatorContext) -> None:
        ctx.ready()
        ctx.stop.wait()  # type: ignore[call-arg]

    with use_operator_proxy_http2(False), run_callable(idle, admin, name="h1-only", proxy=True) as op:
        assert op.proxy is not None and not op.proxy.http2
    with use_operator_proxy_http2(True), run_callable(idle, admin, name="h2-too", proxy=True) as op:
        assert op.proxy is not None and op.proxy.http2
