"""assert_rejected, assert_defaulted, assert_converts: each passes on correct webhooks and
fails, with a message saying what is wrong, on wrong ones (Python handlers, real API server)."""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from typing import Any

import pytest
from builders import configmap
from webhook_handlers import configmap_validator, forbidden_key_guard, gadget_conversion
from webhook_helpers import gadget

from ktest.assertions import assert_converts, assert_defaulted, assert_rejected
from ktest.cluster import Cluster
from ktest.webhooks import AdmissionRequest


@pytest.fixture
def guarded(webhooks: Any) -> Any:
    """Denies ConfigMaps holding 'forbidden' (403), defaults label tier=gold."""
    return webhooks(handlers=forbidden_key_guard({"tier": "gold"}))


def test_assert_rejected_passes_on_a_denial(cluster: Cluster, namespace: str, guarded: Any) -> None:
    bad = configmap("bad", namespace, {"forbidden": "1"})
    error = assert_rejected(
        lambda: cluster.create(bad),
        "data.forbidden is not allowed",
        status=403,
        webhook="no-forbidden-key.configmaps.core",
        cluster=cluster,
        obj=bad,
    )
    assert error.status == 403
    assert_rejected(lambda: cluster.create(bad), re.compile(r"data\.\w+ is not allowed"), status="Forbidden")


def test_assert_rejected_fails_when_the_request_succeeds(
    cluster: Cluster, namespace: str, guarded: Any
) -> None:
    fine = configmap("fine", namespace, {"allowed": "1"})
    message = _failure_of(
        lambda: cluster.create(fine), "not allowed", cluster=cluster, obj=fine, webhooks=guarded
    )
    assert message.startswith("ConfigMap fine was not rejected\n"), message
    assert "the request succeeded" in message
    assert re.search(
        r"validating webhook no-forbidden-key.configmaps.core .*CREATE ConfigMap .*/fine -> allowed", message
    ), message


def test_assert_rejected_fails_on_the_wrong_message_webhook_or_status(
    cluster: Cluster, namespace: str, guarded: Any
) -> None:
    bad = configmap("bad", namespace, {"forbidden": "1"})
    message = _failure_of(
        lambda: cluster.create(bad), "must be at most 10", status=422, webhook="other.example.com"
    )
    assert "the message does not contain 'must be at most 10'" in message
    assert (
        "expected a denial by webhook 'other.example.com', got one by webhook "
        "'no-forbidden-key.configmaps.core'" in message
    )
    assert "expected HTTP status 422, got 403" in message
    assert (
        'API error: 403 Forbidden: admission webhook "no-forbidden-key.configmaps.core" denied the request: '
        "data.forbidden is not allowed" in message
    )


def test_assert_rejected_fails_when_something_was_stored(
    cluster: Cluster, namespace: str, guarded: Any
) -> None:
    first = configmap("first", namespace, {"ok": "1"})

    def create_then_fail() -> None:
        cluster.create(first)  # stored...
        cluster.create(configmap("second", namespace, {"forbidden": "1"}))  # ...then a rejected request

    with pytest.raises(AssertionError, match="it was stored although the request was rejected"):
        assert_rejected(create_then_fail, "not allowed", cluster=cluster, obj=first)


def test_a_slow_webhook_is_reported_not_silently_waited_for(
    cluster: Cluster, namespace: str, webhooks: Any
) -> None:
    def slow(request: AdmissionRequest) -> None:
        time.sleep(1.5)

    # timeoutSeconds 1: the API server's default would be 10 s
    wh = webhooks(handlers=configmap_validator(slow), timeout_seconds=1)
    message = _failure_of(lambda: cluster.create(configmap("late", namespace)), "anything", webhooks=wh)
    assert "webhook 'slow.configmaps.core' could not be called" in message
    assert "past timeoutSeconds=1, the API server gave up on it (failurePolicy Fail)" in message


def test_assert_defaulted_passes_and_fails(cluster: Cluster, namespace: str, guarded: Any) -> None:
    sent = configmap("plain", namespace, {"a": "1"})
    created = cluster.create(sent)
    assert_defaulted(created, {"metadata": {"labels": {"tier": "gold"}}}, sent=sent)
    assert_defaulted(
        ("v1", "ConfigMap", "plain", namespace), {"metadata": {"labels": {"tier": "gold"}}}, cluster=cluster
    )
    with pytest.raises(AssertionError) as raised:
        assert_defaulted(created, {"metadata": {"labels": {"tier": "silver", "zone": "a"}}})
    message = str(raised.value)
    assert message.startswith("ConfigMap plain was not defaulted as expected"), message
    assert "metadata.labels.tier: expected 'silver', got 'gold' (not filled in as expected)" in message
    assert "metadata.labels.zone: missing" in message
    chosen = configmap("chosen", namespace)
    chosen["metadata"]["labels"] = {"tier": "gold"}
    with pytest.raises(AssertionError, match=r"metadata\.labels\.tier was in the request itself"):
        assert_defaulted(cluster.create(chosen), {"metadata": {"labels": {"tier": "gold"}}}, sent=chosen)


@pytest.mark.slow
def test_assert_converts_fails_on_a_lossy_conversion(
    cluster: Cluster, namespace: str, webhooks: Any, gadgets: str
) -> None:
    webhooks(handlers=gadget_conversion(lossy=True))
    cluster.create(gadget("g", namespace, size="10Gi", color="red"))
    ref = ("pyhooks.ktest.dev/v1", "Gadget", "g", namespace)
    with pytest.raises(AssertionError) as raised:
        assert_converts(cluster, ref, to="v2", expect={"spec": {"sizeGi": 10}})
    message = str(raised.value)
    assert message.startswith("Gadget g did not survive the round trip"), message
    assert "after v1 -> v2 -> v1:" in message and "spec.color: lost (was 'red')" in message
    with pytest.raises(
        AssertionError,
        match=r"Gadget g converted to v2 is not as expected(.|\n)*"
        r"spec.sizeGi: expected 11, got 10",
    ):
        assert_converts(cluster, ref, to="v2", expect={"spec": {"sizeGi": 11}})


def _failure_of(action: Callable[[], object], message: str, **expected: Any) -> str:
    """The message of the AssertionError ``assert_rejected`` raises for ``action``."""
    with pytest.raises(AssertionError) as raised:
        assert_rejected(action, message, **expected)
    return str(raised.value)
