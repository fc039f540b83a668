"""``HTTPS_PROXY`` without ``NO_PROXY`` (common on corporate and CI machines) broke
every test with a 477-line proxy error: the kubernetes client sent ktest's loopback traffic to
the proxy. A child pytest session runs with ``HTTPS_PROXY``, ``HTTP_PROXY`` and ``ALL_PROXY``
pointing at a listener that records proxy requests (and never proxies anything), no ``NO_PROXY``;
its test uses the cluster, an in-process operator whose default kubernetes client goes through
ktest's operator proxy, and a Python subprocess operator probed over ``ready_http``. It must pass,
and the listener must see no request for this machine itself (a remote version listing may
rightly go through it). A positive control shows that the listener does see a
client that honours the variables."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import textwrap
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from hardening_helpers import files_with_key_material

from ktest.wait import eventually

CHILD_TEST = '''
import functools
import os
import pathlib
import sys

import kubernetes
import pytest

from ktest.operators import run_callable, run_subprocess
from ktest.wait import eventually

SUBPROCESS_OPERATOR = """
import http.server, os, sys
import kubernetes

namespace = sys.argv[1]
kubernetes.config.load_kube_config()  # KUBECONFIG: the operator proxy, on 127.0.0.1
api = kubernetes.client.CoreV1Api()
source = api.read_namespaced_config_map("source", namespace)
api.create_namespaced_config_map(namespace, {"metadata": {"name": "from-subprocess"}, "data": source.data})

class Ready(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200)
        self.end_headers()

print("serving", flush=True)
http.server.HTTPServer(("127.0.0.1", int(os.environ["READY_PORT"])), Ready).serve_forever()
"""


def in_process_operator(namespace, context):
    kubernetes.config.load_kube_config()  # routed by ktest to the operator's proxy
    api = kubernetes.client.CoreV1Api()
    source = api.read_namespaced_config_map("source", namespace)
    api.create_namespaced_config_map(namespace, {"metadata": {"name": "from-thread"}, "data": source.data})
    context.ready()
    context.stop.wait()


def test_everything_on_loopback_bypasses_the_environment_proxy(cluster, namespace, tmp_path):
    run_dir = pathlib.Path(os.environ["KTEST_RUN_DIR"])
    assert any(run_dir.iterdir()), "the session's control plane should be in KTEST_RUN_DIR while it runs"
    source = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "source"}, "data": {"k": "v"}}
    cluster.apply(source, namespace=namespace)
    user = cluster.user("someone", groups=["team"])  # a user's credentials in use (see the outer test)
    with pytest.raises(kubernetes.client.exceptions.ApiException) as forbidden:
        user.get(("v1", "ConfigMap", "source", namespace))
    assert forbidden.value.status == 403, forbidden.value
    operator = functools.partial(in_process_operator, namespace)
    with run_callable(operator, cluster, name="threaded") as threaded:
        copy = eventually(lambda: cluster.get(("v1", "ConfigMap", "from-thread", namespace)))
        assert copy["data"] == {"k": "v"}
        assert threaded.traffic.count(verb="create", resource="configmaps") == 1
    script = tmp_path / "operator.py"
    script.write_text(SUBPROCESS_OPERATOR)
    with run_subprocess(
        [sys.executable, str(script), namespace],
        cluster,
        env={"READY_PORT": "{port}"},
        ready_http="http://127.0.0.1:{port}/readyz",
    ) as process:
        copy = eventually(lambda: cluster.get(("v1", "ConfigMap", "from-subprocess", namespace)))
        assert copy["data"] == {"k": "v"}
        assert process.traffic.count(verb="create", resource="configmaps") == 1
'''

PROXY_REQUEST = re.compile(rb"^(CONNECT \S+|[A-Z]+ https?://\S+) HTTP/")
# A proxy request for this machine itself: what ktest's own traffic must never be.
LOOPBACK_TARGET = re.compile(rb"^[A-Z]+ (?:https?://)?(?:127\.\d+\.\d+\.\d+|localhost|\[::1\])[:/ ]")
PROXY_VARIABLES = ("HTTPS_PROXY", "HTTP_PROXY", "ALL_PROXY", "https_proxy", "http_proxy", "all_proxy")


class CountingListener:
    """A TCP listener standing in for an environment proxy: it records the first line of every
    connection and closes it. Only a proxy request (``CONNECT host:port`` or a request for an
    absolute ``http://`` URL) counts as use of the proxy: on a busy machine another test may
    connect to this port once someone else released it, and that is not a client honouring
    ``HTTPS_PROXY``."""

    def __init__(self) -> None:
        self.socket = socket.create_server(("127.0.0.1", 0))
        self.socket.settimeout(0.05)  # accept() wakes up to notice close()
        self.port = int(self.socket.getsockname()[1])
        self.first_lines: list[bytes] = []
        self._closed = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while not self._closed.is_set():
            try:
                connection, _ = self.socket.accept()
            except TimeoutError:
                continue
            with connection:
                connection.settimeout(2)
                try:
                    first = connection.recv(1024)
                except OSError:
                    first = b""
            self.first_lines.append(first.split(b"\r\n", 1)[0])

    @property
    def proxy_requests(self) -> list[bytes]:
        return [line for line in self.first_lines if PROXY_REQUEST.match(line)]

    def close(self) -> None:
        self._closed.set()
        self._thread.join(5)
        self.socket.close()


@pytest.fixture
def proxy_listener() -> Iterator[CountingListener]:
    listener = CountingListener()
    yield listener
    listener.close()


def _proxied_environment(port: int, tmp_path: Path) -> dict[str, str]:
    env = {
        name: value
        for name, value in os.environ.items()
        if name.upper() not in {*PROXY_VARIABLES, "NO_PROXY"} and not name.startswith("KTEST_")
    }
    for name in ("KTEST_CACHE_DIR", "KTEST_ASSETS"):
        if name in os.environ:
            env[name] = os.environ[name]
    proxy = f"http://127.0.0.1:{port}"
    env.update({name: proxy for name in ("HTTPS_PROXY", "HTTP_PROXY", "ALL_PROXY")})
    env.update(
        {
            "KTEST_BACKEND": "bare",
            "XDG_STATE_HOME": str(tmp_path / "state"),
            "PYTEST_ADDOPTS": f"-p no:cacheprovider {os.environ.get('PYTEST_ADDOPTS', '')}".strip(),
        }
    )
    return env


def test_a_client_that_honours_the_variables_reaches_the_listener(
    proxy_listener: CountingListener, tmp_path: Path
) -> None:
    """Positive control: the environment below does send a plain Python client to the listener."""
    script = textwrap.dedent(
        """
        import urllib.request
        try:
            urllib.request.urlopen("http://127.0.0.1:9/", timeout=5)
        except OSError:
            pass
        """
    )
    subprocess.run(
        [sys.executable, "-c", script],
        env=_proxied_environment(proxy_listener.port, tmp_path),
        timeout=60,
        check=True,
    )
    assert proxy_listener.proxy_requests, proxy_listener.first_lines


def test_a_session_with_https_proxy_and_no_no_proxy_passes_without_using_it(
    proxy_listener: CountingListener, tmp_path: Path
) -> None:
    """Its run, a session that used the cluster and a user's credentials and ended cleanly, is also
    test_leftovers.py's test_no_credentials_in_tmpdir_after_a_run for a clean exit (and the plugin's
    own plane stopping at a clean end, the control in test_interrupts.py): checked last, below."""
    test_file = tmp_path / "test_child.py"
    test_file.write_text(textwrap.dedent(CHILD_TEST))
    tmpdir, run_dir = tmp_path / "tmp", tmp_path / "run"
    tmpdir.mkdir()
    run_dir.mkdir()
    done = subprocess.run(
        [sys.executable, "-m", "pytest", str(test_file)],
        env={
            **_proxied_environment(proxy_listener.port, tmp_path),
            "TMPDIR": str(tmpdir),
            "KTEST_RUN_DIR": str(run_dir),
        },
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[:8000]
    assert "1 passed" in done.stdout, output[-3000:]
    # what ktest cannot route itself (a client the test builds from the kubeconfig) is said up front
    assert "ktest: ALL_PROXY, HTTPS_PROXY, HTTP_PROXY set and NO_PROXY does not name 127.0.0.1" in done.stdout
    assert "export NO_PROXY=127.0.0.1,localhost" in done.stdout
    # A remote version listing (the envtest index, when its cached copy is hours old) rightly
    # goes through the proxy; the control plane, operators and probes on this machine must not.
    loopback = [line for line in proxy_listener.proxy_requests if LOOPBACK_TARGET.match(line)]
    assert not loopback, f"ktest's loopback traffic went to the environment proxy: {loopback}"
    eventually(lambda: not any(run_dir.iterdir()), timeout=30, description=f"the session to empty {run_dir}")
    assert files_with_key_material(tmpdir) == [], sorted(os.listdir(tmpdir))


def _kubeconfig_for(server: str, directory: Path) -> Path:
    from ktest.base.certs import CertificateAuthority
    from ktest.base.kubeconfig import write_kubeconfig

    authority = CertificateAuthority(directory / "ca")
    pair = authority.client("u", "u")
    return write_kubeconfig(
        directory / "kubeconfig",
        server=server,
        ca_pem=authority.cert_pem,
        user="u",
        client_cert_pem=pair.cert_pem,
        client_key_pem=pair.key_pem,
    )


@pytest.fixture
def proxied(proxy_listener: CountingListener, monkeypatch: pytest.MonkeyPatch) -> CountingListener:
    """This process's environment names the listener as its HTTPS proxy, with no NO_PROXY."""
    for name in (*PROXY_VARIABLES, "NO_PROXY", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HTTPS_PROXY", f"http://127.0.0.1:{proxy_listener.port}")
    return proxy_listener


def test_a_server_beyond_a_failing_proxy_is_named_with_the_fix(
    proxied: CountingListener, tmp_path: Path
) -> None:
    """Where a request does go through the environment's proxy (a server that is not on loopback,
    as kubectl would), its failure says so and how to bypass the proxy: one line, not a
    MaxRetryError."""
    from ktest.cluster import Cluster
    from ktest.errors.api import ApiError

    server = "https://kubernetes.example.invalid:6443"
    with Cluster(_kubeconfig_for(server, tmp_path)) as cluster, pytest.raises(ApiError) as caught:
        cluster.rest.request("GET", "/version")
    message = str(caught.value)
    for fragment in (f"proxy http://127.0.0.1:{proxied.port}", server, "NO_PROXY=kubernetes.example.invalid"):
        assert fragment in message, message
    assert caught.value.__context__ is None or caught.value.__suppress_context__
    assert proxied.proxy_requests, f"positive control: the request did go to the proxy: {proxied.first_lines}"


@pytest.mark.parametrize(
    ("server", "no_proxy", "proxied_expected"),
    [
        ("https://127.0.0.1:6443", "", False),
        ("https://localhost:6443", "", False),
        ("https://[::1]:6443", "", False),
        ("https://kubernetes.example.com:6443", "", True),
        ("https://kubernetes.example.com:6443", ".example.com", False),
        ("https://kubernetes.example.com:6443", "example.com:443", True),
        ("https://kubernetes.example.com:6443", "kubernetes.example.com:6443", False),
        ("https://10.1.2.3:6443", "10.0.0.0/8", False),
        ("https://10.1.2.3:6443", "192.168.0.0/16,other.example", True),
        ("https://10.1.2.3:6443", "*", False),
    ],
)
def test_the_proxy_is_chosen_as_kubectl_chooses_it(
    proxied: CountingListener,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    server: str,
    no_proxy: str,
    proxied_expected: bool,
) -> None:
    """ktest's clusters take the environment's proxy as client-go does, on every kubernetes client
    release: never for loopback, and NO_PROXY (hosts, domain suffixes, CIDR ranges, ports) honoured."""
    from ktest.cluster import Cluster

    if no_proxy:
        monkeypatch.setenv("NO_PROXY", no_proxy)
    with Cluster(_kubeconfig_for(server, tmp_path)) as cluster:
        proxy = cluster.api_client.configuration.proxy
    assert proxy == (f"http://127.0.0.1:{proxied.port}" if proxied_expected else None)
