"""ktest's HTTPS front server: the one address every rewritten webhook points at.

It answers Python handlers itself, forwards the other calls to the operator's own webhook
server (verified against ktest's CA) and records each call (:mod:`ktest.webhooks.calls`);
ktest's readiness probes are answered here and never reach the operator.

Only the API server may call it: every path starts with a secret segment only the installed
configurations carry, and on the embedded control plane a client without the API server's
admission-webhook client certificate fails the TLS handshake; refused requests are neither
read nor logged. A client that connects and says nothing cannot pin the test's threads: the
limits below bound connections, handshakes and idle time, and at the cap the oldest connection
that has not proved it is the API server makes room (:mod:`ktest.base.connection_cap`); one that
passed the client-certificate check or carried the path secret is never closed to make room, so
the API server's kept-alive connection goes on serving its calls through a flood of others.
"""

from __future__ import annotations

import base64
import errno
import hmac
import http.client
import json
import logging
import ssl
import threading
import traceback
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from ktest.base.connection_cap import ConnectionCap
from ktest.errors import WebhookError
from ktest.webhooks.calls import CallLog, WebhookCall
from ktest.webhooks.handlers import AdmissionRequest, Registration, answer_admission, answer_conversion
from ktest.webhooks.routes import PROBE_PREFIX, Route, RouteTable

log = logging.getLogger("ktest.webhooks")

MAX_CONNECTIONS = 64
"""Connections one listener holds at most (each has a thread while open). The API server opens
one per call in flight and keeps it for the next; a test's calls come far below this."""
LISTEN_BACKLOG = 128
"""Connections the kernel queues before they are accepted (Python's socketserver default: 5)."""
HANDSHAKE_TIMEOUT = 10.0
"""Seconds a client has to complete the TLS handshake once connected."""
IDLE_TIMEOUT = 120.0
"""Seconds a connection may wait for its next request (or a read inside one): longer than the API
server keeps an idle webhook connection (90 s), so that it, not ktest, closes its own."""


class FrontServer:
    """Listens on ``host:port`` (0: a free port) with ``context``; see the module docstring.

    With ``conversion_context`` (given when ``context`` requires the API server's client
    certificate, which it does not present to CRD conversion webhooks), conversion calls
    get a listener of their own on another port that answers conversion routes only:
    admission routes stay behind the certificate, conversions behind the path secret.
    """

    def __init__(
        self,
        host: str,
        port: int,
        context: ssl.SSLContext,
        routes: RouteTable,
        calls: CallLog,
        *,
        upstream: tuple[str, int],
        upstream_context: ssl.SSLContext,
        probe_name: str,
        path_secret: str,
        conversion_context: ssl.SSLContext | None = None,
    ) -> None:
        if len(path_secret) < 16:
            raise WebhookError("the front server's path secret must be long enough not to be guessed")
        # Every URL ktest writes into a clientConfig starts with /<path_secret>/: only the API
        # server, which read it from the configuration, knows it. A request without it (another
        # local user, a Pod on the kind network) is refused before anything is read or recorded.
        self._path_prefix = f"/{path_secret}"
        self.routes = routes
        self.calls = calls
        self.upstream = upstream
        self.upstream_context = upstream_context
        self.probe_name = probe_name  # objects named like this are ktest's probes
        self.probe_hits: set[str] = set()
        self.handler_errors: list[str] = []
        self._probe_lock = threading.Lock()
        self.requires_client_certificate = context.verify_mode == ssl.CERT_REQUIRED
        self._servers = [_listen(self, host, port, context, conversions_only=False)]
        try:
            if conversion_context is not None:
                self._servers.append(_listen(self, host, 0, conversion_context, conversions_only=True))
        except BaseException:
            self._servers[0].server_close()
            raise
        self.host, self.port = host, self._servers[0].server_address[1]
        self.conversion_port: int = self._servers[-1].server_address[1]
        self._threads = [
            threading.Thread(target=server.serve_forever, name="ktest-webhooks", daemon=True)
            for server in self._servers
        ]
        for thread in self._threads:
            thread.start()

    def close(self) -> None:
        for server in self._servers:
            server.shutdown()
            server.server_close()
            server.connections.close_all()
        for thread in self._threads:
            thread.join(timeout=5)

    def probe_hit(self, key: str) -> None:
        with self._probe_lock:
            self.probe_hits.add(key)

    # ------------------------------------------------------------ answering

    def authorized_path(self, path: str, *, conversions_only: bool = False) -> str | None:
        """``path`` without its secret prefix; None when the request does not carry the secret,
        or (``conversions_only``: on the conversion listener) names no conversion route."""
        given, separator, rest = path.partition("/")[2].partition("/")
        if not separator or not hmac.compare_digest(f"/{given}".encode(), self._path_prefix.encode()):
            return None
        if conversions_only:
            route = self.routes.find(f"/{rest}")
            if route is None or route.kind != "conversion":
                return None
        return f"/{rest}"

    def answer(self, path: str, body: bytes) -> tuple[int, bytes]:
        """The HTTP status and body for one POST from the API server (``path`` without the secret)."""
        if path.startswith(PROBE_PREFIX):
            self.probe_hit(path)
            review = json.loads(body)
            return 200, _review(review, {"uid": review["request"]["uid"], "allowed": True})
        route = self.routes.find(path)
        if route is None:
            return 404, f"ktest: no webhook is served at {path}".encode()
        review = json.loads(body)
        if self._is_probe(review):
            self.probe_hit(route.path)
            return 200, _review(review, _probe_answer(review))
        call = WebhookCall(
            webhook=route.webhook,
            kind=route.kind,
            served_by=_served_by(route, self.upstream),
            failure_policy=route.failure_policy,
            timeout_seconds=route.timeout_seconds,
        )
        _describe_request(call, review)
        self.calls.add(call)
        try:
            if route.handler is not None:
                status, answer = self._python(route.handler, review, call)
            else:
                status, answer = self._forward(route, body, call)
        finally:
            call.finish()
        return status, answer

    def _python(
        self, registration: Registration, review: dict[str, Any], call: WebhookCall
    ) -> tuple[int, bytes]:
        try:
            if registration.kind == "conversion":
                response = answer_conversion(registration, review["request"])
            else:
                response = answer_admission(registration, AdmissionRequest(review["request"]))
        except Exception as error:
            text = "".join(traceback.format_exception_only(type(error), error)).strip()
            failed = _failed(call, 500, f"the Python handler {registration.function.__name__} raised {text}")
            self.handler_errors.append(call.describe() + "\n" + "".join(traceback.format_exception(error)))
            return failed
        _record_answer(call, response)
        return 200, _review(review, response)

    def _forward(self, route: Route, body: bytes, call: WebhookCall) -> tuple[int, bytes]:
        host, port = self.upstream
        server = f"the operator's webhook server at {host}:{port}"
        connection = http.client.HTTPSConnection(
            host, port, context=self.upstream_context, timeout=route.timeout_seconds + 1
        )
        try:
            connection.request("POST", route.target_path, body, {"Content-Type": "application/json"})
            response = connection.getresponse()
            answer = response.read()
        except ssl.SSLCertVerificationError as error:
            return _failed(call, 502, (
                f"{server} presents a certificate ktest did not issue ({error.verify_message}): start it "
                "with ktest's certificate (cert dir, port and host from Webhooks: e.g. --webhook-cert-dir "
                "for a controller-runtime manager)"
            ))
        except ConnectionRefusedError:
            return _failed(call, 502, (
                f"{server} is unreachable (connection refused): is the operator running, and was it given "
                "this port?"
            ))
        except TimeoutError:
            return _failed(call, 504, (
                f"{server}{route.target_path} did not answer within timeoutSeconds={route.timeout_seconds:g}"
            ))
        except (OSError, http.client.HTTPException) as error:
            return _failed(call, 502, f"calling {server}{route.target_path} failed: {error}")
        finally:
            connection.close()
        if response.status != 200:
            call.error = (
                f"the operator's webhook server answered HTTP {response.status} at {route.target_path}: "
                f"{answer[:300].decode('utf-8', 'replace').strip()}"
                + (
                    " (no handler at this path: does the manifest's path match the operator's?)"
                    if response.status == 404
                    else ""
                )
            )
            return response.status, answer
        try:
            _record_answer(call, json.loads(answer).get("response") or {})
        except ValueError:
            call.error = (
                f"the operator's webhook server answered something that is not JSON: {answer[:200]!r}"
            )
        return 200, answer

    def _is_probe(self, review: dict[str, Any]) -> bool:
        request = review.get("request") or {}
        if review.get("kind") == "ConversionReview":
            objects = request.get("objects") or ()
            return bool(objects) and all(
                str((o.get("metadata") or {}).get("name", "")).startswith(self.probe_name) for o in objects
            )
        name = request.get("name") or ((request.get("object") or {}).get("metadata") or {}).get("name") or ""
        return str(name).startswith(self.probe_name)


def _failed(call: WebhookCall, status: int, error: str) -> tuple[int, bytes]:
    """Record why no valid answer reached the API server, and answer it so."""
    call.error = error
    return status, f"ktest: {error}".encode()


def _served_by(route: Route, upstream: tuple[str, int]) -> str:
    if route.handler is not None:
        return f"python handler {route.handler.function.__name__}"
    return f"operator at {upstream[0]}:{upstream[1]}{route.target_path}"


def _describe_request(call: WebhookCall, review: dict[str, Any]) -> None:
    request = review.get("request") or {}
    if review.get("kind") == "ConversionReview":
        objects = request.get("objects") or ()
        names = ", ".join(_object_name(o) for o in objects[:3]) + (" ..." if len(objects) > 3 else "")
        call.operation = f"convert to {request.get('desiredAPIVersion')}"
        call.object = names
        return
    call.operation = str(request.get("operation", ""))
    kind = (request.get("kind") or {}).get("kind", "")
    name = request.get("name") or ((request.get("object") or {}).get("metadata") or {}).get(
        "generateName", "?"
    )
    namespace = request.get("namespace")
    call.object = f"{kind} {namespace + '/' if namespace else ''}{name}"


def _object_name(obj: dict[str, Any]) -> str:
    meta = obj.get("metadata") or {}
    namespace = meta.get("namespace")
    where = f"{namespace}/" if namespace else ""
    return f"{obj.get('kind')} {where}{meta.get('name')} ({obj.get('apiVersion')})"


def _record_answer(call: WebhookCall, response: dict[str, Any]) -> None:
    if "convertedObjects" in response or ("result" in response and "allowed" not in response):
        result = response.get("result") or {}
        if result.get("status") == "Failure":
            call.error = f"the conversion failed: {result.get('message')}"
        else:
            call.message = f"converted {len(response.get('convertedObjects') or ())} object(s)"
        return
    call.allowed = bool(response.get("allowed"))
    status = response.get("status") or {}
    if not call.allowed:
        call.message = str(status.get("message") or status.get("reason") or "(no message)")
    elif response.get("patch"):
        try:
            operations = json.loads(base64.b64decode(response["patch"]))
            call.message = "patched " + ", ".join(f"{op['op']} {op['path']}" for op in operations)
        except (ValueError, KeyError, TypeError):
            call.message = "patched"


def _probe_answer(review: dict[str, Any]) -> dict[str, Any]:
    request = review["request"]
    if review.get("kind") == "ConversionReview":
        desired = request["desiredAPIVersion"]
        return {
            "uid": request["uid"],
            "convertedObjects": [{**o, "apiVersion": desired} for o in request.get("objects") or ()],
            "result": {"status": "Success"},
        }
    return {"uid": request["uid"], "allowed": True}


def _review(review: dict[str, Any], response: dict[str, Any]) -> bytes:
    return json.dumps(
        {"apiVersion": review.get("apiVersion"), "kind": review.get("kind"), "response": response}
    ).encode()


def _listen(
    front: FrontServer, host: str, port: int, context: ssl.SSLContext, *, conversions_only: bool
) -> _Server:
    try:
        server = _Server((host, port), _RequestHandler)
    except OSError as error:
        if error.errno == errno.EADDRINUSE:
            raise WebhookError(
                f"cannot serve webhooks on {host}:{port}: the port is already taken by another process; "
                "pass another port, or port=0 for a free one"
            ) from None
        if error.errno == errno.EADDRNOTAVAIL:
            raise WebhookError(
                f"cannot serve webhooks on {host}:{port}: this machine has no address {host} "
                "(for kind, the Docker network's gateway; is the cluster's network gone?)"
            ) from None
        raise
    server.front = front
    server.conversions_only = conversions_only
    server.connections = ConnectionCap(MAX_CONNECTIONS)
    server.trusts_handshake = context.verify_mode == ssl.CERT_REQUIRED
    # The handshake runs in the connection's thread, within HANDSHAKE_TIMEOUT: a client that
    # stalls it (or, with a required client certificate, fails it) holds up nobody else.
    server.socket = context.wrap_socket(server.socket, server_side=True, do_handshake_on_connect=False)
    return server


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = LISTEN_BACKLOG
    front: FrontServer
    conversions_only: bool  # the conversion listener: conversion routes only
    connections: ConnectionCap
    trusts_handshake: bool  # the handshake verifies the API server's client certificate

    def process_request(self, request: Any, client_address: Any) -> None:
        if not self.connections.admit(request):
            log.debug("webhook connection from %s closed: %d connections of the API server held",
                      client_address, self.connections.limit)
            self.shutdown_request(request)
            return
        thread = threading.Thread(
            target=self.process_request_thread, args=(request, client_address),
            name="ktest-webhooks-connection", daemon=True,
        )
        thread.start()

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self.connections.release(request)

    def handle_error(self, request: Any, client_address: Any) -> None:
        log.debug("webhook connection from %s failed", client_address, exc_info=True)


class _RequestHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def setup(self) -> None:
        self.request.settimeout(HANDSHAKE_TIMEOUT)
        self.request.do_handshake()  # TimeoutError, SSLError: handle_error logs it, the socket is closed
        if self.server.trusts_handshake:  # it presented the API server's client certificate
            self.server.connections.trust(self.request)
        self.request.settimeout(IDLE_TIMEOUT)
        super().setup()

    def do_POST(self) -> None:
        path = self.server.front.authorized_path(
            self.path.split("?", 1)[0], conversions_only=self.server.conversions_only
        )
        if path is None:  # not the API server: refused unread, never in the call log
            self._refuse()
            return
        self.server.connections.trust(self.request)  # it carried the secret: the API server's
        self._serve(path)

    def _serve(self, path: str) -> None:
        try:
            length = int(self.headers.get("Content-Length") or 0)
        except ValueError:
            length = -1
        if length < 0:
            status, answer = 400, b"ktest: a webhook request needs a Content-Length"
        else:
            body = self.rfile.read(length)
            try:
                status, answer = self.server.front.answer(path, body)
            except (ValueError, KeyError, TypeError) as error:
                status, answer = 400, f"ktest: not a valid review: {error}".encode()
        self._send(status, answer)

    def do_GET(self) -> None:
        self._refuse()

    def _refuse(self) -> None:
        self.close_connection = True
        self._send(403, b"ktest: forbidden")

    def _send(self, status: int, answer: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Type", "application/json" if status == 200 else "text/plain")
        self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("%s %s", self.address_string(), format % args)
