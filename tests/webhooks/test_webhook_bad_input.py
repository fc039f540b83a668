"""Webhook manifests ktest cannot serve, a taken port: clear errors, nothing half-installed."""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Any

import pytest
import yaml
from builders import configmap_creation_webhook

from ktest.cluster import Cluster
from ktest.errors import WebhookError
from ktest.run_context import run_context
from ktest.webhooks import Handlers, Webhooks
from ktest.webhooks.manifests import read_manifests

VALIDATING = configmap_creation_webhook(
    "checks", "check.example.com", {"url": "https://webhooks.example.com:8443/check"}
)


def write(path: Path, *documents: dict[str, Any]) -> Path:
    path.write_text(yaml.safe_dump_all(documents))
    return path


def test_a_url_on_another_host_is_refused_naming_file_and_webhook(cluster: Cluster, tmp_path: Path) -> None:
    path = write(tmp_path / "remote.yaml", VALIDATING)
    with pytest.raises(WebhookError) as raised:
        Webhooks(cluster, path, namespaces=["default"]).start()
    message = str(raised.value)
    assert f"{path}, document 1" in message and "webhook check.example.com" in message
    assert (
        "clientConfig.url https://webhooks.example.com:8443/check points at webhooks.example.com" in message
    )
    assert "service reference" in message
    names = [
        c["metadata"]["name"]
        for c in cluster.list("admissionregistration.k8s.io/v1", "ValidatingWebhookConfiguration")
    ]
    assert not any(name.startswith("checks-") for name in names)  # nothing installed


def test_a_webhook_without_client_config_and_other_kinds_are_refused(tmp_path: Path) -> None:
    broken = {**VALIDATING, "webhooks": [{**VALIDATING["webhooks"][0], "clientConfig": {}}]}
    cluster_stub: Any = type(
        "Stub", (), {"webhook_host": "127.0.0.1", "webhook_client_ca": None, "server": "https://127.0.0.1:1"}
    )()
    with pytest.raises(WebhookError, match="clientConfig has neither service nor url"):
        Webhooks(cluster_stub, write(tmp_path / "a.yaml", broken)).start()
    with pytest.raises(
        WebhookError, match=r"ConfigMap x \(v1\) is neither a webhook configuration nor a CRD"
    ):
        read_manifests(
            write(tmp_path / "b.yaml", {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}})
        )


def test_a_taken_port_is_reported(cluster: Cluster) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(
            WebhookError, match=f"cannot serve webhooks on 127.0.0.1:{port}: the port is already taken"
        ):
            Webhooks(cluster, handlers=Handlers(), port=port).start()


def test_an_existing_cluster_needs_a_host(tmp_path: Path) -> None:
    cluster_stub: Any = type("Stub", (), {"webhook_host": None, "server": "https://10.0.0.1:6443"})()
    with pytest.raises(
        WebhookError, match=r"how the API server of https://10.0.0.1:6443 reaches this machine.*pass host="
    ):
        Webhooks(cluster_stub)


@pytest.mark.slow
def test_the_failure_report_section_is_registered_and_removed(cluster: Cluster, namespace: str) -> None:
    with run_context("a test", test=True) as context:
        with Webhooks(cluster, handlers=Handlers(), namespaces=[namespace]) as wh:
            certificates = wh.cert_dir
            assert [title for title, _ in context.sections] == [f"webhooks {wh.token}"]
            assert (
                "none: the API server called no webhook of this set during the test"
                in context.sections[0][1]()
            )
        assert wh.server is None and not certificates.exists()  # server stopped, key material removed
