"""TLS material for one set of webhooks: a CA of its own and one serving certificate.

The certificate carries every address a webhook server listens on (the operator's 127.0.0.1, the
address the API server dials) plus ``localhost``; the API server trusts it through the CA bundle of
each rewritten client config. Files use controller-runtime's names (``tls.crt``, ``tls.key``), so a
manager needs only ``--webhook-cert-dir``.
"""

from __future__ import annotations

import base64
import ssl
from collections.abc import Iterable
from pathlib import Path

from ktest.base.certs import CertificateAuthority, KeyPair


class WebhookTLS:
    """A CA (key kept in memory) and a serving certificate for ``addresses``, written to ``cert_dir``."""

    def __init__(self, cert_dir: Path, addresses: Iterable[str]) -> None:
        self.cert_dir = cert_dir
        self.addresses = sorted(set(addresses))
        self._ca = CertificateAuthority(cert_dir, "ktest-webhook-ca", write_key=False)
        self.serving: KeyPair = self._ca.serving(
            "tls", ["localhost"], self.addresses, common_name="ktest-webhook-server"
        )
        self.ca_file: Path = self._ca.cert_path
        self.cert_file: Path = self.serving.cert_path
        self.key_file: Path = self.serving.key_path

    @property
    def ca_bundle(self) -> str:
        """``clientConfig.caBundle``: the CA certificate, PEM, base64-encoded."""
        return base64.b64encode(self._ca.cert_pem).decode("ascii")

    def server_context(self, client_ca: Path | None = None) -> ssl.SSLContext:
        """For ktest's own HTTPS server; with ``client_ca``, only clients presenting a
        certificate it issued complete the handshake (the embedded API server's, see
        :mod:`ktest.controlplane.admission`)."""
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(self.cert_file, self.key_file)
        if client_ca is not None:
            context.verify_mode = ssl.CERT_REQUIRED
            context.load_verify_locations(cafile=str(client_ca))
        return context

    def client_context(self) -> ssl.SSLContext:
        """For connecting to the operator's server: it must present a certificate of this CA."""
        return ssl.create_default_context(cafile=str(self.ca_file))
