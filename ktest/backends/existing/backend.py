"""Backend ``existing``: any cluster reachable through a kubeconfig context.

Before any test runs, ``/version`` (:func:`check_reachable`) and a SelfSubjectReview
(:func:`check_identity`: credentials that never loaded leave the client anonymous, which
``/version`` accepts) turn a bad context into one error naming the cause and the fix.

Safety first: the context must be named explicitly and be the kubeconfig's current context,
so a test run cannot land on a production cluster because someone's kubeconfig pointed there.
ktest deletes only the namespaces it created (``app.kubernetes.io/managed-by=ktest``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import re
import shlex
import shutil
import socket
import ssl
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import urllib3

from ktest.backends.existing.exec_bound import bounded_exec
from ktest.backends.existing.private_kubeconfig import (
    EXEC_PLUGIN_TIMEOUT,
    PrivateKubeconfig,
    context_entries,
    load_kubeconfig,
)
from ktest.cluster import Cluster
from ktest.cluster.namespaces import sweep_dead_namespaces
from ktest.cluster.rest import auth_headers
from ktest.config import Settings
from ktest.controlplane.plane import default_base_directory
from ktest.errors import ClusterError, ConfigError
from ktest.sessions.backend import Backend, ClusterShare

DEFAULT_PROBE_TIMEOUT = 10.0


class ExistingBackend(Backend):
    """A cluster ktest did not start: nothing is stopped on :meth:`close`."""

    name = "existing"

    def __init__(
        self,
        kubeconfig: Path,
        context: str,
        *,
        timeout: float = DEFAULT_PROBE_TIMEOUT,
        run_dir: Path | None = None,
        exec_timeout: float = EXEC_PLUGIN_TIMEOUT,
    ) -> None:
        check_context(kubeconfig, context)
        self.kubeconfig = kubeconfig
        self.context = context
        # The client gets a copy whose credentials are files, so it writes none to $TMPDIR.
        self._private = PrivateKubeconfig(
            kubeconfig, context, base=run_dir or default_base_directory(), exec_timeout=exec_timeout
        )
        try:
            with self._naming_the_users_file():
                cluster = Cluster(self._private.path, context=context, controllers=None, name=context)
            super().__init__(cluster)
        except BaseException:
            self._private.close()
            raise
        try:
            with self._naming_the_users_file():
                check_reachable(self.cluster, kubeconfig, context, timeout, exec_timeout)
                self.user = check_identity(self.cluster, kubeconfig, context, timeout, exec_timeout)
            # What killed sessions of this machine left (their kill -9 deleted nothing).
            self.namespace_sweep = sweep_dead_namespaces(self.cluster)
        except BaseException:
            self.close()
            raise

    @contextlib.contextmanager
    def _naming_the_users_file(self) -> Iterator[None]:
        """Errors that name ktest's private copy of the kubeconfig name the user's file instead
        (the one they can open and fix)."""
        try:
            yield
        except (ClusterError, ConfigError) as error:
            text = str(error)
            private = (str(self._private.path), str(self._private.directory))
            if not any(path in text for path in private):
                raise
            text = text.replace(private[0], str(self.kubeconfig))
            text = text.replace(private[1], f"ktest's private copy of {self.kubeconfig}")
            raise type(error)(text if text.startswith("backend") else f"backend existing: {text}") from None

    def close(self) -> None:
        try:
            super().close()
        finally:
            self._private.close()

    def describe(self) -> str:
        cluster = self.cluster
        return f"existing cluster {cluster.server} (context {self.context}, Kubernetes {cluster.version})"

    def share(self) -> ClusterShare:
        return ClusterShare(
            kubeconfig=str(self._private.path),
            version=self.cluster.version,
            description=self.describe(),
            context=self.context,
        )


def check_context(kubeconfig: Path, context: str) -> None:
    """Raise ConfigError unless ``context`` exists in ``kubeconfig`` and is its current context."""
    config = load_kubeconfig(kubeconfig)
    names = [entry.get("name") for entry in config.get("contexts") or () if isinstance(entry, dict)]
    if context not in names:
        raise ConfigError(
            f"backend existing: context {context!r} is not in {kubeconfig} "
            f"(it has: {', '.join(map(str, names)) or 'no contexts'}); name one of those"
        )
    current = config.get("current-context") or ""
    if current != context:
        raise ConfigError(
            f"backend existing: refusing to run: the current context of {kubeconfig} is "
            f"{current or '(unset)'!r}, not {context!r} as named for the tests. Switch to it first "
            f"(kubectl --kubeconfig {kubeconfig} config use-context {context}) or name {current!r} "
            "if that is really the cluster to test against"
        )


def check_reachable(
    cluster: Cluster,
    kubeconfig: Path,
    context: str,
    timeout: float,
    exec_timeout: float = EXEC_PLUGIN_TIMEOUT,
) -> None:
    """GET ``/version`` once, without retries; raise ClusterError saying what failed and how to check."""
    response = _send_once(cluster, kubeconfig, context, timeout, "GET", "/version")
    cause = credentials_problem(kubeconfig, context, exec_timeout) if response.status == 401 else None
    if cause is not None:
        what = f"the server rejected the requests as not authenticated (HTTP 401): {cause}"
    elif response.status in (401, 403):
        what = (
            f"the server rejected the credentials of context {context!r} (HTTP {response.status}: "
            f"{'not authenticated' if response.status == 401 else 'forbidden'}): the client "
            "certificate or token is expired, revoked, or belongs to another cluster"
        )
    elif response.status >= 400:
        what = f"GET /version answered HTTP {response.status}: {response.data[:200]!r}"
    else:
        return
    raise ClusterError(_unreachable(cluster.server, kubeconfig, context, what))


def _send_once(
    cluster: Cluster, kubeconfig: Path, context: str, timeout: float, method: str, path: str,
    body: dict[str, Any] | None = None,
) -> urllib3.BaseHTTPResponse:
    """One request with the context's credentials, without retries; a ClusterError saying what
    failed (DNS, refused, timeout, TLS) and how to check when no answer comes."""
    client = cluster.api_client
    headers = {"Accept": "application/json", **client.default_headers, **auth_headers(client.configuration)}
    if body is not None:
        headers["Content-Type"] = "application/json"
    try:
        return client.rest_client.pool_manager.request(
            method,
            cluster.server.rstrip("/") + path,
            body=None if body is None else json.dumps(body).encode(),
            headers=headers,
            timeout=urllib3.Timeout(connect=timeout, read=timeout),
            retries=False,
        )
    except urllib3.exceptions.HTTPError as error:
        what = _what_failed(error, cluster.server, timeout)
        raise ClusterError(_unreachable(cluster.server, kubeconfig, context, what)) from None


ANONYMOUS_USER = "system:anonymous"
SELF_SUBJECT_REVIEW_VERSIONS = ("v1", "v1beta1")  # GA in Kubernetes 1.28, beta in 1.27
_FORBIDDEN_USER = re.compile(r'User "([^"]*)" cannot')


def check_identity(
    cluster: Cluster,
    kubeconfig: Path,
    context: str,
    timeout: float,
    exec_timeout: float = EXEC_PLUGIN_TIMEOUT,
) -> str | None:
    """Ask the server who the client is (a SelfSubjectReview); return that user name.

    Raise ClusterError when the server takes the client for ``system:anonymous``: the
    context's credentials never loaded, or it has none. None when the server cannot say
    (no SelfSubjectReview API: Kubernetes before 1.27).
    """
    server = cluster.server
    for version in SELF_SUBJECT_REVIEW_VERSIONS:
        body = {"apiVersion": f"authentication.k8s.io/{version}", "kind": "SelfSubjectReview"}
        path = f"/apis/authentication.k8s.io/{version}/selfsubjectreviews"
        response = _send_once(cluster, kubeconfig, context, timeout, "POST", path, body)
        if response.status == 404:
            continue
        user = _reviewed_user(response.status, response.data)
        if user == ANONYMOUS_USER:
            raise ClusterError(_anonymous(server, kubeconfig, context, exec_timeout))
        return user
    return None


def _reviewed_user(status: int, data: bytes) -> str | None:
    """The user name a SelfSubjectReview answer names: its userInfo, or, when the user may not
    create one, the name in the Forbidden message."""
    try:
        answer: Any = json.loads(data)
    except ValueError:
        return None
    if not isinstance(answer, dict):
        return None
    if status < 300:
        user_info = (answer.get("status") or {}).get("userInfo") or {}
        return str(user_info.get("username") or "") or None
    found = _FORBIDDEN_USER.search(str(answer.get("message") or "")) if status == 403 else None
    return found.group(1) if found else None


def _anonymous(server: str, kubeconfig: Path, context: str, exec_timeout: float) -> str:
    user = _context_user(kubeconfig, context)[0]
    cause = credentials_problem(kubeconfig, context, exec_timeout) or (
        f"the credentials of user {user!r} did not authenticate (the server fell back to anonymous)"
    )
    return (
        f"backend existing: the API server {server} takes the client of context {context!r} "
        f"(user {user!r}) in {kubeconfig} for {ANONYMOUS_USER}: its credentials never reached "
        f"the server. Cause: {cause}.\nCheck by hand with: {_by_hand(kubeconfig, context, 'auth whoami')}"
    )


def _context_user(kubeconfig: Path, context: str) -> tuple[str, dict[str, Any] | None]:
    """The name of the context's user and that user's entry (None when the kubeconfig has none)."""
    try:
        context_entry, _, entry = context_entries(load_kubeconfig(kubeconfig), context)
    except ConfigError:
        return "", None
    user_name = (context_entry.get("context") or {}).get("user") or ""
    if not user_name or entry is None:
        return str(user_name), None
    body = entry.get("user")
    return str(user_name), body if isinstance(body, dict) else {}


def credentials_problem(
    kubeconfig: Path, context: str, exec_timeout: float = EXEC_PLUGIN_TIMEOUT
) -> str | None:
    """Why the context's user sends no credentials, with the fix; None when nothing looks wrong."""
    user_name, user = _context_user(kubeconfig, context)
    where = f"users[{user_name}].user in {kubeconfig}"
    if not user_name:
        return f"context {context!r} names no user; add one with credentials to the context in {kubeconfig}"
    if user is None:
        return f"context {context!r} names user {user_name!r}, which is not in {kubeconfig}; add it"
    exec_config = user.get("exec")
    if isinstance(exec_config, dict):
        return _exec_problem(exec_config, user_name, kubeconfig, context, where, exec_timeout)
    token_file = user.get("tokenFile")
    if isinstance(token_file, str) and token_file and not user.get("token"):
        path = Path(token_file) if os.path.isabs(token_file) else kubeconfig.parent / token_file
        if not path.is_file():
            return f"the token file {path} of user {user_name!r} does not exist; fix tokenFile in {where}"
    credentials = (
        "token", "tokenFile", "client-certificate", "client-certificate-data", "client-key",
        "client-key-data", "auth-provider", "username",
    )
    if not any(user.get(field) for field in credentials):
        return (
            f"user {user_name!r} has no credentials (no client certificate, token, exec plugin or "
            f"auth provider); add them to {where}"
        )
    return None


def _exec_problem(
    exec_config: dict[str, Any],
    user_name: str,
    kubeconfig: Path,
    context: str,
    where: str,
    exec_timeout: float,
) -> str:
    command = str(exec_config.get("command") or "")
    if not command:
        return f"the exec plugin of user {user_name!r} has no command; set exec.command in {where}"
    if os.sep in command:  # as kubectl does: a relative path is relative to the kubeconfig's directory
        path = Path(command) if os.path.isabs(command) else kubeconfig.parent / command
        found = str(path) if path.is_file() and os.access(path, os.X_OK) else None
    else:
        found = shutil.which(command)
    if found is None:
        hint = exec_config.get("installHint")
        return (
            f"the exec plugin command {command!r} of user {user_name!r} is not found "
            f"({'no executable file there' if os.sep in command else 'not on PATH'}); install it"
            + (f" ({str(hint).strip()})" if hint else "")
            + f" or fix exec.command in {where}"
        )
    from kubernetes.config.exec_provider import ExecProvider
    from kubernetes.config.kube_config import ConfigNode

    what = (
        f"the exec credential plugin of user {user_name!r} in {kubeconfig} (ktest waited for the "
        f"credentials of context {context!r})"
    )
    bounded = bounded_exec(
        {**exec_config, "command": found}, timeout=exec_timeout, what=what, cwd=str(kubeconfig.parent)
    )
    try:
        ExecProvider(ConfigNode("exec", bounded), str(kubeconfig.parent)).run()
    except Exception as error:
        failed = str(error).strip().rstrip(".")
        return f"the exec plugin {found} of user {user_name!r} failed: {failed}; fix it or exec in {where}"
    return f"the exec plugin {found} of user {user_name!r} gave credentials the server did not take"


def _what_failed(error: urllib3.exceptions.HTTPError, server: str, timeout: float) -> str:
    url = urlparse(server)
    host, port = url.hostname or server, url.port or (443 if url.scheme == "https" else 80)
    causes = _causes(error)
    if isinstance(error, urllib3.exceptions.NameResolutionError) or any(
        isinstance(cause, socket.gaierror) for cause in causes
    ):
        return (
            f"DNS: the host name {host!r} does not resolve "
            "(is it spelled right, are you on the right network or VPN?)"
        )
    if any(isinstance(cause, ConnectionRefusedError) for cause in causes):
        return (
            f"connection refused: nothing listens on {host}:{port} "
            "(is the cluster running, is the port right?)"
        )
    if isinstance(error, urllib3.exceptions.ConnectTimeoutError):
        return (
            f"timeout: no connection to {host}:{port} within {timeout:g} s "
            "(a firewall, a missing VPN, or the host is down)"
        )
    if isinstance(error, urllib3.exceptions.ReadTimeoutError) or any(
        isinstance(cause, (TimeoutError, socket.timeout)) for cause in causes
    ):
        return f"timeout: {host}:{port} accepted the connection but did not answer within {timeout:g} s"
    if any(isinstance(cause, (urllib3.exceptions.SSLError, ssl.SSLError)) for cause in causes):
        detail = str(error)
        if "CERTIFICATE_VERIFY_FAILED" in detail and "ostname" in detail:
            return f"TLS: the server's certificate is not valid for the host name {host!r} ({detail})"
        if "CERTIFICATE_VERIFY_FAILED" in detail:
            return (
                "TLS: the server's certificate is not signed by the certificate authority in the kubeconfig "
                f"(certificate-authority/-data of the context's cluster): {detail}"
            )
        return f"TLS handshake failed: {detail}"
    return f"{type(error).__name__}: {error}"


def _causes(error: BaseException) -> list[BaseException]:
    found: list[BaseException] = []
    current: BaseException | None = error
    while current is not None and len(found) < 10:
        found.append(current)
        reason = getattr(current, "reason", None)
        current = reason if isinstance(reason, BaseException) else current.__cause__ or current.__context__
    return found


def _unreachable(server: str, kubeconfig: Path, context: str, what: str) -> str:
    return (
        f"backend existing: cannot use the API server {server} of context {context!r} in {kubeconfig}: "
        f"{what}.\nCheck by hand with: {_by_hand(kubeconfig, context, 'get --raw /version')}"
    )


def _by_hand(kubeconfig: Path, context: str, command: str) -> str:
    """The kubectl command line that asks the same of the same context."""
    return f"kubectl --kubeconfig {shlex.quote(str(kubeconfig))} --context {shlex.quote(context)} {command}"


def open_existing(settings: Settings, notes: list[str]) -> Backend:
    """The existing backend: the cluster of the named context (checked by :func:`check_settings`)."""
    assert settings.kubeconfig is not None and settings.context is not None
    backend = ExistingBackend(settings.kubeconfig, settings.context, run_dir=settings.run_dir)
    swept = backend.namespace_sweep.summary()
    if swept:
        notes.append(swept.replace("\n", "; "))
    return backend


def check_settings(settings: Settings, env: Mapping[str, str]) -> Settings:
    """Backend existing needs the context named explicitly (a run must not land on another
    cluster by accident) and a kubeconfig that exists (default: ``$KUBECONFIG``, ~/.kube/config)."""
    from ktest.config import default_kubeconfig, specs_by_name

    if not settings.context:
        spec = specs_by_name()["context"]
        raise ConfigError(
            "backend existing needs the kubeconfig context named explicitly, so that a test run "
            f"cannot land on another cluster by accident: set {spec.option}, ini {spec.ini} or "
            f"{spec.env} to the context to test against"
        )
    kubeconfig = settings.kubeconfig or default_kubeconfig(env)
    if not kubeconfig.is_file():
        spec = specs_by_name()["kubeconfig"]
        raise ConfigError(
            f"backend existing: kubeconfig {kubeconfig} ({settings.source_of('kubeconfig')}) does not "
            f"exist; point {spec.option}, ini {spec.ini} or {spec.env} at one"
        )
    return dataclasses.replace(settings, kubeconfig=kubeconfig)


def preflight(settings: Settings) -> None:
    """The named context must be the kubeconfig's current one (see :func:`check_context`)."""
    if settings.kubeconfig is not None and settings.context:
        check_context(settings.kubeconfig, settings.context)
