"""Backend ``existing`` asks the server who it is (a SelfSubjectReview) before any
test runs. Credentials that never load (an exec plugin whose command is missing or fails, a
user without credentials) leave the client anonymous; ``/version`` answers anonymous clients,
so the start used to pass and tests failed later as ``system:anonymous``. The "existing
cluster" is a real ktest control plane; the exec plugins are small scripts (outside Kubernetes).

Was: the child session started, and its first write failed with "User system:anonymous
cannot create resource configmaps"; nothing named the exec plugin."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from hardening_helpers import sandbox_env

from ktest.assets.bundle import Assets
from ktest.backends.existing.backend import ExistingBackend
from ktest.cluster import Cluster
from ktest.controlplane import ControlPlane
from ktest.errors import ClusterError

CHILD = Path(__file__).parent / "child_session.py"
CONTEXT = "dev@plane"
MISSING_PLUGIN = "ktest-no-such-credential-plugin"


def _kubeconfig(path: Path, plane: ControlPlane, user: dict[str, Any]) -> Path:
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": "plane",
                "cluster": {
                    "server": plane.server,
                    "certificate-authority": str(plane.directory / "certs" / "ca.crt"),
                },
            }
        ],
        "users": [{"name": "dev", "user": user}],
        "contexts": [{"name": CONTEXT, "context": {"cluster": "plane", "user": "dev"}}],
        "current-context": CONTEXT,
    }
    path.write_text(yaml.safe_dump(config))
    return path


def _exec_user(command: str) -> dict[str, Any]:
    return {
        "exec": {
            "apiVersion": "client.authentication.k8s.io/v1",
            "command": command,
            "interactiveMode": "Never",
        }
    }


def _plugin(path: Path, body: str) -> Path:
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(0o700)
    return path


def _refusal(kubeconfig: Path) -> str:
    with pytest.raises(ClusterError) as caught:
        ExistingBackend(kubeconfig, CONTEXT, timeout=10)
    message = str(caught.value)
    assert "system:anonymous" in message and f"context {CONTEXT!r}" in message, message
    assert "(user 'dev')" in message and str(kubeconfig) in message, message
    assert f"kubectl --kubeconfig {kubeconfig} --context {CONTEXT} auth whoami" in message, message
    return message


def test_a_missing_exec_plugin_stops_the_child_session_at_start(
    plane: ControlPlane, assets: Assets, tmp_path: Path
) -> None:
    kubeconfig = _kubeconfig(tmp_path / "dev.kubeconfig", plane, _exec_user(MISSING_PLUGIN))
    env = {
        **sandbox_env(tmp_path, assets.directory),
        "KTEST_BACKEND": "existing",
        "KTEST_KUBECONFIG": str(kubeconfig),
        "KTEST_CONTEXT": CONTEXT,
    }
    child = subprocess.run(
        [sys.executable, str(CHILD), "session", "exit"],
        env=env, input="", capture_output=True, text=True, timeout=120, check=False,
    )
    assert child.returncode != 0 and "ready" not in child.stdout, child.stdout + child.stderr[-3000:]
    error = child.stderr.strip().splitlines()
    message = "\n".join(line for line in error if "backend existing:" in line or "Check by hand" in line)
    assert "ClusterError: backend existing: the API server" in message, child.stderr[-3000:]
    assert f"the exec plugin command {MISSING_PLUGIN!r} of user 'dev' is not found (not on PATH)" in message
    assert f"fix exec.command in users[dev].user in {kubeconfig}" in message
    assert "system:anonymous" in message and f"context {CONTEXT!r}" in message
    assert "auth whoami" in message
    assert "cannot create resource" not in child.stderr, "the session got as far as a test's request"


def test_a_user_without_credentials_is_named_as_anonymous(plane: ControlPlane, tmp_path: Path) -> None:
    message = _refusal(_kubeconfig(tmp_path / "k", plane, {}))
    assert "user 'dev' has no credentials (no client certificate, token, exec plugin or auth" in message


def test_an_exec_plugin_that_fails_is_named_with_its_error(plane: ControlPlane, tmp_path: Path) -> None:
    plugin = _plugin(tmp_path / "login-plugin", "echo 'session expired: run login-plugin login' >&2; exit 3")
    message = _refusal(_kubeconfig(tmp_path / "k", plane, _exec_user(str(plugin))))
    assert f"the exec plugin {plugin} of user 'dev' failed: exec: process returned 3" in message
    assert "session expired: run login-plugin login" in message


def test_an_exec_plugin_that_works_passes_and_its_user_is_known(plane: ControlPlane, tmp_path: Path) -> None:
    """Positive control: the same check lets a good plugin through (a service account's token,
    from a plugin named by a path relative to the kubeconfig, as kubectl resolves it)."""
    with Cluster(plane.kubeconfig) as admin:
        account = {"name": "dev", "namespace": "default"}
        admin.apply({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": account})
        request = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {}}
        answer = admin.rest.request(
            "POST", "/api/v1/namespaces/default/serviceaccounts/dev/token", body=request
        )
    credential = {
        "apiVersion": "client.authentication.k8s.io/v1",
        "kind": "ExecCredential",
        "status": {"token": answer["status"]["token"]},
    }
    (tmp_path / "bin").mkdir()
    _plugin(tmp_path / "bin" / "token-plugin", f"echo '{json.dumps(credential)}'")
    kubeconfig = _kubeconfig(tmp_path / "k", plane, _exec_user("./bin/token-plugin"))
    backend = ExistingBackend(kubeconfig, CONTEXT, timeout=10)
    try:
        assert backend.user == "system:serviceaccount:default:dev"
    finally:
        backend.close()
