"""Plain JSON requests to the API server through a ``kubernetes`` ApiClient.

The generated typed clients need a model per kind and the dynamic client
re-runs discovery; tests work with dicts of any kind, so ktest talks REST
directly, reusing the ApiClient's TLS and credentials. Errors are raised as
:class:`ktest.api_error.ApiError`, which is also a ``kubernetes.client.ApiException``,
so callers and ``eventually``'s retry rules see the official client's type.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import quote, urlencode

import urllib3
from kubernetes.client import ApiClient

from ktest.api_error import ApiError

PATCH_CONTENT_TYPES = {
    "merge": "application/merge-patch+json",
    "strategic": "application/strategic-merge-patch+json",
    "json": "application/json-patch+json",
    "apply": "application/apply-patch+yaml",
}

DEFAULT_TIMEOUT = (5.0, 30.0)  # (connect, read) seconds


class Rest:
    """Sends one request, decodes JSON, raises ApiException on HTTP errors.

    Requests go straight to the ApiClient's urllib3 pool (its TLS, proxy and
    credentials), not through the generated ``rest_client.request``, whose
    signature and body handling differ between client versions (31 takes
    ``query_params``, 36 rewrote JSON patches that are not lists as strategic
    merges, and ``update_params_for_auth`` changed its arity).
    """

    def __init__(self, api_client: ApiClient) -> None:
        self.api_client = api_client

    def request(
        self,
        method: str,
        path: str,
        *,
        query: Mapping[str, Any] | Sequence[tuple[str, Any]] | None = None,
        body: Any = None,
        content_type: str | None = None,
        timeout: float | tuple[float, float] | None = None,
    ) -> Any:
        config = self.api_client.configuration
        url = config.host.rstrip("/") + path
        if query:
            pairs = query.items() if isinstance(query, Mapping) else query
            url += "?" + urlencode([(k, _query_value(v)) for k, v in pairs if v is not None])
        headers = {"Accept": "application/json", **self.api_client.default_headers, **auth_headers(config)}
        payload = None
        if body is not None:
            headers["Content-Type"] = content_type or "application/json"
            payload = _encoded(body)
        try:
            response = self.api_client.rest_client.pool_manager.request(
                method, url, body=payload, headers=headers, timeout=_timeout(timeout or DEFAULT_TIMEOUT)
            )
        except urllib3.exceptions.SSLError as error:
            raise ApiError(0, f"TLS error: {error}", "", method=method, path=path) from None
        data = response.data
        if not 200 <= response.status < 300:
            text = data.decode("utf-8", "replace") if data else ""
            raise ApiError(response.status, response.reason or "", text, method=method, path=path)
        return json.loads(data) if data else None


def auth_headers(configuration: Any) -> dict[str, str]:
    """The headers a client configuration authenticates with (a bearer token; client certificates
    are in the TLS pool), refreshed through the configuration's own hook when it has one."""
    headers: dict[str, str] = {}
    for setting in (configuration.auth_settings() or {}).values():
        if setting.get("in") == "header" and setting.get("value"):
            headers[setting["key"]] = setting["value"]
    return headers


def _encoded(body: Any) -> bytes:
    if isinstance(body, bytes):
        return body
    if isinstance(body, str):
        return body.encode()
    return json.dumps(body).encode()


def _timeout(timeout: float | tuple[float, float]) -> urllib3.Timeout:
    if isinstance(timeout, tuple):
        return urllib3.Timeout(connect=timeout[0], read=timeout[1])
    return urllib3.Timeout(total=timeout)


def segment(value: str) -> str:
    """A URL path segment (names may not contain '/', but be safe)."""
    return quote(value, safe="")


def _query_value(value: Any) -> Any:
    if isinstance(value, bool):
        return "true" if value else "false"
    return value
