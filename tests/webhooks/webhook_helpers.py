"""Paths and helpers of the webhook tests (a module of its own: several conftest.py files
are loaded in one run, so ``from conftest import ...`` would be ambiguous). The handler sets
other folders serve too are in tests/webhook_handlers.py."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from builders import custom_object

from ktest.cluster import Cluster
from ktest.operators import OperatorHandle, run_subprocess
from ktest.webhooks import Webhooks

ROOT = Path(__file__).resolve().parents[2]
GO_WEBHOOK_MANAGER = ROOT / "fixtures" / "go-webhook-manager"
GO_WEBHOOK_MANIFESTS = GO_WEBHOOK_MANAGER / "config" / "webhook"
GO_WEBHOOK_CRD = GO_WEBHOOK_MANAGER / "config" / "crd"
WIDGET_V1 = "webhooks.ktest.dev/v1"


def start_manager(manager: Path, cluster: Cluster, wh: Webhooks, *extra: str) -> OperatorHandle:
    """The Go manager serving on the port and with the certificate ``wh`` expects."""
    return run_subprocess(
        [manager, *wh.controller_runtime_args(), "--health-probe-bind-address=127.0.0.1:{port}", *extra],
        cluster,
        ready_http="http://127.0.0.1:{port}/readyz",
    )


def gadget(name: str, namespace: str, **spec: Any) -> dict[str, Any]:
    """A Gadget of crds/gadgets.yaml (stored version v1)."""
    return custom_object("pyhooks.ktest.dev/v1", "Gadget", name, namespace, spec)


def widget(name: str, namespace: str, **spec: Any) -> dict[str, Any]:
    return custom_object(WIDGET_V1, "Widget", name, namespace, spec)

