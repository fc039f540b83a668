"""The API server's client certificate for admission webhook calls.

kube-apiserver presents one to admission webhooks when its ``--admission-control-config-file``
gives the webhook plugins a ``kubeConfigFile`` whose user ``*`` holds it. Each control plane gets a
CA of its own for it (key kept in memory), so ktest's webhook front server can require a
certificate only this API server holds. Not presented to CRD conversion webhooks: apiextensions
calls them with an empty kubeconfig (anonymous TLS).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

# Below the control plane's directory: the CA certificate the front server trusts, the
# API server's certificate and key, its kubeconfig and the admission configuration.
WEBHOOK_CLIENT_DIRECTORY = Path("certs") / "webhook-client"
WEBHOOK_CLIENT_USER = "ktest-kube-apiserver-webhook-client"
WEBHOOK_CLIENT_STEM = "kube-apiserver"  # <stem>.crt and <stem>.key beside the CA's ca.crt
ADMISSION_CONFIG_FLAG = "admission-control-config-file"
WEBHOOK_PLUGINS = ("ValidatingAdmissionWebhook", "MutatingAdmissionWebhook")


@dataclass(frozen=True)
class WebhookClientFiles:
    """``ca_cert``: what a webhook server trusts; ``admission_config``: the API server's flag value."""

    ca_cert: Path
    admission_config: Path


def write_webhook_client(plane_directory: Path) -> WebhookClientFiles:
    """A CA, the API server's client certificate, its kubeconfig and the admission configuration."""
    import yaml  # deferred with cryptography: attaching to a plane needs only webhook_client_ca

    from ktest.base.certs import CertificateAuthority
    from ktest.base.janitor import write_private_text

    directory = plane_directory / WEBHOOK_CLIENT_DIRECTORY
    ca = CertificateAuthority(directory, "ktest-webhook-client-ca", write_key=False)
    pair = ca.client(WEBHOOK_CLIENT_STEM, WEBHOOK_CLIENT_USER)
    kubeconfig = directory / "webhook-client.kubeconfig"
    credentials = {"client-certificate": str(pair.cert_path), "client-key": str(pair.key_path)}
    users = [{"name": "*", "user": credentials}]
    write_private_text(kubeconfig, yaml.safe_dump({"apiVersion": "v1", "kind": "Config", "users": users}))
    plugin_configuration = {
        "apiVersion": "apiserver.config.k8s.io/v1",
        "kind": "WebhookAdmissionConfiguration",
        "kubeConfigFile": str(kubeconfig),
    }
    admission_config = directory / "admission-config.yaml"
    configuration = {
        "apiVersion": "apiserver.config.k8s.io/v1",
        "kind": "AdmissionConfiguration",
        "plugins": [{"name": name, "configuration": plugin_configuration} for name in WEBHOOK_PLUGINS],
    }
    write_private_text(admission_config, yaml.safe_dump(configuration))
    return WebhookClientFiles(ca.cert_path, admission_config)


def webhook_client_ca(plane_directory: Path | str | None) -> Path | None:
    """The CA of the client certificate the control plane in ``plane_directory`` presents to
    admission webhooks; None when it presents none (no directory: not ktest's control plane;
    a plane started with the user's own ``--admission-control-config-file``, or by an older ktest)."""
    if plane_directory is None:
        return None
    path = Path(plane_directory) / WEBHOOK_CLIENT_DIRECTORY / "ca.crt"
    return path if path.is_file() else None
