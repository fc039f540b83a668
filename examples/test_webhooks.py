"""Admission and conversion webhooks, called by the real API server (on bare and on kind).

Two ways to serve them, one API (``ktest.webhooks.Webhooks``, or the ``webhooks`` fixture):

- the operator's own webhook server: here the Go controller-runtime manager of
  ``fixtures/go-webhook-manager`` (a defaulting + validating webhook and the v1<->v2
  conversion of Widgets, with kubebuilder's ``config/webhook/manifests.yaml``), started
  with ktest's certificate directory and port;
- Python handlers on ktest's own HTTPS server, for webhooks without a framework.

ktest rewrites each configuration to point at a server the API server can reach
(127.0.0.1 on bare, the kind network's gateway on kind), scopes admission webhooks
to the test's namespace, and waits until the API server has really called them.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ktest.assertions import assert_converts, assert_defaulted, assert_rejected
from ktest.cluster import Cluster
from ktest.operators import build_go_binary, run_subprocess
from ktest.webhooks import AdmissionRequest, Denied, Handlers, Webhooks

MANAGER = Path(__file__).resolve().parent.parent / "fixtures" / "go-webhook-manager"


@pytest.fixture
def widget_webhooks(cluster: Cluster, webhooks: Any) -> Iterator[Webhooks]:
    """The Go manager serving its webhooks for this test."""
    wh = webhooks(MANAGER / "config" / "webhook", MANAGER / "config" / "crd", start=False)
    manager = [
        build_go_binary(MANAGER),
        *wh.controller_runtime_args(),
        "--health-probe-bind-address=127.0.0.1:{port}",
    ]
    with run_subprocess(manager, cluster, ready_http="http://127.0.0.1:{port}/readyz"):
        wh.start()  # waits for the manager's server, installs, sees the API server call
        yield wh
        wh.close()  # before the manager stops: the CRD's conversion goes back to None


def widget(name: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "webhooks.ktest.dev/v1", "kind": "Widget", "metadata": {"name": name}, "spec": spec}


def test_the_go_manager_validates_defaults_and_converts_widgets(
    cluster: Cluster, namespace: str, widget_webhooks: Webhooks
) -> None:
    too_many = widget("too-many", schedule="*/5 * * * *", replicas=11)
    too_many["metadata"]["namespace"] = namespace
    assert_rejected(
        lambda: cluster.create(too_many),
        "spec.replicas: Invalid value: 11: must be between 1 and 10",
        webhook="vwidget-v1.kb.io",
        cluster=cluster,
        obj=too_many,
        webhooks=widget_webhooks,
    )

    sent = widget("nightly", schedule="30 2 * * 1-5")
    created = cluster.create(sent, namespace=namespace)
    assert_defaulted(created, {"spec": {"replicas": 1, "size": "small"}}, sent=sent)

    assert_converts(
        cluster,
        created,
        to="v2",
        expect={"spec": {"schedule": {"minute": "30", "hour": "2", "dayOfWeek": "1-5"}}},
    )


def test_python_handlers_validate_and_default(cluster: Cluster, namespace: str, webhooks: Any) -> None:
    handlers = Handlers()

    @handlers.validate("", "v1", "configmaps")
    def no_passwords(request: AdmissionRequest) -> None:
        if "password" in (request.object.get("data") or {}):
            raise Denied("data.password: passwords belong in Secrets")

    @handlers.mutate("", "v1", "configmaps")
    def team_label(request: AdmissionRequest) -> None:
        request.object["metadata"].setdefault("labels", {}).setdefault("team", "platform")

    webhooks(handlers=handlers)
    leaky = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "leaky", "namespace": namespace},
        "data": {"password": "hunter2"},
    }
    assert_rejected(
        lambda: cluster.create(leaky), "passwords belong in Secrets", status=403, cluster=cluster, obj=leaky
    )
    created = cluster.create(
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "settings"}}, namespace=namespace
    )
    assert_defaulted(created, {"metadata": {"labels": {"team": "platform"}}})
