"""Read the user's webhook configurations and CRDs, and rewrite them to point at ktest.

Read: ``Validating``/``MutatingWebhookConfiguration`` documents (kubebuilder's
``config/webhook/manifests.yaml``) and CRDs (a ``spec.conversion.strategy: Webhook`` gets its
conversion rewritten). Rewritten, per webhook: ``clientConfig`` becomes
``url: https://<host>:<port>/<secret>/hook/<n>`` with ktest's CA bundle; the configuration's name
gets a unique suffix (cluster-scoped, and tests run in parallel); with ``namespaces``, a
``namespaceSelector`` term keeps one test's webhooks from judging another test's objects; and a
probe webhook shows when the API server has really loaded the configuration.
"""

from __future__ import annotations

import copy
import urllib.parse
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ktest.cluster.manifests import Manifest, ManifestSource, load_as
from ktest.errors import WebhookError
from ktest.webhooks.handlers import PYTHON_SERVICE
from ktest.webhooks.routes import PROBE_PREFIX, Route, RouteTable

ADMISSION_API_VERSION = "admissionregistration.k8s.io/v1"
ADMISSION_KINDS = {"ValidatingWebhookConfiguration": "validating", "MutatingWebhookConfiguration": "mutating"}
CRD_API_VERSION = "apiextensions.k8s.io/v1"
PROBE_LABEL = "ktest.dev/webhook-probe"
PROBE_WEBHOOK = "ktest-probe.webhooks.ktest.dev"
LOCAL_HOSTS = ("localhost", "127.0.0.1", "::1", "[::1]")
DEFAULT_TIMEOUT_SECONDS = 10.0  # the API server's default timeoutSeconds


@dataclass
class WebhookManifests:
    """What was read: admission configurations, CRDs with a conversion webhook, other CRDs."""

    admission: list[Manifest] = field(default_factory=list)
    conversions: list[Manifest] = field(default_factory=list)
    crds: list[Manifest] = field(default_factory=list)


def read_manifests(*sources: ManifestSource) -> WebhookManifests:
    """Sort the documents of ``sources``; anything else is an error naming file and document."""
    found = WebhookManifests()
    for source in sources:
        for manifest in load_as(source, WebhookError, "cannot read webhook manifests"):
            obj = manifest.obj
            if obj.get("kind") in ADMISSION_KINDS:
                if obj.get("apiVersion") != ADMISSION_API_VERSION:
                    raise WebhookError(
                        f"{manifest.origin}: {manifest.ref_text} is {obj.get('apiVersion')}; ktest installs "
                        f"{ADMISSION_API_VERSION} (the only version current API servers serve)"
                    )
                found.admission.append(manifest)
            elif obj.get("kind") == "CustomResourceDefinition" and obj.get("apiVersion") == CRD_API_VERSION:
                strategy = ((obj.get("spec") or {}).get("conversion") or {}).get("strategy")
                (found.conversions if strategy == "Webhook" else found.crds).append(manifest)
            else:
                raise WebhookError(
                    f"{manifest.origin}: {manifest.ref_text} ({obj.get('apiVersion')}) is neither a webhook "
                    "configuration nor a CRD; pass only config/webhook and CRD files as webhook manifests "
                    "(apply other objects with cluster.apply)"
                )
    return found


def target_path(client_config: dict[str, Any], where: str) -> tuple[str, str | None]:
    """The path on the operator's server a client config names, and the Service it names (or None).

    A ``service`` reference is always rewritable; a ``url`` only when it names this
    machine (``https://localhost:9443/validate``), since ktest cannot serve for another host.
    """
    service = client_config.get("service")
    url = client_config.get("url")
    if service:
        path = service.get("path") or "/"
        name = f"{service.get('namespace', 'default')}/{service.get('name')}:{service.get('port', 443)}"
        return (path if path.startswith("/") else "/" + path), name
    if url:
        parsed = urllib.parse.urlsplit(url)
        if parsed.hostname in LOCAL_HOSTS:
            return parsed.path or "/", None
        raise WebhookError(
            f"{where}: clientConfig.url {url} points at {parsed.hostname}, a server ktest cannot stand in "
            "for; "
            "write the webhook's clientConfig as a service reference (as kubebuilder does) or as a URL on "
            "localhost, and ktest points it at the operator it runs"
        )
    raise WebhookError(f"{where}: clientConfig has neither service nor url; the API server could not call it")


def _names_python_service(service: str | None) -> bool:
    """Whether a webhook names the pretend Service of ktest's Python handlers (``namespace/name:port``)."""
    return service is not None and service.startswith(f"ktest/{PYTHON_SERVICE}")


@dataclass
class Rewriter:
    """Rewrites manifests for one :class:`~ktest.webhooks.Webhooks`: where, with which CA, what suffix."""

    base_url: str  # https://host:port/<secret> of the front server
    ca_bundle: str
    suffix: str  # appended to configuration names: unique per test and worker
    routes: RouteTable
    namespaces: Sequence[str] | None = None
    timeout_seconds: float | None = None  # overrides every webhook's timeoutSeconds
    handlers: dict[str, Any] = field(default_factory=dict)  # target path -> Python handler
    services: dict[str, str] = field(default_factory=dict)  # service -> first place naming it
    # Where conversion webhooks are called when not at base_url (the front server's conversion
    # listener: the API server presents no client certificate to them).
    conversion_base_url: str | None = None

    def client_config(self, route: Route) -> dict[str, Any]:
        base = (
            self.conversion_base_url
            if route.kind == "conversion" and self.conversion_base_url
            else self.base_url
        )
        return {"url": f"{base}{route.path}", "caBundle": self.ca_bundle}

    def admission(self, manifest: Manifest, probe_index: int) -> tuple[dict[str, Any], list[Route]]:
        """The configuration to install, and the routes of its webhooks."""
        config = copy.deepcopy(manifest.obj)
        kind = ADMISSION_KINDS[config["kind"]]
        original_name = config["metadata"]["name"]
        config["metadata"] = {
            "name": f"{original_name}-{self.suffix}",
            "labels": {**(config["metadata"].get("labels") or {}), "app.kubernetes.io/managed-by": "ktest"},
            "annotations": {"ktest.dev/original-name": original_name},
        }
        routes = []
        for webhook in config.get("webhooks") or ():
            where = f"{manifest.origin}: {manifest.ref_text}, webhook {webhook.get('name')}"
            path, service = target_path(webhook.get("clientConfig") or {}, where)
            self._check_one_service(service, where)
            if self.timeout_seconds is not None:
                webhook["timeoutSeconds"] = self.timeout_seconds
            route = self.routes.add(
                webhook=str(webhook.get("name")),
                kind=kind,
                failure_policy=webhook.get("failurePolicy", "Fail"),
                timeout_seconds=float(webhook.get("timeoutSeconds") or DEFAULT_TIMEOUT_SECONDS),
                target_path=path,
                origin=where,
                handler=self._python_handler(service, path),
            )
            webhook["clientConfig"] = self.client_config(route)
            if self.namespaces:
                selector = webhook.setdefault("namespaceSelector", {})
                selector.setdefault("matchExpressions", []).append(
                    {"key": "kubernetes.io/metadata.name", "operator": "In", "values": list(self.namespaces)}
                )
            routes.append(route)
        config.setdefault("webhooks", []).append(self._probe_webhook(probe_index))
        return config, routes

    def conversion(self, manifest: Manifest) -> tuple[dict[str, Any], Route]:
        """The CRD with its conversion webhook pointing at ktest."""
        crd = copy.deepcopy(manifest.obj)
        name = crd["metadata"]["name"]
        where = f"{manifest.origin}: CustomResourceDefinition {name}, conversion webhook"
        webhook = crd["spec"]["conversion"].setdefault("webhook", {})
        path, service = target_path(webhook.get("clientConfig") or {}, where)
        self._check_one_service(service, where)
        webhook.setdefault("conversionReviewVersions", ["v1"])
        route = self.routes.add(
            webhook=name,
            kind="conversion",
            failure_policy="-",
            timeout_seconds=DEFAULT_TIMEOUT_SECONDS,
            target_path=path,
            origin=where,
            handler=self._python_handler(service, path),
        )
        webhook["clientConfig"] = self.client_config(route)
        return crd, route

    def _python_handler(self, service: str | None, path: str) -> Any:
        """The Python handler registered for ``path`` when the webhook names ktest's Python service."""
        return self.handlers.get(path) if _names_python_service(service) else None

    def _check_one_service(self, service: str | None, where: str) -> None:
        """Every webhook forwarded to the operator must name the same Service: ktest runs one
        operator server, so webhooks of two different Services cannot both be served."""
        if service is None or _names_python_service(service):
            return
        self.services.setdefault(service, where)
        if len(self.services) > 1:
            listed = "; ".join(f"Service {name} ({first})" for name, first in self.services.items())
            raise WebhookError(
                f"the webhooks point at {len(self.services)} different Services: {listed}. ktest forwards "
                "every webhook to the one operator webhook server it starts; serve them from one Service, "
                "or use one ktest.webhooks.Webhooks per server (each with its own operator port)"
            )

    def _probe_webhook(self, index: int) -> dict[str, Any]:
        """A webhook matching only ConfigMaps labelled with this set's probe token (dry-run creates)."""
        return {
            "name": PROBE_WEBHOOK,
            "admissionReviewVersions": ["v1"],
            "sideEffects": "None",
            "failurePolicy": "Fail",
            "timeoutSeconds": 5,
            "clientConfig": {"url": f"{self.base_url}{PROBE_PREFIX}{index}", "caBundle": self.ca_bundle},
            "objectSelector": {"matchLabels": {PROBE_LABEL: self.suffix}},
            "rules": [
                {
                    "apiGroups": [""],
                    "apiVersions": ["v1"],
                    "resources": ["configmaps"],
                    "operations": ["CREATE"],
                }
            ],
        }
