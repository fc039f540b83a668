"""Requests the API server refuses with Retry-After are sent again, as client-go does.

The refusal is real: API Priority and Fairness rejects (429, Retry-After) a request of a
priority level with no seats while another request of that level runs; the one that runs is
a ConfigMap creation held by a validating webhook until the test lets it go.
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from builders import configmap

from ktest.cluster import Cluster
from ktest.cluster.rest import Rest, retry_after
from ktest.errors.api import ApiError
from ktest.wait import eventually
from ktest.webhooks import AdmissionRequest, Handlers

FLOWCONTROL = "flowcontrol.apiserver.k8s.io/v1"


class Holder:
    """A ConfigMap creation by ``user`` that a webhook keeps running until :meth:`release`."""

    def __init__(self, user: Cluster, namespace: str) -> None:
        self.entered = threading.Event()
        self._released = threading.Event()
        self._user, self._namespace = user, namespace
        self._thread: threading.Thread | None = None
        self.handlers = Handlers()

        @self.handlers.validate("", "v1", "configmaps", operations=("CREATE",))
        def hold(request: AdmissionRequest) -> None:
            if request.object["metadata"]["name"] == "held":
                self.entered.set()
                self._released.wait(20)

    def start(self) -> None:
        held = configmap("held", self._namespace)
        self._thread = threading.Thread(target=self._user.create, args=(held,), daemon=True)
        self._thread.start()
        assert self.entered.wait(20), "the webhook never received the held creation"

    def release(self) -> None:
        self._released.set()
        if self._thread is not None:
            self._thread.join(20)


@pytest.fixture
def throttled(cluster: Cluster, namespace: str, webhooks: Any) -> Iterator[tuple[Cluster, Holder]]:
    """A user whose requests go to a priority level without seats (one runs at a time, the
    others are rejected at once), and a :class:`Holder` that can keep its one request running."""
    name = f"throttled-{namespace}"[:63]
    user = cluster.user(name)
    rules = [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "create"]}]
    cluster.apply(
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "Role",
            "metadata": {"name": "configmaps", "namespace": namespace},
            "rules": rules,
        }
    )
    cluster.apply(
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": {"name": "configmaps", "namespace": namespace},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "configmaps"},
            "subjects": [{"kind": "User", "name": name}],
        }
    )
    limited = {
        "nominalConcurrencyShares": 0,
        "lendablePercent": 0,
        "borrowingLimitPercent": 0,
        "limitResponse": {"type": "Reject"},
    }
    level = cluster.apply(
        {
            "apiVersion": FLOWCONTROL,
            "kind": "PriorityLevelConfiguration",
            "metadata": {"name": name},
            "spec": {"type": "Limited", "limited": limited},
        }
    )
    everything = {"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"], "namespaces": ["*"]}
    everything["clusterScope"] = True
    schema = cluster.apply(
        {
            "apiVersion": FLOWCONTROL,
            "kind": "FlowSchema",
            "metadata": {"name": name},
            "spec": {
                "priorityLevelConfiguration": {"name": name},
                "matchingPrecedence": 100,
                "rules": [
                    {"subjects": [{"kind": "User", "user": {"name": name}}], "resourceRules": [everything]}
                ],
            },
        }
    )
    holder = Holder(user, namespace)
    webhooks(handlers=holder.handlers)
    cluster.create(configmap("target", namespace, {"k": "v"}))
    try:
        eventually(  # the API server has taken the flow schema in
            lambda: any(
                c["type"] == "Dangling" and c["status"] == "False"
                for c in cluster.get(schema).get("status", {}).get("conditions", [])
            ),
            timeout=30,
        )
        yield user, holder
    finally:
        holder.release()
        cluster.delete(schema, missing_ok=True)
        cluster.delete(level, missing_ok=True)


def refused_status(user: Cluster, namespace: str) -> int | None:
    """The status of one GET of the user's, sent once: None when it was served."""
    try:
        Rest(user.api_client, retries=0).request("GET", f"/api/v1/namespaces/{namespace}/configmaps/target")
    except ApiError as error:
        return error.status
    return None


def test_a_request_refused_with_retry_after_is_sent_again_until_served(
    throttled: tuple[Cluster, Holder], namespace: str, caplog: pytest.LogCaptureFixture
) -> None:
    user, holder = throttled
    holder.start()
    eventually(lambda: refused_status(user, namespace) == 429, timeout=30)  # the refusal is real

    class ReleaseOnRetry(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            threading.Thread(target=holder.release, daemon=True).start()

    handler = ReleaseOnRetry(level=logging.DEBUG)
    rest_log = logging.getLogger("ktest.cluster.rest")
    rest_log.addHandler(handler)
    caplog.set_level(logging.DEBUG, logger="ktest.cluster.rest")
    try:
        served = user.get(configmap("target", namespace))
    finally:
        rest_log.removeHandler(handler)
    assert served["data"] == {"k": "v"}
    retries = [r.getMessage() for r in caplog.records if r.name == "ktest.cluster.rest"]
    assert retries and "429 Too Many Requests with Retry-After; sending it again" in retries[0], retries


def test_a_request_still_refused_after_its_retries_says_so(
    throttled: tuple[Cluster, Holder], namespace: str
) -> None:
    user, holder = throttled
    holder.start()
    eventually(lambda: refused_status(user, namespace) == 429, timeout=30)
    path = f"/api/v1/namespaces/{namespace}/configmaps/target"
    with pytest.raises(ApiError) as refused:
        Rest(user.api_client, retries=2).request("GET", path)
    message = str(refused.value)
    assert refused.value.status == 429, message
    assert message.startswith(f"GET {path}: 429 Too Many Requests: "), message
    said = r"\(the API server asked to retry; 3 attempts over \d+\.\d s were all refused\)$"
    assert re.search(said, message), message


def test_only_429_and_5xx_answers_with_whole_seconds_to_wait_are_sent_again() -> None:
    assert retry_after(429, {"Retry-After": "1"}) == 1.0
    assert retry_after(503, {"Retry-After": " 2 "}) == 2.0
    assert retry_after(409, {"Retry-After": "1"}) is None  # a conflict needs a new body, not a resend
    assert retry_after(503, {}) is None  # no sign that the request was not served
    assert retry_after(503, {"Retry-After": "Wed, 21 Oct 2026 07:28:00 GMT"}) is None
