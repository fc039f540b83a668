"""Settings a test sets through run_kopf(configure=...) win over the operator's own startup
handlers: an operator wiring its own webhook server is served by ktest's front server unchanged."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from builders import configmap, configmap_creation_webhook
from operator_helpers import SAMPLES

from ktest.cluster import Cluster
from ktest.errors.api import ApiError
from ktest.operators import run_kopf
from ktest.webhooks import Webhooks

OPERATOR = SAMPLES / "kopf_own_webhook_server.py"
WEBHOOK = configmap_creation_webhook(
    "sizes-kopf",
    "size.configmaps.ktest.dev",
    {"service": {"name": "sizes-operator", "namespace": "operators", "path": "/validate-size"}},
    failurePolicy="Fail",
)


def test_the_tests_settings_win_over_the_operators_startup_handler(admin: Cluster, ns: str) -> None:
    wh = Webhooks(admin, WEBHOOK, namespaces=[ns], host="127.0.0.1", name="own-server", ready_timeout=15)

    def serve_webhooks(settings: Any) -> None:
        settings.admission.server = wh.kopf_server()

    with run_kopf(OPERATOR, admin, namespaces=[ns], configure=serve_webhooks) as op, wh:
        admin.create(configmap("fine", ns, {"size": "small"}))
        with pytest.raises(ApiError) as rejected:
            admin.create(configmap("huge", ns, {"size": "huge"}))
        assert rejected.value.status == 422
        assert "data.size 'huge' is not one of small, medium, large" in str(rejected.value)
        assert op.settings.posting.level == logging.ERROR  # what the test did not set stays the operator's
    assert [(c.served_by.split(" at ")[0], c.allowed) for c in wh.calls][-2:] == [
        ("operator", True),
        ("operator", False),
    ]
    assert "ktest keeps settings.admission.server = " in op.logs
    assert "as the test's configure= set it; the operator's assignment of " in op.logs
    assert f"{OPERATOR}:17 is ignored" in op.logs  # the operator's line that set it
