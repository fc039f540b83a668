"""A flood of connections to an operator proxy leaves the operator served (issue 50.3).

Another local user can connect to the proxy's port (only the operator holds the client
certificate its handshake asks for, but connecting is enough): 1,500 to 4,000 connections drove
the test process to about 1,000 threads and ``EMFILE`` within seconds, ktest's own clients then
failed with "Too many open files", and the ``OSError`` of one ``accept()`` stopped the proxy for
good. Now the proxy holds at most ``MAX_CONNECTIONS`` (the oldest connection still in its
handshake makes room; the operator's, handshaken, never does), goes on accepting after
``EMFILE`` (closing its oldest new connection for a descriptor), and a ktest session raises its
soft ``RLIMIT_NOFILE`` to the hard limit.
"""

from __future__ import annotations

import contextlib
import json
import os
import resource
import socket
import subprocess
import sys
import textwrap
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from connections import closed_by_server
from inner_runs import run_inner

from ktest.cluster import Cluster
from ktest.proxy import OperatorProxy
from ktest.proxy import server as proxy_server
from ktest.wait import eventually

LOWERED_CAP = 32
FLOOD = 300
SCRIPT = Path(__file__).with_name("proxy_fd_shortage.py")
SPARE_DESCRIPTORS = 12


def _flood(port: int, count: int, timeout: float = 2.0) -> list[socket.socket]:
    """``count`` connections that never start their TLS handshake (those the kernel takes)."""
    held = []
    for _ in range(count):
        with contextlib.suppress(OSError):
            held.append(socket.create_connection(("127.0.0.1", port), timeout=timeout))
    return held


def _connection_threads(proxy_name: str) -> list[threading.Thread]:
    """The threads of the proxy's connections (``ktest-proxy-<name>-<number>``)."""
    prefix = f"ktest-proxy-{proxy_name}-"
    return [t for t in threading.enumerate() if t.name.startswith(prefix) and t.name[len(prefix):].isdigit()]


@pytest.fixture
def capped_proxy(cluster: Cluster, monkeypatch: pytest.MonkeyPatch) -> Iterator[OperatorProxy]:
    monkeypatch.setattr(proxy_server, "MAX_CONNECTIONS", LOWERED_CAP, raising=False)
    started = OperatorProxy(cluster, "flooded").start()
    try:
        yield started
    finally:
        started.close()


def test_a_flood_of_connections_is_capped_and_the_operator_is_still_served(
    cluster: Cluster, namespace: str, capped_proxy: OperatorProxy
) -> None:
    operator = capped_proxy.cluster
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "before", "namespace": namespace}}
    operator.create(cm)  # its kept-alive connection: handshaken, never closed to make room

    flood = _flood(capped_proxy.port, FLOOD)
    try:
        assert len(flood) >= FLOOD - 10, f"only {len(flood)} connections made"
        # the proxy holds no more than its cap: the oldest connections in their handshake were closed
        eventually(lambda: sum(closed_by_server(c) for c in flood) >= len(flood) - LOWERED_CAP, timeout=10)
        # one thread per connection held (a closed one's thread ends as it sees the close)
        eventually(lambda: capped_proxy.open_connections <= LOWERED_CAP, timeout=5)
        eventually(lambda: len(_connection_threads("flooded")) <= LOWERED_CAP, timeout=5)
        # the operator's requests are served all along, on its own connection and on new ones
        for number in range(20):
            operator.create({**cm, "metadata": {"name": f"during-{number}", "namespace": namespace}})
        second = Cluster(capped_proxy.kubeconfig)  # a connection made during the flood
        try:
            assert second.get(("v1", "ConfigMap", "during-19", namespace))
        finally:
            second.close()
    finally:
        for connection in flood:
            connection.close()
    assert capped_proxy._server is not None and capped_proxy._server.errors == []
    assert capped_proxy.traffic.count(verb="create", resource="configmaps") == 21


def test_the_proxy_goes_on_accepting_after_its_process_ran_out_of_descriptors(cluster: Cluster) -> None:
    child = subprocess.Popen(
        [sys.executable, str(SCRIPT), str(cluster.kubeconfig), str(SPARE_DESCRIPTORS)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )
    flood: list[socket.socket] = []
    try:
        assert child.stdout is not None and child.stdin is not None
        stdin, stdout = child.stdin, child.stdout
        port_text, kubeconfig, limit = stdout.readline().split()

        def ran_out_of_descriptors() -> None:
            flood.extend(_flood(int(port_text), 10, timeout=0.5))
            held = len(os.listdir(f"/proc/{child.pid}/fd"))
            assert held >= int(limit) - 1, f"{held} of {limit} descriptors in use"

        # within seconds, well before the proxy's handshake timeout (10 s) would free any
        eventually(ran_out_of_descriptors, timeout=5)
        flood.extend(_flood(int(port_text), 20, timeout=0.5))  # accept() meets EMFILE for these

        def accept_errors() -> list[str]:
            stdin.write("errors\n")
            stdin.flush()
            found: list[str] = json.loads(stdout.readline())
            return found

        # while the flood still holds the descriptors (closed, they would be freed before the
        # proxy's accept() got to the queued connections, which then would not meet EMFILE)
        eventually(accept_errors, timeout=10)
        for connection in flood:
            connection.close()
        # the other user went away: the operator is served again
        operator = Cluster(kubeconfig)
        try:
            assert operator.get(("v1", "Namespace", "default"))["metadata"]["name"] == "default"
        finally:
            operator.close()
        errors = accept_errors()
        assert errors and all(error.startswith("EMFILE") for error in errors), errors
        stdin.write("exit\n")
        stdin.flush()
        assert child.wait(30) == 0
    finally:
        for connection in flood:
            connection.close()
        if child.poll() is None:
            child.kill()
            child.wait(10)


LIMIT_CHECK = textwrap.dedent('''
    import resource

    def test_the_soft_limit_is_the_hard_limit():
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        print("LIMITS", soft, hard)
        assert soft == hard
''')


def test_a_session_raises_its_open_file_limit_to_the_hard_limit(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A session, run in this process with the soft limit lowered (well above the descriptors this
    process holds, so its other threads keep theirs), leaves it at the hard limit."""
    for name in list(os.environ):
        if name.startswith(("KTEST_", "PYTEST_XDIST_")):
            monkeypatch.delenv(name)  # the outer run's settings stay out
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    highest = max(int(fd) for fd in os.listdir("/proc/self/fd"))
    lowered = max(256, highest + 256)
    if lowered >= hard:
        pytest.skip(f"the hard limit ({hard}) leaves nothing to raise")
    resource.setrlimit(resource.RLIMIT_NOFILE, (lowered, hard))
    try:
        result = run_inner(pytester, LIMIT_CHECK, "-s", "-p", "no:xdist")
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    result.assert_outcomes(passed=1)
    assert f"LIMITS {hard} {hard}" in result.stdout.str(), result.stdout.str()[-3000:]
