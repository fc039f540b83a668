"""The traffic record's filters and counters, and naming requests (no cluster needed)."""

from __future__ import annotations

import pytest

from ktest.proxy import traffic as traffic_module
from ktest.proxy.api_request import parse_request
from ktest.proxy.traffic import Traffic


@pytest.mark.parametrize(
    ("method", "target", "described"),
    [
        ("GET", "/api/v1/namespaces/a/pods?watch=true", "watch pods in a"),
        ("GET", "/api/v1/watch/namespaces/a/pods", "watch pods in a"),
        ("GET", "/apis/apps/v1/deployments?watch=1&sendInitialEvents=true", "watch (list) deployments"),
        ("PATCH", "/apis/example.com/v1/namespaces/ns/webapps/shop/status", "patch webapps ns/shop (status)"),
        ("GET", "/apis/apps/v1/deployments", "list deployments"),
        ("DELETE", "/api/v1/namespaces/x", "delete namespaces x"),
        ("PUT", "/api/v1/namespaces/x/finalize", "update namespaces x (finalize)"),
        ("DELETE", "/api/v1/namespaces/a/pods", "deletecollection pods in a"),
        ("POST", "/api/v1/namespaces/a/configmaps", "create configmaps in a"),
        ("GET", "/version", "get /version"),
        ("GET", "/apis/apps/v1", "get /apis/apps/v1"),
    ],
)
def test_requests_are_named_like_rbac_names_them(method: str, target: str, described: str) -> None:
    assert parse_request(method, target).verb_and_target() == described


def test_a_request_spells_its_resource_and_subresource_as_rbac_rules_do() -> None:
    """One spelling, used by the RBAC audit's needs and by ``OperatorUpgrade.assert_quiet(allow=)``."""
    from ktest.rbac_audit.needs import need_of

    status = parse_request("PATCH", "/apis/apps/v1/namespaces/a/deployments/d/status")
    plain = parse_request("GET", "/api/v1/namespaces/a/configmaps/c")
    assert (status.resource_path, plain.resource_path) == ("deployments/status", "configmaps")
    need = need_of(status)
    assert need is not None and need.resource_path == status.resource_path


def test_field_manager_and_resource_version_come_from_the_query() -> None:
    request = parse_request("PATCH", "/api/v1/namespaces/a/configmaps/c?fieldManager=op&resourceVersion=7")
    assert (request.field_manager, request.resource_version) == ("op", "7")
    assert request.qualified_resource == "configmaps"


def test_a_call_is_its_request_with_the_answer() -> None:
    """A recorded call's verb, resource and object are its own fields, the request's as the proxy
    named it; ``call.request`` reads as that request, and the call adds what came back."""
    from ktest.proxy.api_request import ApiRequest

    request = parse_request("PATCH", "/apis/example.com/v1/namespaces/ns/webapps/shop/status?fieldManager=op")
    call = Traffic("op").begin(request, "op/v1.0 (linux)")
    assert isinstance(call, ApiRequest) and call.request is call
    assert (call.verb, call.resource, call.namespace, call.name, call.subresource, call.field_manager) == (
        "patch", "webapps", "ns", "shop", "status", "op"
    )
    assert call.is_write and call.object_key() == ("webapps", "ns", "shop")
    call.status = 409
    assert call.describe(origin=call.at) == "+0.00s patch webapps ns/shop (status) -> 409 ua=op/v1.0 fm=op"


def record(traffic: Traffic, method: str, target: str, status: int = 200) -> None:
    call = traffic.begin(parse_request(method, target), "test-agent")
    call.status = status


def test_filters_counters_and_kinds() -> None:
    traffic = Traffic("op", resolve_kind=lambda kind: {"webapps"} if kind == "WebApp" else set())
    record(traffic, "GET", "/apis/example.com/v1/namespaces/ns/webapps/shop")
    record(traffic, "PATCH", "/apis/example.com/v1/namespaces/ns/webapps/shop/status")
    record(traffic, "PATCH", "/apis/example.com/v1/namespaces/ns/webapps/other")
    record(traffic, "PUT", "/api/v1/namespaces/ns/configmaps/shop", status=409)
    assert [c.name for c in traffic.writes(kind="WebApp")] == ["shop", "other"]
    assert len(traffic.writes(name="shop")) == 2  # the WebApp's status and the ConfigMap
    assert traffic.count(kind="WebApp", subresource="") == 2
    assert traffic.count(verb=["get", "update"]) == 2
    assert traffic.per_second(kind="WebApp") > 0
    mark = traffic.mark()
    record(traffic, "DELETE", "/apis/example.com/v1/namespaces/ns/webapps/shop")
    assert [c.verb for c in traffic.calls(since=mark)] == ["delete"]
    assert traffic.summary() == "patch webapps x2, get webapps x1, update configmaps x1, delete webapps x1"
    assert "update configmaps ns/shop -> 409" in traffic.describe()


def test_the_record_forgets_its_oldest_calls_but_marks_stay_valid(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(traffic_module, "MAX_CALLS", 10)
    traffic = Traffic("op")
    for index in range(8):
        record(traffic, "GET", f"/api/v1/namespaces/ns/configmaps/c{index}")
    mark = traffic.mark()
    for index in range(8, 12):
        record(traffic, "GET", f"/api/v1/namespaces/ns/configmaps/c{index}")
    assert len(traffic) == 12 and len(traffic.calls()) == 6  # 11 > 10: halved to 5, then one more
    assert [c.name for c in traffic.calls(since=mark)] == ["c8", "c9", "c10", "c11"]
    assert [c.name for c in traffic.last(2)] == ["c10", "c11"]
