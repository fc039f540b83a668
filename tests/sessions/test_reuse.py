"""Reuse (ktest.backends.bare.reuse): ``ktest up`` keeps a control plane warm; test runs attach and
leave it; ``ktest down`` stops it."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from builders import crd_yaml
from inner_runs import GC_OF_NEW_KIND_TEST, printed

from ktest.backends.bare import reuse

pytestmark = pytest.mark.own_plane("ktest up and reuse themselves")

ATTACHING_TESTS = """
import os


def test_attached(cluster, namespace, control_plane_dir):
    print("SERVER", cluster.server)
    print("KUBECONFIG", cluster.kubeconfig)
    alice = cluster.user("alice", ["devs"])  # issued from the warm control plane's CA
    assert alice.version == cluster.version
"""

CONFTEST = """
import pytest


@pytest.fixture
def control_plane_dir(ktest_backend):
    return ktest_backend.share().directory
"""


def ktest(*args: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-c", "from ktest.cli.main import main; raise SystemExit(main())", *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=600, check=False)


@pytest.fixture
def state(inner_env: dict) -> Iterator[Path]:
    """The private state directory; any warm control plane left there is stopped afterwards."""
    directory = reuse.state_directory()
    assert str(directory).startswith(inner_env["XDG_STATE_HOME"])
    yield directory
    for record in reuse.list_records(directory):
        reuse.down(record)


def test_up_attach_twice_then_down(pytester: pytest.Pytester, state: Path) -> None:
    started = ktest("up")
    assert started.returncode == 0, started.stderr
    record = reuse.read_record(state / "default.json")
    assert record is not None and record.problem() is None
    warm_kubeconfig = record.share.kubeconfig
    assert started.stdout.splitlines() == [warm_kubeconfig, f"export KUBECONFIG={warm_kubeconfig}"]
    assert "ktest up: started: default: Kubernetes" in started.stderr

    again = ktest("up")
    assert again.returncode == 0 and "already running" in again.stderr

    pytester.makeconftest(CONFTEST)
    gc_test = GC_OF_NEW_KIND_TEST.format(crd=crd_yaml("gc.example.com", "Sprocket"))
    pytester.makepyfile(test_attach=ATTACHING_TESTS, test_gc=gc_test)
    for _run in range(2):
        result = pytester.runpytest_inprocess("-s", "--ktest-reuse")
        result.assert_outcomes(passed=2)
        (kubeconfig,) = printed(result, "KUBECONFIG ")
        assert kubeconfig == warm_kubeconfig
        result.stdout.fnmatch_lines([f"cluster: warm control plane 'default' (ktest up, pid {record.pid})*"])
        assert record.problem() is None, "the test run must leave the warm control plane running"

    status = ktest("status")
    assert status.stdout.startswith(f"running: default: Kubernetes {record.share.version}")

    stopped = ktest("down")
    assert stopped.returncode == 0, stopped.stderr
    assert not record.daemon_alive()
    assert not Path(record.share.directory or "").exists()
    assert not (state / "default.json").exists()
    assert all(not component.alive() for component in record.share.components.values())
    assert "no warm control planes" in ktest("status").stdout
    missing = ktest("down")
    assert missing.returncode == 2 and "no warm control plane named 'default'" in missing.stderr


def test_stale_record_is_cleaned_and_a_fresh_plane_started(pytester: pytest.Pytester, state: Path) -> None:
    state.mkdir(parents=True)
    stale = {
        # No such process: the pid's start time does not match.
        "name": "default", "pid": 999_999, "pid_start": "1", "requested_version": None,
        "controllers": ["garbagecollector", "namespace"], "started_at": 0.0,
        "share": {"kubeconfig": "/nonexistent/admin.kubeconfig", "version": "1.37.2", "description": "gone",
                  "directory": "/nonexistent", "controllers": ["garbagecollector", "namespace"]},
    }
    (state / "default.json").write_text(json.dumps(stale))
    pytester.makepyfile("def test_x(cluster, control_plane):\n    assert control_plane.running\n")
    result = pytester.runpytest_inprocess("--ktest-reuse")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        [
            "cluster: embedded control plane *",
            "note: removed stale warm control plane 'default': its daemon (pid 999999) is gone",
            "note: reuse: no running control plane matches*`ktest up` keeps one warm between runs",
        ]
    )
    assert not (state / "default.json").exists()


def test_incompatible_warm_plane_is_not_used(pytester: pytest.Pytester, state: Path) -> None:
    started = ktest("up", "--controllers=none", "--name=bare-api")
    assert started.returncode == 0, started.stderr
    pytester.makepyfile("def test_x(cluster, control_plane):\n    assert control_plane.running\n")
    result = pytester.runpytest_inprocess("--ktest-reuse")  # wants the default controllers
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["note: reuse: no running control plane matches*"])
    record = reuse.read_record(state / "bare-api.json")
    assert record is not None and record.problem() is None
    conflict = ktest("up", "--name=bare-api")
    assert conflict.returncode == 2
    assert "already runs with other settings" in conflict.stderr
