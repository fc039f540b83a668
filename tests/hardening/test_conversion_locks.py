"""The lock a conversion webhook takes (one per API server and CRD) is removed when its
webhook set stops: no ``ktest-conversion-<server>-<crd>.lock`` file is left for every port and
CRD ever used, in the user's lock directory, for good.

Removing a lock file is safe only if a process that opened it just before the removal does
not then hold a lock nobody else can see: the stress test below has threads, each with its
own lock object (``flock`` locks belong to open files, so they exclude each other like
processes), take turns on one name and checks that no two ever hold it at once."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from webhook_handlers import GADGETS_CRD, gadget_conversion

from ktest.cluster import Cluster
from ktest.controlplane import ControlPlane
from ktest.webhooks.locks import LockTimeout, RemovableLock


def test_a_lock_file_goes_with_its_release(tmp_path: Path) -> None:
    path = tmp_path / "a.lock"
    lock = RemovableLock(path)
    lock.acquire(timeout=1)
    assert path.stat().st_mode & 0o777 == 0o600
    with pytest.raises(LockTimeout):
        RemovableLock(path).acquire(timeout=0.2)
    lock.release()
    assert not path.exists()
    again = RemovableLock(path)
    again.acquire(timeout=1)  # a new file under the same name: taken at once
    again.release()
    assert list(tmp_path.iterdir()) == []


def test_turns_on_one_name_never_overlap(tmp_path: Path) -> None:
    path = tmp_path / "contended.lock"
    holding: list[int] = []
    overlaps: list[list[int]] = []
    errors: list[BaseException] = []

    def take_turns(worker: int) -> None:
        try:
            for _ in range(60):
                lock = RemovableLock(path)
                lock.acquire(timeout=60)
                holding.append(worker)
                if len(holding) > 1:
                    overlaps.append(list(holding))
                holding.remove(worker)
                lock.release()
        except BaseException as error:
            errors.append(error)

    threads = [threading.Thread(target=take_turns, args=(worker,)) for worker in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == [] and overlaps == []
    assert not path.exists()


@pytest.mark.slow
def test_a_conversion_webhooks_lock_file_is_removed_when_its_set_stops(
    plane: ControlPlane, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ktest.webhooks import Webhooks
    from ktest.webhooks.install import lock_directory

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.delenv("XDG_RUNTIME_DIR", raising=False)
    with Cluster(plane.kubeconfig) as cluster:
        cluster.install_crds(GADGETS_CRD)
        webhooks = Webhooks(cluster, handlers=gadget_conversion(), host="127.0.0.1")
        try:
            webhooks.start()
            held = sorted(path.name for path in lock_directory().iterdir())
            assert len(held) == 1 and held[0].endswith("-gadgets.pyhooks.ktest.dev.lock"), held
        finally:
            webhooks.close()
        assert list(lock_directory().iterdir()) == []
