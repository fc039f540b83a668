"""Everything ktest writes is private to the user: directories 0700,
files (and sockets) 0600 or stricter, whatever the umask, in a started control
plane's directory, the `ktest up` state and its daemon's directories (checked on
test_leftovers.py's daemon, ``test_ktest_up_state_and_daemon_files_are_private``), and a
webhook set's directory.

Was: ``certs/`` and ``logs/`` created 0755 (``mkdir(parents=True)`` gives parents the
umask's mode), certificates, logs, owner files 0644, the `ktest up` state 0755/0644."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hardening_helpers import loose_modes

from ktest.assets.bundle import Assets
from ktest.controlplane import ControlPlane


@pytest.fixture
def loose_umask() -> Iterator[None]:
    """The usual 022: what the modes must not depend on."""
    previous = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(previous)


STARTED = pytest.mark.xdist_group("file-modes-started")  # one worker starts the module's plane


@pytest.fixture(scope="module")
def started(assets: Assets, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ControlPlane, Path]]:
    """A control plane (a controller, audit on) started under the usual umask with a cache of its own
    (empty but for a ``flags/`` an older ktest made 0755); the plane and that cache's ``ktest`` folder.

    One start for the module: it writes both the plane's directory and the cache's files (the etcd
    template, the probed flags), which the tests below read; they add files, change no mode. With
    no template in that cache the start first bootstraps one on a throwaway plane of its own (a
    second etcd): what test_what_a_start_writes_in_the_cache_is_private reads."""
    from ktest.controlplane import flags

    root = tmp_path_factory.mktemp("modes")
    cache = root / "cache"
    older = cache / "ktest" / "flags"
    older.mkdir(parents=True)
    older.chmod(0o755)
    previous_umask = os.umask(0o022)
    try:
        with pytest.MonkeyPatch.context() as monkeypatch:
            monkeypatch.setenv("XDG_CACHE_HOME", str(cache))
            monkeypatch.setattr(flags, "_memo", {})  # probed again, so written to this cache
            plane = ControlPlane(
                assets=assets, controllers="garbagecollector", root_directory=root / "run", audit=True
            ).start()
    finally:
        os.umask(previous_umask)
    try:
        yield plane, cache / "ktest"
    finally:
        plane.stop()


@STARTED
def test_a_started_control_plane_writes_nothing_readable_by_others(
    started: tuple[ControlPlane, Path], loose_umask: None
) -> None:
    plane, written = started
    # An explicit run directory that did not exist is made and used (as test_run_directory.py says)
    assert plane.directory.parent == written.parents[1] / "run", plane.directory
    plane.add_user("someone", groups=["team"])
    names = {path.name for path in plane.directory.rglob("*")}
    assert {"certs", "logs", "etcd", "ca.key", "admin.key", "kube-apiserver.log"} <= names, names
    assert loose_modes(plane.directory) == []


def test_a_webhook_sets_directory_is_private(assets: Assets, plane: ControlPlane, loose_umask: None) -> None:
    from ktest.cluster import Cluster
    from ktest.webhooks import Webhooks

    cluster = Cluster(plane.kubeconfig)
    webhooks = Webhooks(cluster, host="127.0.0.1")
    try:
        directory = webhooks.cert_dir.parent
        assert (webhooks.cert_dir / "tls.key").is_file()
        assert loose_modes(directory) == []
    finally:
        webhooks.close()


@pytest.mark.slow
def test_an_older_state_directory_is_made_private(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A state directory an older ktest created 0755 becomes 0700 at the next write."""
    from ktest.backends.bare import reuse

    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path))
    old = tmp_path / "ktest" / "up"
    old.mkdir(parents=True, mode=0o755)
    (tmp_path / "ktest").chmod(0o755)
    old.chmod(0o755)
    reuse.private_state_directory(reuse.state_directory())
    assert loose_modes(tmp_path / "ktest") == []


@STARTED
@pytest.mark.slow
def test_what_a_start_writes_in_the_cache_is_private(started: tuple[ControlPlane, Path]) -> None:
    """Issue 50.9. Was: ``etcd-templates/`` (etcd's data: every object, secrets too) and
    ``flags/`` 0755 with 0644 files, beside a cache otherwise 0700/0600. A ``flags/`` an older
    ktest made 0755 is made 0700 too. (The module's plane was the first start with this cache.)"""
    _, written = started
    assert {"etcd-templates", "flags"} <= {path.name for path in written.iterdir()}
    assert any(path.suffix == ".json" for path in (written / "flags").iterdir())
    assert any((written / "etcd-templates").rglob("*.wal")), "no template was stored"
    assert loose_modes(written / "flags") + loose_modes(written / "etcd-templates") == []


# ------------------------------------------------------- the files inside those directories too


def test_an_operators_log_directory_is_private(plane: ControlPlane, loose_umask: None) -> None:
    """Was: the log file (``<operator>.log``) 0644 inside the 0700 directory."""
    from ktest.cluster import Cluster
    from ktest.operators import run_callable

    def idle(context: Any) -> None:
        context.ready()
        context.stop.wait()

    with Cluster(plane.kubeconfig) as cluster, run_callable(idle, cluster, name="held") as operator:
        operator.log.write("a line")
        assert operator.log.path.is_file()
        assert loose_modes(operator.log.path.parent) == []


STAND_IN_KIND = """#!/bin/sh
# kind, as far as create_cluster needs it: no clusters yet; `create` shows the modes of what
# ktest wrote for it, then fails (no Docker container is made); `delete` has nothing to do.
case "$1" in
  get) exit 0 ;;
  delete) exit 0 ;;
  create)
    while [ $# -gt 0 ]; do [ "$1" = --config ] && config=$2; shift; done
    directory=$(dirname "$config")
    stat -c '%a %n' "$config" "$directory/kubeadm-patches" "$directory"/kubeadm-patches/*
    exit 1 ;;
esac
"""


def test_a_kind_clusters_config_and_patches_are_private(tmp_path: Path, loose_umask: None) -> None:
    """Was: ``kind-config.yaml`` 0644, ``kubeadm-patches/`` 0755 and its patch 0644 in the cluster's
    0700 directory. The stand-in for the kind binary reports what it was given to read."""
    from kind_stand_in import failed_create

    error = failed_create(tmp_path, STAND_IN_KIND, name="ktest-modes")
    modes = {line.split()[1].rsplit("/", 1)[-1]: line.split()[0] for line in str(error).splitlines()
             if line[:3].isdigit()}
    assert modes == {
        "kind-config.yaml": "600", "kubeadm-patches": "700", "corednsdeployment+strategic.yaml": "600"
    }, str(error)


def test_kinds_output_log_is_private(tmp_path: Path, loose_umask: None) -> None:
    """Was: ``create.log`` (kind's whole output, written after ``kind create``) 0644."""
    from ktest.backends.kind.cluster import run_kind

    kind = tmp_path / "kind"
    kind.write_text(STAND_IN_KIND)
    kind.chmod(0o700)
    run_kind(kind, ["get", "clusters"], what="listing", log=tmp_path / "create.log")
    assert stat.S_IMODE((tmp_path / "create.log").stat().st_mode) == 0o600
