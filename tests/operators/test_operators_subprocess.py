"""Commands as the operator under test: KUBECONFIG, output, readiness, stop/crash/restart, exit codes."""

from __future__ import annotations

import signal
import textwrap
from pathlib import Path

import pytest
from builders import configmap, configmap_ref
from operator_helpers import SAMPLES, python
from sample_operators import mirror

from ktest.cluster import Cluster
from ktest.errors import OperatorError
from ktest.operators import run_subprocess
from ktest.run_context import check_health, run_context
from ktest.wait import eventually

MIRROR_PROCESS = [python(), str(SAMPLES / "mirror_process.py")]
WATCHING = r"watching configmaps labelled"


def copied(admin: Cluster, ns: str, name: str) -> None:
    copy = admin.get(configmap_ref(name + mirror.SUFFIX, ns))
    assert copy["metadata"]["ownerReferences"][0]["name"] == name


def test_subprocess_starts_becomes_ready_and_reconciles(admin: Cluster, ns: str) -> None:
    with run_subprocess(MIRROR_PROCESS, admin, args=["--namespace", ns], ready_log=WATCHING) as op:
        assert op.alive and op.pid
        admin.create(configmap("a", ns, {"k": "v"}, labels={mirror.LABEL: "true"}))
        eventually(lambda: copied(admin, ns, "a"))
    assert op.returncode == 0  # SIGTERM honoured: a clean exit, no SIGKILL needed
    assert "INFO sample_operators.mirror: created" in op.logs
    assert op.error is None


def test_crash_is_sigkill_and_restart_converges(admin: Cluster, ns: str) -> None:
    with run_subprocess(MIRROR_PROCESS, admin, args=["--namespace", ns], ready_log=WATCHING) as op:
        first_pid = op.pid
        op.crash()
        assert op.returncode == -signal.SIGKILL
        assert op.error is None
        admin.create(configmap("late", ns, labels={mirror.LABEL: "true"}))
        op.restart()
        assert op.pid != first_pid
        eventually(lambda: copied(admin, ns, "late"))
        # readiness of the restarted run came from its own output, not the first run's
        assert op.run_logs.count("watching configmaps") == 1


def test_exit_status_1_fails_with_status_and_log_tail(admin: Cluster) -> None:
    with pytest.raises(OperatorError) as raised:
        run_subprocess([*MIRROR_PROCESS, "--exit-with", "1"], admin, ready_log=WATCHING)
    message = str(raised.value)
    assert "failed before it was ready" in message
    assert "exited with status 1" in message
    assert "fatal: cannot load configuration: OPERATOR_MODE is not set" in message
    assert "mirror_process.py --exit-with 1" in message  # the command line


def test_exit_while_running_reaches_the_health_check(admin: Cluster) -> None:
    script = "echo ready; sleep 0.5; echo 'panic: lost leadership' >&2; exit 1"
    with run_context("test-scope"):
        op = run_subprocess(["sh", "-c", script], admin, ready_log="^ready$")
        check_health()  # fine while it runs
        with pytest.raises(OperatorError) as raised:
            eventually(lambda: False, timeout=60)  # ends on the exit, not on the timeout
        op.close()  # reported already: closing does not raise it again
    assert "exited with status 1" in str(raised.value)
    assert "panic: lost leadership" in str(raised.value)


def test_sigterm_ignored_is_killed_and_reported(admin: Cluster, ns: str) -> None:
    op = run_subprocess(
        [*MIRROR_PROCESS, "--ignore-sigterm", "--namespace", ns], admin, ready_log=WATCHING, stop_timeout=1
    )
    with pytest.raises(OperatorError, match=r"did not stop within 1 s of being asked to, so it was killed"):
        op.stop()
    assert op.returncode == -signal.SIGKILL
    assert "ignoring SIGTERM" in op.logs
    op.close()


def test_environment_kubeconfig_and_port(admin: Cluster, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.0.0.1")  # as inside a pod: must not leak in
    code = textwrap.dedent(
        """
        import os, sys
        print("KUBECONFIG=" + os.environ["KUBECONFIG"])
        print("MODE=" + os.environ["MODE"])
        print("IN_CLUSTER=" + str("KUBERNETES_SERVICE_HOST" in os.environ))
        print("ARGS=" + " ".join(sys.argv[1:]), flush=True)
        import time; time.sleep(60)
        """
    )
    with run_subprocess(
        [python(), "-c", code], admin, args=["--port={port}"], env={"MODE": "test"}, ready_log="^ARGS="
    ) as op:
        assert f"KUBECONFIG={op.api_cluster.kubeconfig}" in op.logs  # the proxy's, or admin's without it
        assert "MODE=test" in op.logs
        assert "IN_CLUSTER=False" in op.logs
        assert f"ARGS=--port={op.port}" in op.logs


def test_ready_http_waits_for_200(admin: Cluster, tmp_path: Path) -> None:
    server = tmp_path / "server.py"
    server.write_text(
        textwrap.dedent(
            """
        import http.server, sys, time
        started = time.monotonic()
        class Probe(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                ok = time.monotonic() - started > 0.5
                self.send_response(200 if ok else 500)
                self.end_headers()
                self.wfile.write(b"ok" if ok else b"informers not synced")
            def log_message(self, *args):
                print("probe", self.path, flush=True)
        http.server.HTTPServer(("127.0.0.1", int(sys.argv[1])), Probe).serve_forever()
        """
        )
    )
    with run_subprocess(
        [python(), str(server), "{port}"], admin, ready_http="http://127.0.0.1:{port}/readyz"
    ) as op:
        assert "probe /readyz" in op.logs
    with pytest.raises(OperatorError) as raised:
        run_subprocess(
            [python(), "-c", "import time; time.sleep(30)"],
            admin,
            ready_http="http://127.0.0.1:{port}/readyz",
            ready_timeout=0.5,
        )
    assert "did not answer 200" in str(raised.value)
    assert "Connection refused" in str(raised.value)


def test_bad_input(admin: Cluster, tmp_path: Path) -> None:
    with pytest.raises(OperatorError, match="could not be started"):
        run_subprocess([str(tmp_path / "no-such-manager")], admin)
    with pytest.raises(OperatorError, match="not a valid regular expression"):
        run_subprocess(["true"], admin, ready_log="(unclosed")
    with pytest.raises(OperatorError, match="not both"):
        run_subprocess(["true"], admin, ready_log="x", ready_http="http://x")
    with pytest.raises(OperatorError, match="needs a command"):
        run_subprocess([], admin)
