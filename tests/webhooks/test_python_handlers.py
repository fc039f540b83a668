"""Python handlers on ktest's own HTTPS server: validating, mutating and conversion,
called by the real API server."""

from __future__ import annotations

from typing import Any

import pytest
from builders import configmap
from webhook_handlers import configmap_validator, forbidden_key_guard, gadget_conversion
from webhook_helpers import gadget

from ktest.assertions import assert_converts, assert_defaulted
from ktest.cluster import Cluster
from ktest.errors.api import ApiError
from ktest.webhooks import AdmissionRequest

TEAM_LABEL = {"team": "platform"}


def test_python_handlers_validate_and_mutate(cluster: Cluster, namespace: str, webhooks: Any) -> None:
    wh = webhooks(handlers=forbidden_key_guard(TEAM_LABEL))
    created = cluster.create(configmap("settings", namespace, {"mode": "fast"}))
    assert_defaulted(
        created, {"metadata": {"labels": TEAM_LABEL}}, sent=configmap("settings", namespace)
    )
    with pytest.raises(ApiError) as denied:
        cluster.create(configmap("leaky", namespace, {"forbidden": "1"}))
    assert denied.value.status == 403, denied.value
    assert (
        'admission webhook "no-forbidden-key.configmaps.core" denied the request: '
        "data.forbidden is not allowed" in denied.value.message
    ), denied.value.message
    assert cluster.get_or_none(("v1", "ConfigMap", "leaky", namespace)) is None
    kinds = [(call.kind, call.allowed) for call in wh.calls]
    assert kinds == [("mutating", True), ("validating", True), ("mutating", True), ("validating", False)]


def test_webhooks_are_limited_to_the_test_namespace(cluster: Cluster, namespace: str, webhooks: Any) -> None:
    """A namespaceSelector term keeps one test's webhooks away from other tests' namespaces."""
    wh = webhooks(handlers=forbidden_key_guard(TEAM_LABEL))
    with cluster.namespace(prefix="other", background=True) as other:
        # neither denied nor mutated:
        created = cluster.create(configmap("free", other, {"forbidden": "fine-here"}))
    assert "team" not in (created["metadata"].get("labels") or {})
    assert len(wh.calls) == 0


def test_a_handler_that_raises_fails_the_test_with_its_traceback(
    cluster: Cluster, namespace: str, webhooks: Any
) -> None:
    def buggy(request: AdmissionRequest) -> None:
        raise KeyError("spec")

    wh = webhooks(handlers=configmap_validator(buggy))
    with pytest.raises(ApiError) as raised:
        cluster.create(configmap("x", namespace))
    assert (
        raised.value.status == 500
        and "the Python handler buggy raised KeyError: 'spec'" in raised.value.message
    )
    with pytest.raises(Exception, match="a Python webhook handler raised") as health:
        wh.check_handlers()
    assert "KeyError" in str(health.value)
    wh.server.handler_errors.clear()  # type: ignore[union-attr]  (the failure was the point of this test)


def test_python_conversion_round_trip(cluster: Cluster, namespace: str, webhooks: Any, gadgets: str) -> None:
    wh = webhooks(handlers=gadget_conversion())
    cluster.create(gadget("g", namespace, size="10Gi", color="red"))
    converted = assert_converts(
        cluster,
        ("pyhooks.ktest.dev/v1", "Gadget", "g", namespace),
        to="v2",
        expect={"spec": {"sizeGi": 10, "color": "red"}},
    )
    assert converted["apiVersion"] == "pyhooks.ktest.dev/v2"
    assert any(call.kind == "conversion" for call in wh.calls)
