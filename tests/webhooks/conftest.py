"""Webhook tests on the session's cluster (the plugin's ``cluster``, ``namespace`` and
``webhooks`` fixtures): Python handlers, the Go manager of fixtures/go-webhook-manager run
as a subprocess, and a kopf operator's admission webhook server."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ktest.cluster import Cluster
from ktest.operators import OperatorHandle, build_go_binary, run_subprocess
from ktest.webhooks import Webhooks

ROOT = Path(__file__).resolve().parents[2]
GO_WEBHOOK_MANAGER = ROOT / "fixtures" / "go-webhook-manager"
GO_WEBHOOK_MANIFESTS = GO_WEBHOOK_MANAGER / "config" / "webhook"
GO_WEBHOOK_CRD = GO_WEBHOOK_MANAGER / "config" / "crd"
GADGETS_CRD = Path(__file__).parent / "crds" / "gadgets.yaml"
WIDGET_V1 = "webhooks.ktest.dev/v1"


@pytest.fixture(scope="session")
def go_webhook_manager() -> Path:
    """fixtures/go-webhook-manager, built once (cached across runs)."""
    return build_go_binary(GO_WEBHOOK_MANAGER)


@pytest.fixture(scope="session")
def gadgets(cluster: Cluster) -> str:
    return cluster.install_crds(GADGETS_CRD)[0]


def start_manager(manager: Path, cluster: Cluster, wh: Webhooks, *extra: str) -> OperatorHandle:
    """The Go manager serving on the port and with the certificate ``wh`` expects."""
    return run_subprocess(
        [manager, *wh.controller_runtime_args(), "--health-probe-bind-address=127.0.0.1:{port}", *extra],
        cluster,
        ready_http="http://127.0.0.1:{port}/readyz",
    )


@pytest.fixture
def go_webhooks(cluster: Cluster, webhooks: Any, go_webhook_manager: Path) -> Iterator[Webhooks]:
    """The Go manager's webhooks installed (scoped to the test's namespace) and served by it."""
    wh = webhooks(GO_WEBHOOK_MANIFESTS, GO_WEBHOOK_CRD, start=False)
    with start_manager(go_webhook_manager, cluster, wh):
        wh.start()  # waits for the manager's server first: its conversion is called at once
        yield wh
        wh.close()  # while the manager still serves: the CRD's conversion goes back to None first


def widget(name: str, namespace: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": WIDGET_V1,
        "kind": "Widget",
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec,
    }
