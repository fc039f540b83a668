"""The Go controller-runtime manager of fixtures/go-webhook-manager (defaulting, validating and
v1<->v2 conversion webhooks, kubebuilder manifests), run as a subprocess against the real API server."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from webhook_helpers import GO_WEBHOOK_MANIFESTS, WIDGET_V1, start_manager, widget

from ktest.assertions import assert_converts, assert_defaulted, assert_rejected
from ktest.cluster import Cluster
from ktest.errors import WebhookError
from ktest.webhooks import Webhooks


def test_invalid_widget_is_rejected_with_the_webhooks_message(
    cluster: Cluster, namespace: str, go_webhooks: Webhooks
) -> None:
    bad = widget("too-many", namespace, schedule="*/5 * * * *", replicas=11)
    error = assert_rejected(
        lambda: cluster.create(bad),
        "spec.replicas: Invalid value: 11: must be between 1 and 10",
        status="Invalid",
        webhook="vwidget-v1.kb.io",
        cluster=cluster,
        obj=bad,
        webhooks=go_webhooks,
    )
    assert error.status == 422


def test_defaults_are_filled_in(cluster: Cluster, namespace: str, go_webhooks: Webhooks) -> None:
    sent = widget("minimal", namespace, schedule="0 * * * *")
    created = cluster.create(sent)
    assert_defaulted(created, {"spec": {"replicas": 1, "size": "small"}}, sent=sent)


def test_conversion_round_trip(cluster: Cluster, namespace: str, go_webhooks: Webhooks) -> None:
    cluster.create(widget("nightly", namespace, schedule="30 2 * * 1-5", replicas=3, size="large"))
    assert_converts(
        cluster,
        (WIDGET_V1, "Widget", "nightly", namespace),
        to="v2",
        expect={"spec": {"schedule": {"minute": "30", "hour": "2", "dayOfWeek": "1-5"}, "replicas": 3}},
    )
    # and the other way: created at v2, stored (and read) at v1
    cluster.create(
        {
            "apiVersion": "webhooks.ktest.dev/v2",
            "kind": "Widget",
            "metadata": {"name": "hourly", "namespace": namespace},
            "spec": {"schedule": {"minute": "0"}},
        }
    )
    stored = cluster.get((WIDGET_V1, "Widget", "hourly", namespace))
    assert stored["spec"] == {"schedule": "0 * * * *", "replicas": 1, "size": "small"}
    conversions = [call for call in go_webhooks.calls if call.kind == "conversion"]
    assert conversions and all(not call.error for call in conversions)


def test_a_stopped_operator_is_reported_as_unreachable_not_as_a_rejection(
    cluster: Cluster, namespace: str, webhooks: Any, go_webhook_manager: Path, widgets: str
) -> None:
    # Admission only: a conversion webhook is cluster-wide, and one without a server would also
    # break the conversions other tests' namespaces need while they are deleted.
    wh = webhooks(GO_WEBHOOK_MANIFESTS, wait_for_operator=False)  # no operator started
    bad = widget("nobody-home", namespace, schedule="x")
    with pytest.raises(AssertionError) as raised:
        assert_rejected(lambda: cluster.create(bad), "must have 5 fields", webhooks=wh)
    message = str(raised.value)
    assert "webhook 'mwidget-v1.kb.io' could not be called" in message
    assert "failurePolicy Fail" in message
    assert re.search(r"is unreachable \(connection refused\): is the operator running", message), message
    assert (
        "ktest: the operator's webhook server at 127.0.0.1" in message
    )  # the API server relays ktest's word
    assert (
        "unreachable" in wh.report()
        and "the API server failed the request (failurePolicy Fail)" in wh.report()
    )


def test_failure_policy_ignore_lets_requests_through_and_says_so(
    cluster: Cluster, namespace: str, webhooks: Any, tmp_path: Path, widgets: str
) -> None:
    manifests = (
        (GO_WEBHOOK_MANIFESTS / "manifests.yaml")
        .read_text()
        .replace("failurePolicy: Fail", "failurePolicy: Ignore")
    )
    (tmp_path / "ignore.yaml").write_text(manifests)
    wh = webhooks(tmp_path / "ignore.yaml", wait_for_operator=False)  # no operator: every call fails
    created = cluster.create(widget("unchecked", namespace, schedule="x", replicas=99))
    assert created["spec"]["replicas"] == 99  # neither defaulted nor validated
    report = wh.report()
    assert (
        "the API server ignored the failure (failurePolicy Ignore): the request went on WITHOUT this webhook"
        in report
    )


def test_an_operator_with_its_own_certificate_is_refused(
    cluster: Cluster, webhooks: Any, go_webhook_manager: Path, tmp_path: Path
) -> None:
    from ktest.webhooks.tls import WebhookTLS

    wh = webhooks(GO_WEBHOOK_MANIFESTS, start=False)
    WebhookTLS(tmp_path, ["127.0.0.1"])  # another CA's certificate, in controller-runtime's file names
    # the last --webhook-cert-dir wins: the manager serves the other certificate
    refused = pytest.raises(
        WebhookError, match=r"presents a certificate ktest did not issue \(.*\); give it ktest's"
    )
    with start_manager(go_webhook_manager, cluster, wh, f"--webhook-cert-dir={tmp_path}"), refused:
        wh.start()  # waits for the operator first
    assert wh.installed.configurations == []  # nothing installed


def test_manifests_for_two_services_are_refused(cluster: Cluster, webhooks: Any, tmp_path: Path) -> None:
    text = (GO_WEBHOOK_MANIFESTS / "manifests.yaml").read_text()
    second = text.split("---")[2].replace("name: webhook-service", "name: other-service")
    (tmp_path / "two.yaml").write_text(text.split("---")[1] + "---" + second)
    with pytest.raises(
        WebhookError, match="point at 2 different Services: Service system/webhook-service:443"
    ):
        webhooks(tmp_path / "two.yaml")
    leftovers = [
        c["metadata"]["name"]
        for c in cluster.list("admissionregistration.k8s.io/v1", "MutatingWebhookConfiguration")
        if c["metadata"]["name"].startswith("mutating-webhook-configuration-test-manifests-for")
    ]
    assert leftovers == []  # nothing half-installed
