"""``Webhooks``: admission and conversion webhooks served for a test, against the real API server.

::

    wh = Webhooks(cluster, "config/webhook/manifests.yaml", "config/crd/bases", namespaces=[ns])
    with run_subprocess([manager, *wh.controller_runtime_args()], cluster, ...), wh:
        ...   # start() waited for the operator's server, installed, and saw the API server call

The operator starts first (certificate and port are known before ``start()``): a conversion
webhook is called as soon as it is installed. One set = one CA and serving certificate, one front
server where the API server reaches this machine, the rewritten configurations and a call log.
"""

from __future__ import annotations

import secrets
import shutil
import socket
import ssl
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ktest.base.closing import StartedOnEnter
from ktest.base.ports import free_ports
from ktest.errors import WebhookError
from ktest.webhooks import install
from ktest.webhooks.calls import CallLog
from ktest.webhooks.handlers import Handlers
from ktest.webhooks.manifests import Rewriter, WebhookManifests, read_manifests
from ktest.webhooks.routes import RouteTable
from ktest.webhooks.server import FrontServer
from ktest.webhooks.tls import WebhookTLS

if TYPE_CHECKING:
    from ktest.base.janitor_client import JanitorHandle
    from ktest.cluster import Cluster
    from ktest.cluster.manifests import ManifestSource

OPERATOR_HOST = "127.0.0.1"
DEFAULT_READY_TIMEOUT = 30.0


class Webhooks(StartedOnEnter):
    """Webhooks installed for a test (a context manager; see the module docstring).

    ``manifests``: webhook configurations and CRDs (files, directories, dicts).
    ``handlers``: Python handlers (:class:`~ktest.webhooks.Handlers`).
    ``namespaces``: limit admission webhooks to these namespaces (a
    ``namespaceSelector`` term is added); None: the whole cluster.
    ``host``/``port``: where the front server listens (default: ``cluster.webhook_host``,
    a free port). ``operator_port``: where the operator's own server is expected
    (default: a free port). ``timeout_seconds``: override every admission webhook's
    ``timeoutSeconds`` (e.g. 2, so a hanging webhook fails a test in 2 s, not 10).
    ``wait_for_operator``: :meth:`start` first waits until the operator's server answers
    (when a webhook is forwarded to it), so start the operator before the webhooks;
    False installs without it (to see what an absent server does).
    """

    def __init__(
        self,
        cluster: Cluster,
        *manifests: ManifestSource,
        handlers: Handlers | None = None,
        namespaces: Sequence[str] | None = None,
        host: str | None = None,
        port: int = 0,
        operator_port: int | None = None,
        timeout_seconds: float | None = None,
        ready_timeout: float = DEFAULT_READY_TIMEOUT,
        wait_for_operator: bool = True,
        name: str = "ktest",
    ) -> None:
        self.cluster = cluster
        self.handlers = handlers or Handlers()
        self.namespaces = list(namespaces) if namespaces else None
        self.read: WebhookManifests = read_manifests(*manifests)
        resolved_host = host or cluster.webhook_host
        if not resolved_host:
            raise WebhookError(
                f"ktest does not know how the API server of {cluster.server} reaches this machine "
                "(an existing cluster): pass host= (an address of this machine the API server can connect to)"
            )
        self.host: str = resolved_host
        self.requested_port = port
        self.operator_port = operator_port if operator_port is not None else free_ports(1)[0]
        self.timeout_seconds = timeout_seconds
        self.ready_timeout = ready_timeout
        self.wait_for_operator_first = wait_for_operator
        self.token = f"{_clean(name)[:20]}-{secrets.token_hex(3)}"
        # The first segment of every URL in the rewritten clientConfigs: the front server
        # answers only requests that carry it (192 random bits, new for every set).
        self._path_secret = secrets.token_urlsafe(24)
        self.calls = CallLog()
        self.routes = RouteTable()
        self.installed = install.Installed()
        self._directory: Path | None = None
        self._janitor: JanitorHandle | None = None
        self.tls: WebhookTLS | None = None
        self.server: FrontServer | None = None
        self._undo_health: Any = None

    # ------------------------------------------------------------ what the operator needs

    @property
    def cert_dir(self) -> Path:
        """Holds ``tls.crt``, ``tls.key`` (controller-runtime's names) and ``ca.crt`` (written on first
        use)."""
        return self._created_tls.cert_dir

    @property
    def cert_file(self) -> Path:
        return self._created_tls.cert_file

    @property
    def key_file(self) -> Path:
        return self._created_tls.key_file

    @property
    def ca_file(self) -> Path:
        return self._created_tls.ca_file

    def controller_runtime_args(self) -> list[str]:
        """Flags for a kubebuilder-style manager whose main() maps them to ``webhook.Options``."""
        return [
            f"--webhook-host={OPERATOR_HOST}",
            f"--webhook-port={self.operator_port}",
            f"--webhook-cert-dir={self.cert_dir}",
        ]

    def kopf_server(self) -> Any:
        """A ``kopf.WebhookServer`` listening where ktest forwards, with ktest's certificate
        (set ``settings.admission.server`` to it in a startup handler)."""
        import kopf

        return kopf.WebhookServer(
            addr=OPERATOR_HOST,
            port=self.operator_port,
            host=OPERATOR_HOST,
            certfile=str(self.cert_file),
            pkeyfile=str(self.key_file),
            cafile=str(self.ca_file),
        )

    @property
    def url(self) -> str:
        """Where the API server calls: ``https://<host>:<port>``."""
        if self.server is None:
            raise WebhookError("the webhooks are not started: use `with Webhooks(...) as wh:` or start()")
        return self._url(self.server.port)

    def _url(self, port: int) -> str:
        return f"https://{_url_host(self.host)}:{port}"

    # ------------------------------------------------------------ lifecycle

    def start(self) -> Webhooks:
        """Certificates, front server, configurations installed, and called by the API server once."""
        try:
            self._start()
        except BaseException:
            self.close()
            raise
        return self

    def _start(self) -> None:
        tls = self._created_tls
        # The embedded control plane's API server presents a client certificate to admission
        # webhooks: then only it gets through the handshake (elsewhere the path secret guards).
        client_ca = self.cluster.webhook_client_ca
        converts = bool(self.read.conversions or self.handlers.conversions())
        self.server = FrontServer(
            self.host,
            self.requested_port,
            tls.server_context(client_ca),
            self.routes,
            self.calls,
            upstream=(OPERATOR_HOST, self.operator_port),
            upstream_context=tls.client_context(),
            probe_name=f"ktest-webhook-probe-{self.token}",
            path_secret=self._path_secret,
            conversion_context=tls.server_context() if client_ca is not None and converts else None,
        )
        from ktest.run_context import add_health_check, add_report_section

        add_report_section(f"webhooks {self.token}", self.report)
        self._undo_health = add_health_check(self.check_handlers)
        rewriter = Rewriter(
            base_url=f"{self.url}/{self._path_secret}",
            conversion_base_url=self._url(self.server.conversion_port) + f"/{self._path_secret}",
            ca_bundle=tls.ca_bundle,
            suffix=self.token,
            routes=self.routes,
            namespaces=self.namespaces,
            timeout_seconds=self.timeout_seconds,
            handlers=self.handlers.by_path(),
        )
        probe_namespace = self.namespaces[0] if self.namespaces else "default"
        probe_name = f"{self.server.probe_name}-0"
        generated = read_manifests(*self.handlers.admission_configurations())
        # Rewrite everything first: a manifest ktest cannot rewrite fails before anything is installed.
        configs = [
            rewriter.admission(manifest, index)[0]
            for index, manifest in enumerate([*self.read.admission, *generated.admission])
        ]
        conversions = [rewriter.conversion(m) for m in [*self.read.conversions, *self._python_conversions()]]
        if self.wait_for_operator_first and any(route.handler is None for route in self.routes):
            # A conversion webhook is called as soon as it is installed (the API server converts
            # stored objects to fill its caches): the operator must already serve.
            self.wait_for_operator(self.ready_timeout)
        if self.read.crds:
            self.cluster.install_crds(*(m.obj for m in self.read.crds))
        for index, config in enumerate(configs):
            probe = install.admission_probe(self.cluster, probe_namespace, probe_name, self.token)
            install.install_configuration(self.cluster, config, self.installed, index, probe)
        for crd, route in conversions:
            install.install_conversion(
                self.cluster, crd, self.installed, route.path, probe_namespace, probe_name
            )
        install.wait_called(self.installed, self.server.probe_hits, self.ready_timeout)

    def _python_conversions(self) -> list[Any]:
        """The CRDs of Python conversion handlers, read from the cluster, as conversion manifests."""
        from ktest.cluster.manifests import Manifest

        manifests = []
        for registration in self.handlers.conversions():
            name = f"{registration.plural}.{registration.group}"
            crd = self.cluster.get_or_none((*install.CRD_REF, name))
            if crd is None:
                raise WebhookError(
                    f"conversion handler {registration.function.__name__}: CustomResourceDefinition {name} "
                    "is not installed; install it first (cluster.install_crds, ktest_crds) or pass it "
                    "in the manifests"
                )
            crd = {key: crd[key] for key in ("apiVersion", "kind", "spec")} | {"metadata": {"name": name}}
            crd["spec"]["conversion"] = {
                "strategy": "Webhook",
                "webhook": {"conversionReviewVersions": ["v1"], "clientConfig": registration.client_config},
            }
            manifests.append(Manifest(crd, f"python handler {registration.function.__name__}"))
        return manifests

    def wait_for_operator(self, timeout: float = DEFAULT_READY_TIMEOUT) -> None:
        """Wait until the operator's webhook server accepts TLS with ktest's certificate.

        A server presenting another certificate (its own self-signed one: the cert dir
        was not passed) fails at once, naming the certificate it presented.
        """
        tls = self._created_tls
        deadline = time.monotonic() + timeout
        context = tls.client_context()
        last = "nothing accepted connections"
        while time.monotonic() < deadline:
            try:
                with (
                    socket.create_connection((OPERATOR_HOST, self.operator_port), timeout=2) as raw,
                    context.wrap_socket(raw, server_hostname=OPERATOR_HOST),
                ):
                    return
            except ssl.SSLCertVerificationError as error:
                raise WebhookError(
                    f"the operator's webhook server at {OPERATOR_HOST}:{self.operator_port} presents a "
                    f"certificate ktest did not issue ({error.verify_message}); give it ktest's: "
                    f"cert dir {self.cert_dir} "
                    "(tls.crt, tls.key), e.g. --webhook-cert-dir for a controller-runtime manager"
                ) from None
            except OSError as error:  # refused, TLS (ssl.SSLError), timeout
                last = f"{type(error).__name__}: {error}"
            time.sleep(0.05)
        raise WebhookError(
            f"the operator's webhook server did not come up on {OPERATOR_HOST}:{self.operator_port} within "
            f"{timeout:g}s ({last}); was it given this port (e.g. --webhook-port={self.operator_port})?"
        )

    def close(self) -> None:
        """Remove what was installed, stop the server, delete the certificates. Idempotent."""
        problems = install.uninstall(self.cluster, self.installed)
        server, self.server = self.server, None
        if server is not None:
            server.close()
        if self._directory is not None:
            shutil.rmtree(self._directory, ignore_errors=True)
            self._directory = None
            self.tls = None
        janitor, self._janitor = self._janitor, None
        if janitor is not None:
            janitor.release()
        if self._undo_health is not None:
            self._undo_health()
            self._undo_health = None
        if problems:
            raise WebhookError("cleaning up webhooks failed:\n" + "\n".join(problems))

    # ------------------------------------------------------------ reporting

    def check_handlers(self) -> None:
        """Raise if a Python handler raised (a bug in the test's handler, not a denial)."""
        errors = self.server.handler_errors if self.server is not None else []
        if errors:
            raise WebhookError("a Python webhook handler raised:\n" + errors[0])

    def report(self) -> str:
        """The failure-report section: what is installed where, and every call."""
        lines = [f"webhooks served at {self.url if self.server else '(stopped)'}"]
        if self.server is not None and self.server.requires_client_certificate:
            lines[0] += " (only the API server's client certificate gets through"
            if self.server.conversion_port != self.server.port:
                lines[0] += (
                    f"; conversions at port {self.server.conversion_port}, which it does not present there"
                )
            lines[0] += ")"
        if any(route.handler is None for route in self.routes):
            lines[0] += f"; the operator's server expected at {OPERATOR_HOST}:{self.operator_port}"
        for route in self.routes:
            target = (
                f"python handler {route.handler.function.__name__}"
                if route.handler is not None
                else f"operator {route.target_path}"
            )
            policy = "" if route.kind == "conversion" else f", failurePolicy {route.failure_policy}"
            lines.append(
                f"  {route.kind} {route.webhook} -> {target}{policy}, timeout {route.timeout_seconds:g}s"
            )
        lines.append(f"calls ({len(self.calls)}):")
        lines.extend(f"  {call.describe()}" for call in self.calls)
        if not len(self.calls):
            lines.append("  none: the API server called no webhook of this set during the test")
        return "\n".join(lines)

    # ------------------------------------------------------------ internals

    @property
    def _created_tls(self) -> WebhookTLS:
        """The set's certificates, created (with their private directory) the first time."""
        if self.tls is None:
            from ktest.base import holders
            from ktest.base.janitor_client import JanitorHandle

            directory = self._directory = holders.held_directory(holders.WEBHOOKS_PREFIX)
            # The serving key must not outlive this process, even after kill -9: the janitor
            # stops what still uses the directory (an operator given --webhook-cert-dir) and
            # removes it when this process dies without close().
            self._janitor = JanitorHandle(directory)
            self.tls = WebhookTLS(directory / "certs", {self.host or OPERATOR_HOST, OPERATOR_HOST})
        return self.tls


def _clean(name: str) -> str:
    cleaned = "".join(c if c.isalnum() else "-" for c in name.lower()).strip("-")
    return cleaned or "ktest"


def _url_host(host: str) -> str:
    return f"[{host}]" if ":" in host else host
