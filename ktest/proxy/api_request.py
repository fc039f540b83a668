"""What an API request is about, named the way RBAC and audit logs name it from method, path
and query alone: ``GET .../webapps?watch=true`` is ``watch webapps``, ``PATCH
.../webapps/shop/status`` is ``patch webapps/shop (status)``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import parse_qs, unquote, urlsplit

VERBS = ("get", "list", "watch", "create", "update", "patch", "delete", "deletecollection")
WRITE_VERBS = frozenset({"create", "update", "patch", "delete", "deletecollection"})
READ_VERBS = frozenset({"get", "list", "watch"})
_TRUE = ("1", "true")
_NAMESPACE_SUBRESOURCES = ("status", "finalize")
_MALFORMED_ESCAPE = re.compile(r"%(?![0-9A-Fa-f]{2})")


@dataclass
class ApiRequest:
    """One request, named like RBAC names it; ``resource`` is empty for non-resource paths
    (``/version``, discovery, ``/healthz``). A :class:`~ktest.proxy.Call` is one, with its answer."""

    method: str
    path: str
    verb: str
    group: str = ""
    version: str = ""
    resource: str = ""
    namespace: str | None = None
    name: str | None = None
    subresource: str | None = None
    field_manager: str | None = None
    resource_version: str | None = None
    send_initial_events: bool = False
    """A watch that first streams the current state (client-go's "watch list"): a list, too."""
    problem: str | None = None
    """Why the API server would refuse the path unread (a malformed percent-escape), else None."""

    @property
    def is_watch(self) -> bool:
        return self.verb == "watch"

    @property
    def is_write(self) -> bool:
        return self.verb in WRITE_VERBS

    @property
    def lists(self) -> bool:
        """Reads the whole current state: a list, or a watch that streams it first."""
        return self.verb == "list" or (self.verb == "watch" and self.send_initial_events)

    @property
    def resource_path(self) -> str:
        """``deployments/status`` as RBAC rules spell it, or ``deployments``."""
        return resource_path(self.resource, self.subresource)

    @property
    def qualified_resource(self) -> str:
        """``webapps.platform.example.com``, or ``pods`` for the core group."""
        return f"{self.resource}.{self.group}" if self.group else self.resource

    def target(self) -> str:
        """``webapps ns/shop (status)``, ``pods in ns``, ``deployments``, or the path."""
        if not self.resource:
            return self.path
        text = self.resource
        if self.name is not None:
            text += f" {self.namespace}/{self.name}" if self.namespace else f" {self.name}"
        elif self.namespace:
            text += f" in {self.namespace}"
        if self.subresource:
            text += f" ({self.subresource})"
        return text

    def verb_and_target(self) -> str:
        """``patch webapps ns/shop (status)``, ``watch (list) pods in ns``."""
        verb = "watch (list)" if self.verb == "watch" and self.send_initial_events else self.verb
        return f"{verb} {self.target()}"


def resource_path(resource: str, subresource: str | None) -> str:
    """A resource and its subresource as RBAC rules and ``allow=`` lists spell them:
    ``deployments/status``, or ``deployments``."""
    return f"{resource}/{subresource}" if subresource else resource


def parse_request(method: str, target: str) -> ApiRequest:
    """Name a request from its method and request target (path and query)."""
    parts = urlsplit(target)
    query = {key: values[0] for key, values in parse_qs(parts.query).items()}
    method = method.upper()
    segments = api_server_segments(parts.path)
    if segments is None:
        return ApiRequest(method, parts.path, _verb(method), problem=(
            f"the path {parts.path[:200]!r} holds a '%' that starts no escape of two hex digits "
            "(the API server answers such a request 400 unread)"
        ))

    def named(verb: str, group: str = "", version: str = "", **about: str | None) -> ApiRequest:
        return ApiRequest(
            method, parts.path, verb, group, version, field_manager=query.get("fieldManager"),
            resource_version=query.get("resourceVersion"),
            send_initial_events=query.get("sendInitialEvents", "").lower() in _TRUE,
            **about,  # type: ignore[arg-type]
        )

    located = _resource_segments(segments)
    if located is None:
        return named(_verb(method))
    group, version, rest = located
    legacy_watch = bool(rest) and rest[0] == "watch"
    if legacy_watch:
        rest = rest[1:]
    namespace = None
    if len(rest) >= 3 and rest[0] == "namespaces" and not (
        len(rest) == 3 and rest[2] in _NAMESPACE_SUBRESOURCES
    ):
        namespace, rest = rest[1], rest[2:]
    if not rest:
        return named(_verb(method), group, version)
    resource = rest[0]
    name = rest[1] if len(rest) > 1 else None
    subresource = "/".join(rest[2:]) or None
    verb = _verb(method, name is not None, legacy_watch or query.get("watch", "").lower() in _TRUE)
    return named(verb, group, version, resource=resource, namespace=namespace, name=name,
                 subresource=subresource)


def api_server_segments(path: str) -> list[str] | None:
    """The segments of ``path`` as the API server reads them: Go decodes every percent-escape of
    the path first (``%2F`` is a slash that separates segments there), then the outer slashes are
    trimmed and the rest split on ``/`` (an empty segment inside stays). None for a malformed
    escape, which Go's HTTP server refuses (400) before any handler sees the request."""
    if _MALFORMED_ESCAPE.search(path):
        return None
    decoded = unquote(path, errors="surrogateescape").strip("/")
    return decoded.split("/") if decoded else []


def _resource_segments(segments: list[str]) -> tuple[str, str, list[str]] | None:
    if len(segments) >= 2 and segments[0] == "api":
        return "", segments[1], segments[2:]
    if len(segments) >= 3 and segments[0] == "apis":
        return segments[1], segments[2], segments[3:]
    return None


def _verb(method: str, named: bool = True, watch: bool = False) -> str:
    """The verb of a request on a resource, or (named, no watch) on a non-resource path."""
    if method in ("GET", "HEAD"):
        return "watch" if watch else "get" if named else "list"
    if method == "DELETE":
        return "delete" if named else "deletecollection"
    return {"POST": "create", "PUT": "update"}.get(method, method.lower())
