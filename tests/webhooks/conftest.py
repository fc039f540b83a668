"""Webhook tests on the session's cluster (the plugin's ``cluster``, ``namespace`` and
``webhooks`` fixtures): Python handlers, the Go manager of fixtures/go-webhook-manager run
as a subprocess, and a kopf operator's admission webhook server.

The Gadget and Widget CRDs are shared by the session, and some tests set their conversion
webhook: the API server then replaces the kind's storage, and while another test's webhook
set converts, it converts every test's objects of that kind. The tests of these kinds keep
to one pytest-xdist worker (``--dist loadgroup``, as ``make test`` runs them).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from webhook_handlers import GADGETS_CRD
from webhook_helpers import (
    GO_WEBHOOK_CRD,
    GO_WEBHOOK_MANAGER,
    GO_WEBHOOK_MANIFESTS,
    start_manager,
)

from ktest.cluster import Cluster
from ktest.operators import build_go_binary
from ktest.webhooks import Webhooks

_SHARED_KIND_FIXTURES = frozenset({"gadgets", "widgets", "go_webhooks"})


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist reads the groups
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if _SHARED_KIND_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.xdist_group("webhook-kinds"))


@pytest.fixture(scope="session")
def go_webhook_manager() -> Path:
    """fixtures/go-webhook-manager, built once (cached across runs)."""
    return build_go_binary(GO_WEBHOOK_MANAGER)


@pytest.fixture(scope="session")
def gadgets(cluster: Cluster) -> str:
    return cluster.install_crds(GADGETS_CRD)[0]


@pytest.fixture(scope="session")
def widgets(cluster: Cluster) -> str:
    """The Go manager's Widget CRD served, without its conversion webhook (tests that install only
    admission webhooks need the kind; a webhook set adds the conversion under its own field
    manager, which this plain install leaves alone)."""
    import yaml

    crd = yaml.safe_load((GO_WEBHOOK_CRD / "webhooks.ktest.dev_widgets.yaml").read_text())
    crd["spec"].pop("conversion", None)
    return cluster.install_crds(crd)[0]


@pytest.fixture
def go_webhooks(cluster: Cluster, webhooks: Any, go_webhook_manager: Path) -> Iterator[Webhooks]:
    """The Go manager's webhooks installed (scoped to the test's namespace) and served by it."""
    wh = webhooks(GO_WEBHOOK_MANIFESTS, GO_WEBHOOK_CRD, start=False)
    with start_manager(go_webhook_manager, cluster, wh):
        wh.start()  # waits for the manager's server first: its conversion is called at once
        yield wh
        wh.close()  # while the manager still serves: the CRD's conversion goes back to None first
