"""Run any command as the operator under test (a Go manager, ``python -m my_operator``, a script).

The process gets ``KUBECONFIG`` pointing at the test cluster (and none of the in-cluster
service-account variables that would make a client library ignore it), runs in its own process
group, dies with the test process (``ktest.base.process``) and writes to the handle's log.
``crash()`` is SIGKILL; ``stop()`` is SIGTERM, then SIGKILL after ``stop_timeout``. Loopback is
added to its ``NO_PROXY`` when the environment names a proxy (its client would send the test
cluster's requests there). ``{port}`` (a free port, kept across restarts) and ``{namespaces}``
in the command, ``args``, ``env`` or ``ready_http`` are replaced.
"""

from __future__ import annotations

import os
import re
import shlex
import signal
import ssl
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, overload

from ktest.base.environment_proxies import is_loopback, without_proxy_for_loopback
from ktest.errors import ControlPlaneError, OperatorError
from ktest.operators.operator import OperatorHandle, launch_replicated
from ktest.operators.options import OperatorOptions

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from ktest.base.process import ManagedProcess
    from ktest.cluster import Cluster

IN_CLUSTER_VARIABLES = ("KUBERNETES_SERVICE_HOST", "KUBERNETES_SERVICE_PORT", "KUBERNETES_SERVICE_PORT_HTTPS")
_HTTP_TIMEOUT = 1.0


class ProcessOperator(OperatorHandle):
    """An operator run as a child process."""

    kind = "subprocess"
    runner = "run_subprocess"

    def __init__(
        self,
        cmd: str | Sequence[str | Path],
        cluster: Cluster,
        *,
        args: Sequence[str | Path] = (),
        env: Mapping[str, str] | None = None,
        cwd: Path | str | None = None,
        ready_log: str | re.Pattern[str] | None = None,
        ready_http: str | None = None,
        name: str | None = None,
        **options: Any,
    ) -> None:
        command = shlex.split(cmd) if isinstance(cmd, str) else [str(part) for part in cmd]
        if not command:
            raise OperatorError(
                "run_subprocess needs a command, e.g. ['./bin/manager'] or 'python -m my_op'."
            )
        if ready_log is not None and ready_http is not None:
            raise OperatorError("run_subprocess: pass ready_log or ready_http, not both.")
        ready_pattern = _compile(ready_log)
        super().__init__(name or Path(command[0]).name, cluster, **options)
        if self.namespaces is None and any(
            "{namespaces}" in part for part in [*command, *map(str, args), *(env or {}).values()]
        ):
            raise OperatorError(
                "run_subprocess: {namespaces} appears in the command or env, but no namespaces=[...] "
                "was given; pass the namespaces the operator serves."
            )
        self.command = command + [str(arg) for arg in args]
        self.extra_env = dict(env or {})
        self.cwd = Path(cwd) if cwd is not None else None
        self.ready_pattern = ready_pattern
        self.ready_http = ready_http
        self._port: int | None = None
        self._process: ManagedProcess | None = None
        self._ready_scanned = 0
        self._last_probe = ""

    @property
    def port(self) -> int:
        """The free port substituted for ``{port}`` (chosen on first use)."""
        if self._port is None:
            from ktest.base.ports import free_ports

            self._port = free_ports(1)[0]
        return self._port

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process else None

    @property
    def returncode(self) -> int | None:
        return self._process.returncode if self._process else None

    @property
    def ready_url(self) -> str | None:
        return self._expand(self.ready_http) if self.ready_http else None

    # ------------------------------------------------------------ hooks

    def _launch(self) -> None:
        from ktest.base.process import ManagedProcess

        command = [self._expand(part) for part in self.command]
        env = {key: value for key, value in os.environ.items() if key not in IN_CLUSTER_VARIABLES}
        env["KUBECONFIG"] = str(self.api_cluster.kubeconfig)
        env.update({key: self._expand(str(value)) for key, value in self.extra_env.items()})
        if is_loopback(self.api_cluster.server):  # its API server or proxy: never via HTTPS_PROXY
            env = without_proxy_for_loopback(env)
        self._ready_scanned = self._run_mark
        self._last_probe = ""
        process = ManagedProcess(self.name, command, self.log.path, env=env, cwd=self.cwd)
        try:
            process.start()
        except ControlPlaneError as error:
            raise OperatorError(
                f"operator {self.name!r} could not be started: {error.__cause__ or error}.\n"
                f"Command: {shlex.join(command)}\n"
                "Check that the program exists, is executable, and that cwd= is right."
            ) from None
        self._process = process

    def _halt(self, timeout: float) -> bool:
        assert self._process is not None
        self._process.stop(timeout)
        return self._process.returncode != -signal.SIGKILL

    def _kill(self) -> None:
        if self._process is not None:
            self._process.kill()

    def _running(self) -> bool:
        return self._process is not None and self._process.running

    def _death_reason(self) -> str:
        code = self.returncode
        if code is None:
            return "is not running"
        if code < 0:
            return f"was killed by signal {signal.Signals(-code).name}"
        return f"exited with status {code}"

    def _is_ready(self) -> bool:
        if self.ready_pattern is not None:
            return self._log_matches()
        if self.ready_http is not None:
            return self._http_ready()
        return True

    def _not_ready_reason(self) -> str:
        if self.ready_pattern is not None:
            return f"no log line matched {self.ready_pattern.pattern!r}"
        if self.ready_http is not None:
            return f"GET {self.ready_url} did not answer 200 (last answer: {self._last_probe or 'none'})"
        return ""

    def _describe(self) -> str:
        command = shlex.join(self._expand(part) for part in self.command)
        return f"Command: {command}\nKUBECONFIG={self.api_cluster.kubeconfig}"

    # ------------------------------------------------------------ internals

    def _expand(self, text: str) -> str:
        if "{port}" in text:
            text = text.replace("{port}", str(self.port))
        if "{namespaces}" in text and self.namespaces is not None:
            text = text.replace("{namespaces}", ",".join(self.namespaces))
        return text.replace("{name}", self.name)

    def _log_matches(self) -> bool:
        assert self.ready_pattern is not None
        lines, self._ready_scanned = self.log.complete_lines(self._ready_scanned)
        return any(self.ready_pattern.search(line) for line in lines.splitlines())

    def _http_ready(self) -> bool:
        url = self.ready_url
        assert url is not None
        insecure = ssl.create_default_context()
        insecure.check_hostname = False
        insecure.verify_mode = ssl.CERT_NONE
        # The operator's own endpoint: an environment proxy (HTTP_PROXY) cannot reach its loopback.
        proxies = urllib.request.ProxyHandler({} if is_loopback(url) else None)
        opener = urllib.request.build_opener(proxies, urllib.request.HTTPSHandler(context=insecure))
        try:
            with opener.open(url, timeout=_HTTP_TIMEOUT) as answer:
                self._last_probe = f"{answer.status}"
                return bool(answer.status == 200)
        except urllib.error.HTTPError as error:
            body = error.read(300).decode("utf-8", "replace").strip()
            self._last_probe = f"{error.code} {body}".strip()
        except (urllib.error.URLError, OSError) as error:
            self._last_probe = str(getattr(error, "reason", error))
        return False


def _compile(pattern: str | re.Pattern[str] | None) -> re.Pattern[str] | None:
    if pattern is None or isinstance(pattern, re.Pattern):
        return pattern
    try:
        return re.compile(pattern)
    except re.error as error:
        raise OperatorError(f"ready_log={pattern!r} is not a valid regular expression: {error}.") from None


class ProcessOptions(OperatorOptions, total=False):
    """What ``run_subprocess`` takes beside :class:`~ktest.operators.options.OperatorOptions`
    (see :class:`ProcessOperator`)."""

    args: Sequence[str | Path]
    env: Mapping[str, str] | None
    cwd: Path | str | None
    ready_log: str | re.Pattern[str] | None
    ready_http: str | None


@overload
def run_subprocess(
    cmd: str | Sequence[str | Path],
    cluster: Cluster,
    *,
    replicas: Literal[1] = 1,
    **options: Unpack[ProcessOptions],
) -> ProcessOperator: ...
@overload
def run_subprocess(
    cmd: str | Sequence[str | Path], cluster: Cluster, *, replicas: int, **options: Unpack[ProcessOptions]
) -> Any: ...
def run_subprocess(
    cmd: str | Sequence[str | Path], cluster: Cluster, *, replicas: int = 1, **options: Unpack[ProcessOptions]
) -> ProcessOperator | Any:
    """Start ``cmd`` (+ ``args``) with ``KUBECONFIG`` set and wait until it is ready.

    Ready when a line of its output matches ``ready_log`` or when ``ready_http`` answers 200
    (e.g. ``"http://127.0.0.1:{port}/readyz"`` with ``--health-probe-bind-address=127.0.0.1:{port}``
    in ``args``); with neither, as soon as it started. ``{namespaces}`` in its arguments or
    environment becomes the ``namespaces=[...]`` it serves, comma-separated. ``proxy`` (default
    on) points ``KUBECONFIG`` at ktest's API proxy (``op.traffic``, ``op.faults``). The other
    keyword arguments: :class:`~ktest.operators.options.OperatorOptions`.

    ``replicas=3`` starts three processes side by side, each behind its own proxy, named
    ``<name>-0`` .. ``<name>-2`` (``{port}`` and ``{name}`` are each one's own), and returns
    their ``ktest.replicas.OperatorReplicas``: the operator's own leader election decides who works.
    """
    wait = options.pop("wait", True)
    return launch_replicated(
        "run_subprocess",
        replicas,
        lambda replica: ProcessOperator(cmd, cluster, replica=replica, **options),
        wait,
    )
