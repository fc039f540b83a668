"""Reuse (ktest.backends.bare.reuse): ``ktest up`` keeps a control plane warm; test runs attach and
leave it; ``ktest down`` stops it."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from builders import crd_yaml
from inner_runs import GC_OF_NEW_KIND_TEST, printed
from warm_planes import WarmPlane

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
    assert f"stopped 'default' (pid {record.pid})" in stopped.stderr, stopped.stderr
    assert not record.daemon_alive()
    assert not Path(record.share.directory or "").exists()
    assert not (state / "default.json").exists()
    assert all(not component.alive() for component in record.share.components.values())
    assert "no warm control planes" in ktest("status").stdout
    missing = ktest("down")
    assert missing.returncode == 2 and "no warm control plane named 'default'" in missing.stderr


@pytest.fixture
def warm_elsewhere(state: Path, inner_warm_plane: WarmPlane) -> Iterator[reuse.UpRecord]:
    """The worker's warm control plane (default controllers, held by this process as a ``ktest up``
    daemon holds its own) recorded as ``warm`` in the private state directory: a live plane that a
    session wanting other settings must pass over. Its record goes before ``state`` downs what is left."""
    shared = reuse.state_directory(inner_warm_plane.env)
    found = reuse.read_record(reuse.record_path(reuse.DEFAULT_NAME, shared))
    assert found is not None
    path = reuse.record_path("warm", state)
    record = dataclasses.replace(found, name="warm", path=path)
    reuse.write_record(record)
    yield record
    path.unlink(missing_ok=True)


def test_stale_and_incompatible_records_are_passed_over_and_a_fresh_plane_started(
    pytester: pytest.Pytester, state: Path, warm_elsewhere: reuse.UpRecord
) -> None:
    """One session meets both: a stale record (removed) and a live plane of other settings (left
    alone); it starts a plane of its own. ``ktest up`` of those settings under that name is refused."""
    stale = {
        # No such process: the pid's start time does not match.
        "name": "default", "pid": 999_999, "pid_start": "1", "requested_version": None,
        "controllers": ["garbagecollector", "namespace"], "started_at": 0.0,
        "share": {"kubeconfig": "/nonexistent/admin.kubeconfig", "version": "1.37.2", "description": "gone",
                  "directory": "/nonexistent", "controllers": ["garbagecollector", "namespace"]},
    }
    (state / "default.json").write_text(json.dumps(stale))
    pytester.makepyfile("def test_x(cluster, control_plane):\n    assert control_plane.running\n")
    result = pytester.runpytest_inprocess("--ktest-reuse", "--ktest-controllers=none")  # warm runs two
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        [
            "cluster: embedded control plane *",
            "note: removed stale warm control plane 'default': its daemon (pid 999999) is gone",
            "note: reuse: no running control plane matches*`ktest up` keeps one warm between runs",
        ]
    )
    assert not (state / "default.json").exists(), "the stale record must be removed"
    assert reuse.read_record(warm_elsewhere.path) is not None, "the incompatible record must be left"
    assert warm_elsewhere.problem() is None, "the incompatible plane must be left running"
    conflict = ktest("up", "--controllers=none", "--name=warm")
    assert conflict.returncode == 2, conflict.stderr
    assert "already runs with other settings" in conflict.stderr


@pytest.mark.parametrize("asked", [("garbage-collector-controller", "namespace-controller"),
                                   ("namespace", "garbagecollector")])
def test_a_warm_plane_matches_controllers_by_their_short_or_long_names(asked: tuple[str, ...]) -> None:
    """A project whose ini spells the controllers as kube-controller-manager does attaches to the
    `ktest up` plane started with their short names (the same controllers), and gets the same
    fingerprint; other controllers still do not match."""
    from ktest.backends.bare.reuse import UpRecord, fingerprint
    from ktest.config import Settings

    record = UpRecord(name="default", pid=1, pid_start="", requested_version=None,
                      controllers=("garbagecollector", "namespace"), started_at=0.0,
                      share=None, path=Path("default.json"))  # type: ignore[arg-type]
    assert record.compatible_with(Settings(controllers=asked))
    assert fingerprint(None, asked) == record.fingerprint
    assert not record.compatible_with(Settings(controllers=("garbage-collector-controller",)))
