"""Plain JSON requests to the API server through a ``kubernetes`` ApiClient.

Tests work with dicts of any kind, so ktest talks REST directly (the typed clients need a model per
kind, the dynamic client re-runs discovery), reusing the ApiClient's TLS and credentials. Errors are
:class:`ktest.errors.api.ApiError`, also a ``kubernetes.client.ApiException``.

Like client-go, a refusal with ``Retry-After`` (429, or a 5xx such as a CRD's storage being
replaced) is sent again, writes included: it means the request was not served. The waits start
short and double up to Retry-After, since what a test cluster refuses for usually passes within
milliseconds. A body over :data:`MAX_REQUEST_BODY_BYTES` is refused here, unsent; a request an
environment proxy failed says how to bypass it (:mod:`ktest.base.environment_proxies`).
"""

from __future__ import annotations

import json
import logging
import math
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any
from urllib.parse import quote, urlencode

import urllib3
from kubernetes.client import ApiClient

from ktest.base.environment_proxies import proxy_advice
from ktest.errors.api import ApiError

PATCH_CONTENT_TYPES = {
    "merge": "application/merge-patch+json",
    "strategic": "application/strategic-merge-patch+json",
    "json": "application/json-patch+json",
    "apply": "application/apply-patch+yaml",
}

MAX_REQUEST_BODY_BYTES = 3 * 1024 * 1024
"""The largest request body kube-apiserver decodes for a write (its ``MaxRequestBodyBytes``, 3 MiB,
not a flag; larger ones get 413 "Request entity too large: limit is 3145728", or a reset
connection while the body is still being sent). etcd then stores objects of at most 1.5 MiB
(its ``--max-request-bytes``); the API server allows twice that because JSON shrinks on the way."""

LARGE_BODY_BYTES = 1024 * 1024
"""From this size on, a connection closed while the body is sent is reported as a refusal of its size."""

DEFAULT_TIMEOUT = (5.0, 30.0)  # (connect, read) seconds
WATCH_REFUSED_POLL = 0.05
"""How long :meth:`Rest.next_change` waits when the server refused its watch (the poll it replaces)."""
DEFAULT_RETRIES = 10  # client-go's limit for answers with Retry-After
FIRST_RETRY_WAIT = 0.05  # seconds; doubled on each retry, never beyond Retry-After

# urllib3's default, less its own Retry-After handling: it would sleep the full seconds asked,
# and only for the methods it deems idempotent (this module decides, for every method)
_CONNECTION_RETRIES = urllib3.Retry(3, respect_retry_after_header=False)

RequestObserver = Callable[[str, str, str, int, float], None]
"""Called after each answered request: (server URL, method, path with query, status, seconds taken)."""

request_observers: ContextVar[tuple[RequestObserver, ...]] = ContextVar("ktest_request_observers", default=())
"""Who is told of the requests sent in this context (a timeline recording: see ktest.timeline)."""

upkeep: ContextVar[bool] = ContextVar("ktest_upkeep", default=False)
"""True while ktest reads for its own clean-up (a namespace's sweep lists every kind in it): a
timeline shows those requests but opens no watch for what they list."""


@contextmanager
def for_upkeep() -> Iterator[None]:
    """Mark the requests sent in this block as ktest's own clean-up (see :data:`upkeep`)."""
    token = upkeep.set(True)
    try:
        yield
    finally:
        upkeep.reset(token)

log = logging.getLogger(__name__)


class Rest:
    """Sends one request, decodes JSON, raises ApiException on HTTP errors.

    Requests go straight to the ApiClient's urllib3 pool (its TLS, proxy and
    credentials), not through the generated ``rest_client.request``, whose
    signature and body handling differ between client versions (31 takes
    ``query_params``, 36 rewrote JSON patches that are not lists as strategic
    merges, and ``update_params_for_auth`` changed its arity).
    """

    def __init__(self, api_client: ApiClient, *, retries: int = DEFAULT_RETRIES) -> None:
        self.api_client = api_client
        self.retries = retries

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
        sent = path
        if query:
            pairs = query.items() if isinstance(query, Mapping) else query
            sent += "?" + urlencode([(k, _query_value(v)) for k, v in pairs if v is not None])
        url = config.host.rstrip("/") + sent
        headers = {"Accept": "application/json", **self.api_client.default_headers, **auth_headers(config)}
        payload = None
        if body is not None:
            headers["Content-Type"] = content_type or "application/json"
            payload = _encoded(body)
            if len(payload) > MAX_REQUEST_BODY_BYTES:
                raise _too_large(
                    method,
                    path,
                    f"not sent: the body is {size_text(len(payload))}, over the API server's limit of "
                    f"{size_text(MAX_REQUEST_BODY_BYTES)} for a request body; make the object smaller",
                )
        started = time.monotonic()
        for attempt in range(self.retries + 1):
            try:
                response = self.api_client.rest_client.pool_manager.request(
                    method,
                    url,
                    body=payload,
                    headers=headers,
                    timeout=_timeout(timeout or DEFAULT_TIMEOUT),
                    retries=_CONNECTION_RETRIES,
                )
            except urllib3.exceptions.SSLError as error:
                raise ApiError(0, f"TLS error: {error}", "", method=method, path=path) from None
            except urllib3.exceptions.MaxRetryError as error:
                pool = self.api_client.rest_client.pool_manager
                if isinstance(pool, urllib3.ProxyManager):
                    raise ApiError(
                        0,
                        f"failed through a proxy: {error.reason}",
                        "",
                        method=method,
                        path=path,
                        note=proxy_advice(config.host, str(pool.proxy)),
                    ) from None
                if payload is None or len(payload) < LARGE_BODY_BYTES:
                    raise
                reason = error.reason
                closed = isinstance(reason, urllib3.exceptions.ProtocolError) or (
                    isinstance(reason, urllib3.exceptions.SSLError) and "EOF" in str(reason)
                )
                if not closed:
                    raise
                raise _too_large(
                    method,
                    path,
                    f"the server closed the connection while a {size_text(len(payload))} body was "
                    "being sent, as a server refusing a body too large does (kube-apiserver takes at most "
                    f"{size_text(MAX_REQUEST_BODY_BYTES)}, etcd stores at most 1.5 MiB); make the object "
                    f"smaller ({error.reason})",
                ) from None
            asked = retry_after(response.status, response.headers)
            if asked is None or attempt == self.retries:
                break
            wait = min(asked, FIRST_RETRY_WAIT * 2**attempt)
            log.debug(
                "%s %s: %s %s with Retry-After; sending it again in %.1f s (retry %d of %d)",
                method,
                path,
                response.status,
                response.reason,
                wait,
                attempt + 1,
                self.retries,
            )
            time.sleep(wait)
        data = response.data
        for observe in request_observers.get():
            observe(config.host, method, sent, response.status, time.monotonic() - started)
        if not 200 <= response.status < 300:
            text = data.decode("utf-8", "replace") if data else ""
            note = ""
            if attempt:
                note = (
                    f"the API server asked to retry; {attempt + 1} attempts over "
                    f"{time.monotonic() - started:.1f} s were all refused"
                )
            elif response.status == 413 and payload is not None:
                note = (
                    f"the API server refused a {size_text(len(payload))} body (kube-apiserver takes at "
                    f"most {size_text(MAX_REQUEST_BODY_BYTES)}, etcd stores at most 1.5 MiB); make the "
                    "object smaller"
                )
            raise ApiError(response.status, response.reason or "", text, method=method, path=path, note=note)
        return json.loads(data) if data else None

    def next_change(self, collection: str, name: str, resource_version: str, seconds: float) -> bool:
        """Wait at most ``seconds`` for the object ``name`` of ``collection`` (a list path) to change
        after ``resource_version``: True once it did, False when nothing came. One watch request
        instead of a GET every 50 ms (what a namespace's deletion cost: about 100 GETs); a watch the
        server refuses or cuts (410 Gone, 403) waits a short poll instead."""
        config = self.api_client.configuration
        query = {"watch": "true", "fieldSelector": f"metadata.name={name}",
                 "resourceVersion": resource_version, "timeoutSeconds": max(1, math.ceil(seconds))}
        sent = f"{collection}?{urlencode(query)}"
        headers = {"Accept": "application/json", **self.api_client.default_headers, **auth_headers(config)}
        started = time.monotonic()
        status, changed = 0, False
        try:
            response = self.api_client.rest_client.pool_manager.request(
                "GET", config.host.rstrip("/") + sent, headers=headers, preload_content=False,
                timeout=urllib3.Timeout(connect=DEFAULT_TIMEOUT[0], read=seconds + 5), retries=False,
            )
            try:
                status = response.status
                # One byte says an event came; readline() would read the event byte by byte
                # (urllib3's response has no buffered readline): 2-3 ms of CPU per change.
                changed = status == 200 and bool(response.read(1))
            finally:
                response.close()  # a watch still streaming: its connection is not reused
                response.release_conn()
        except urllib3.exceptions.HTTPError as error:
            log.debug("watch of %s for %s failed: %s", collection, name, error)
        for observe in request_observers.get():
            observe(config.host, "GET", sent, status, time.monotonic() - started)
        if status != 200:
            time.sleep(min(seconds, WATCH_REFUSED_POLL))
        return changed


def retry_after(status: int, headers: Mapping[str, str]) -> float | None:
    """The ``Retry-After`` seconds of a refusal to send again, or None when it is not one: only a
    429 or 5xx answer with a Retry-After of whole seconds (what the API server sends)."""
    if status != 429 and status < 500:
        return None
    value = headers.get("Retry-After", "").strip()
    return float(value) if value.isdigit() else None


def auth_headers(configuration: Any) -> dict[str, str]:
    """The headers a client configuration authenticates with (a bearer token; client certificates
    are in the TLS pool), refreshed through the configuration's own hook when it has one."""
    settings = (configuration.auth_settings() or {}).values()
    return {s["key"]: s["value"] for s in settings if s.get("in") == "header" and s.get("value")}


def size_text(size: int) -> str:
    """``size`` bytes for a message: ``"20.0 MiB (20971540 bytes)"``."""
    return f"{size / 1024 / 1024:.1f} MiB ({size} bytes)"


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
    return str(value).lower() if isinstance(value, bool) else value


def _too_large(method: str, path: str, note: str) -> ApiError:
    """413 for a body the API server would not take (or did not let finish), with why."""
    return ApiError(413, "Request Entity Too Large", "", method=method, path=path, note=note)
