"""Fault rules: what each does to a request, counting, seeds, stacking, bad rules."""

from __future__ import annotations

import json
import threading
import time
import warnings

import pytest
import urllib3
from builders import configmap
from kubernetes.client.exceptions import ApiException

from ktest import faults
from ktest.cluster import Cluster
from ktest.proxy import FaultRuleError, OperatorProxy, UnusedFaultRuleWarning
from ktest.wait import eventually


def status_of(call: object) -> int:
    with pytest.raises(ApiException) as caught:
        call()  # type: ignore[operator]
    return int(caught.value.status)


def test_conflict_answers_writes_a_counted_number_of_times(
    proxy: OperatorProxy, admin: Cluster, ns: str
) -> None:
    admin.create(configmap("c", data={"a": "1"}), namespace=ns)
    ref = ("v1", "ConfigMap", "c", ns)
    with proxy.faults.inject(faults.conflict("configmaps", times=2)) as injection:
        assert status_of(lambda: proxy.cluster.patch(ref, {"data": {"a": "2"}})) == 409
        assert status_of(lambda: proxy.cluster.patch(ref, {"data": {"a": "2"}})) == 409
        proxy.cluster.patch(ref, {"data": {"a": "2"}})
        assert proxy.cluster.get(ref)["data"] == {"a": "2"}  # reads are not matched
    assert injection.states[0].fired == 2 and injection.states[0].matched == 3
    patches = proxy.traffic.calls(verb="patch", name="c")
    assert [(c.status, c.answered_by_fault) for c in patches] == [(409, True), (409, True), (200, False)]
    assert admin.get(ref)["data"] == {"a": "2"}  # the refused patches never reached the server


@pytest.mark.slow
def test_throttle_sends_retry_after_and_ends_with_the_block(proxy: OperatorProxy, ns: str) -> None:
    throttled = proxy.faults.inject(faults.throttle("ConfigMap", retry_after=3))
    with throttled, pytest.raises(ApiException) as caught:
        proxy.cluster.list("v1", "ConfigMap", ns)
    assert caught.value.status == 429
    assert proxy.traffic.calls(verb="list")[-1].retry_after == 3
    assert json.loads(caught.value.body)["details"]["retryAfterSeconds"] == 3
    assert proxy.cluster.list("v1", "ConfigMap", ns) == []  # the rule ended with its block


@pytest.mark.parametrize("code", [500, 503])
def test_server_errors(proxy: OperatorProxy, ns: str, code: int) -> None:
    with proxy.faults.inject(faults.server_error(code, verb="list", times=1)):
        assert status_of(lambda: proxy.cluster.list("v1", "ConfigMap", ns)) == code
        proxy.cluster.list("v1", "ConfigMap", ns)


def test_latency_holds_the_request(proxy: OperatorProxy, ns: str) -> None:
    with proxy.faults.inject(faults.latency(0.3, "configmaps", verb="list")):
        started = time.monotonic()
        proxy.cluster.list("v1", "ConfigMap", ns)
        assert time.monotonic() - started >= 0.3
    call = proxy.traffic.calls(verb="list", resource="configmaps")[-1]
    assert call.status == 200 and call.fault == "latency(0.3s, configmaps, verb=list)"


def test_reset_drops_the_connection(proxy: OperatorProxy, ns: str) -> None:
    pool = _pool(proxy)
    with proxy.faults.inject(faults.reset("configmaps", times=1)):
        with pytest.raises(urllib3.exceptions.ProtocolError):
            pool.request("GET", f"/api/v1/namespaces/{ns}/configmaps")
        assert pool.request("GET", f"/api/v1/namespaces/{ns}/configmaps").status == 200
    assert proxy.traffic.calls(resource="configmaps")[-2].error == "connection reset"
    pool.close()


def test_gone_ends_open_watches_and_answers_the_next_watch_with_410(proxy: OperatorProxy, ns: str) -> None:
    pool = _pool(proxy)
    first = pool.request("GET", f"/api/v1/namespaces/{ns}/configmaps?watch=true", preload_content=False)
    eventually(lambda: proxy.traffic.open_watches("configmaps"), timeout=5)
    with proxy.faults.inject(faults.gone("configmaps")):
        assert first.read() == b""  # ended cleanly (terminal chunk), as the server ends a watch
        second = pool.request("GET", f"/api/v1/namespaces/{ns}/configmaps?watch=true&resourceVersion=1")
        event = json.loads(second.data)
        assert event["type"] == "ERROR" and event["object"]["code"] == 410
        assert event["object"]["reason"] == "Expired"
    closed, answered = proxy.traffic.calls(verb="watch")
    assert closed.closed_by == "gone(configmaps, times=1)"
    assert answered.answered_by_fault and answered.event_types == {"ERROR": 1}
    pool.close()


def test_a_watch_in_flight_is_closed_too(proxy: OperatorProxy, ns: str) -> None:
    pool = _pool(proxy)
    answers: list[bytes] = []
    with proxy.faults.inject(faults.latency(1.0, "configmaps", verb="watch")):
        path = f"/api/v1/namespaces/{ns}/configmaps?watch=1"
        watcher = threading.Thread(target=lambda: answers.append(pool.request("GET", path).data), daemon=True)
        watcher.start()
        eventually(lambda: proxy.traffic.calls(verb="watch"), timeout=5)  # sent, held, not yet answered
        with proxy.faults.inject(faults.close_watches("configmaps")) as injection:
            assert injection.states[0].fired == 1
        watcher.join(5)
    assert answers == [b""]  # an empty watch: it ended before any event
    (call,) = proxy.traffic.calls(verb="watch")
    assert call.status == 200 and call.closed_by == "close_watches(configmaps)"
    pool.close()


def test_close_watches_every_interval(proxy: OperatorProxy, ns: str) -> None:
    pool = _pool(proxy)
    ended: list[float] = []

    def watch_forever() -> None:
        while len(ended) < 2:
            response = pool.request(
                "GET", f"/api/v1/namespaces/{ns}/configmaps?watch=true", preload_content=False
            )
            response.read()
            ended.append(time.monotonic())

    with proxy.faults.inject(faults.close_watches("configmaps", every=0.3)):
        watcher = threading.Thread(target=watch_forever, daemon=True)
        watcher.start()
        eventually(lambda: len(ended) >= 2, timeout=5)
    watcher.join(2)
    watches = proxy.traffic.calls(verb="watch")
    assert len(watches) == len(ended) == 2, f"the thread ended 2 watches; the proxy recorded {watches}"
    assert [c.closed_by for c in watches] == ["close_watches(configmaps, every=0.3s)"] * 2
    pool.close()


def test_probabilistic_rules_replay_from_their_seed(proxy: OperatorProxy, ns: str) -> None:
    def outcomes(seed: int) -> list[int]:
        with proxy.faults.inject(faults.server_error(503, "configmaps", probability=0.5, seed=seed)):
            codes = []
            for _ in range(12):
                try:
                    proxy.cluster.list("v1", "ConfigMap", ns)
                    codes.append(200)
                except ApiException as error:
                    codes.append(error.status)
            return codes

    first = outcomes(7)
    assert 200 in first and 503 in first
    assert outcomes(7) == first
    unseeded = faults.throttle(probability=0.1)
    assert unseeded.seed is not None and f"seed={unseeded.seed}" in unseeded.describe()


def test_rules_stack_latency_adds_and_the_first_answer_wins(proxy: OperatorProxy, ns: str) -> None:
    proxy.cluster.list("v1", "ConfigMap", ns)  # discovery is never matched, but read it first anyway
    with proxy.faults.inject(faults.latency(0.1, verb="list")), proxy.faults.inject(
        faults.latency(0.1, verb="list"), faults.conflict(verb="list", times=1), faults.server_error(500)
    ):
        started = time.monotonic()
        assert status_of(lambda: proxy.cluster.list("v1", "ConfigMap", ns)) == 409
        assert time.monotonic() - started >= 0.2
        assert status_of(lambda: proxy.cluster.list("v1", "ConfigMap", ns)) == 500


def test_a_rule_that_matched_nothing_is_reported_at_the_end_of_its_block(
    proxy: OperatorProxy, ns: str
) -> None:
    proxy.cluster.list("v1", "ConfigMap", ns)
    unused = r"conflict\(secrets\) matched no request of operator 'test-operator'.*it made: list configmaps x"
    with pytest.warns(UnusedFaultRuleWarning, match=unused), proxy.faults.inject(faults.conflict("secrets")):
        proxy.cluster.list("v1", "ConfigMap", ns)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with proxy.faults.inject(faults.conflict("configmaps", verb="list")), pytest.raises(ApiException):
            proxy.cluster.list("v1", "ConfigMap", ns)


def test_unknown_resources_are_rejected_naming_the_valid_ones(proxy: OperatorProxy) -> None:
    message = r"no resource 'configmapz'\. Did you mean 'configmaps'.*served: .*configmaps.*deployments"
    with pytest.raises(FaultRuleError, match=message), proxy.faults.inject(faults.conflict("configmapz")):
        pass
    assert proxy.fault_set.active == []


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: faults.conflict(verb="patchh"), r"unknown verb 'patchh'; valid verbs: get, list, watch, "),
        (lambda: faults.throttle(times=0), r"times=0 must be a whole number of at least 1"),
        (lambda: faults.server_error(404), r"status=404 must be a 5xx"),
        (lambda: faults.latency(-1), r"seconds=-1 must be a finite number of seconds, more than 0"),
        (lambda: faults.reset(probability=2), r"probability=2 must be more than 0 and at most 1"),
        (lambda: faults.close_watches(every=0), r"every=0 must be a finite number"),
        (lambda: faults.gone(""), r"resource must be a resource or kind name"),
    ],
)
def test_bad_rules_are_rejected_when_made(make: object, message: str) -> None:
    with pytest.raises(FaultRuleError, match=message):
        make()  # type: ignore[operator]


def _pool(proxy: OperatorProxy) -> urllib3.HTTPSConnectionPool:
    configuration = proxy.cluster.api_client.configuration
    return urllib3.HTTPSConnectionPool(
        "127.0.0.1", proxy.port, ca_certs=configuration.ssl_ca_cert, cert_file=configuration.cert_file,
        key_file=configuration.key_file, assert_hostname=False, retries=False,
    )


def test_a_misspelt_target_argument_is_named_with_the_right_one() -> None:
    from ktest.proxy.rules import FaultRuleError

    with pytest.raises(FaultRuleError, match=r"no argument namspace='shop' \(did you mean namespace=\?\)"):
        faults.conflict("webapps", namspace="shop")  # type: ignore[call-arg]
