"""Lifecycle: nothing leaks after stop, an exception, or kill -9; restart keeps
data; several control planes run side by side."""

from __future__ import annotations

import dataclasses
import os
import signal
import sys
import threading
from pathlib import Path
from typing import Any

import kubernetes
import pytest
from controlplane_helpers import client_for
from processes import descendants, live_processes_using, reporting_child, wait_until_all_gone

from ktest.assets.bundle import Assets
from ktest.base.procfs import process_alive
from ktest.controlplane import ControlPlane
from ktest.errors import ControlPlaneError

HERE = Path(__file__).parent


def _assert_nothing_left(directory: Path, pids: list[int]) -> None:
    assert not directory.exists(), f"{directory} was not removed"
    assert not [pid for pid in pids if process_alive(pid)], "a component process is still running"
    assert live_processes_using(directory) == []


def test_stop_leaves_no_process_and_no_directory_and_needs_no_sigkill(assets: Assets) -> None:
    """Components exit on SIGTERM: stop() does not fall back to SIGKILL."""
    plane = ControlPlane(assets=assets).start()
    directory = plane.directory
    processes = list(plane.processes().values())
    pids = [p.pid for p in processes if p.pid]
    assert len(pids) == 3 and all(process_alive(pid) for pid in pids)
    janitor_pid = plane._janitor.pid if plane._janitor else None
    assert janitor_pid is not None and process_alive(janitor_pid)
    plane.stop()
    _assert_nothing_left(directory, pids)
    assert not process_alive(janitor_pid)
    for process in processes:
        assert process.returncode is not None
        assert process.returncode != -signal.SIGKILL, f"{process.name} needed SIGKILL"
    plane.stop()  # idempotent


def test_exception_in_with_body_stops_everything(assets: Assets) -> None:
    seen: dict[str, Any] = {}
    with pytest.raises(RuntimeError, match="boom"), ControlPlane(assets=assets) as plane:
        seen["directory"] = plane.directory
        seen["pids"] = [p.pid for p in plane.processes().values()]
        assert len(seen["pids"]) == 3  # etcd, kube-apiserver, kube-controller-manager
        raise RuntimeError("boom")
    _assert_nothing_left(seen["directory"], seen["pids"])


@pytest.mark.parametrize("ending", ["kill -9", "exit without stop", "kill -9 with a forked child"])
def test_owner_death_leaves_nothing(assets: Assets, ending: str) -> None:
    """kill -9 of the Python process that started a plane (from a thread that has
    since ended) takes its components and its directory with it."""
    command = [
        sys.executable,
        str(HERE / "child_plane.py"),
        str(assets.directory),
        "garbagecollector,namespace",
        "exit" if ending == "exit without stop" else "wait",
        "fork" if "forked" in ending else "",
    ]
    with reporting_child(command, "child failed to start a control plane") as (child, report):
        try:
            directory = Path(report["directory"])
            forked = report.get("forked")
            tree = {pid: info for pid, info in descendants(child.pid).items() if pid != forked}
            components = {
                pid: start for pid, (name, start) in tree.items() if name.startswith(("etcd", "kube-"))
            }
            # etcd, kube-apiserver, kube-controller-manager, still up although the
            # thread that started them has ended.
            assert set(report["pids"].values()) == set(components), tree
            assert len(components) == 3
            assert directory.is_dir()

            if ending.startswith("kill -9"):
                os.kill(child.pid, signal.SIGKILL)
            else:
                assert child.stdin is not None
                child.stdin.write("exit\n")
                child.stdin.flush()
            child.wait(30)

            wait_until_all_gone(components, directory, {pid: start for pid, (_, start) in tree.items()})
            assert live_processes_using(directory) == []
            if forked:  # cleanup did not wait for the forked child, which still runs
                assert process_alive(forked)
        finally:
            if report.get("forked") and process_alive(report["forked"]):
                os.kill(report["forked"], signal.SIGKILL)


def test_restart_keeps_data_and_kubeconfig(assets: Assets) -> None:
    with ControlPlane(assets=assets, controllers="none") as plane:
        client = client_for(plane.kubeconfig)
        core = kubernetes.client.CoreV1Api(client)
        core.create_namespaced_config_map("default", {"metadata": {"name": "survivor"}})
        old_pids = [p.pid for p in plane.processes().values()]
        old_server = plane.server

        plane.check()
        plane.processes()["kube-apiserver"].kill()  # a crash, as far as the plane knows
        with pytest.raises(ControlPlaneError, match=r"kube-apiserver died .*SIGKILL"):
            plane.check()

        plane.restart()

        plane.check()
        assert not [pid for pid in old_pids if process_alive(pid)]
        assert plane.server == old_server  # ports reused while free
        # The kubeconfig written before the restart still works.
        assert core.read_namespaced_config_map("survivor", "default").metadata.name == "survivor"
        client.close()


def test_several_planes_run_side_by_side(assets: Assets) -> None:
    planes: list[ControlPlane] = []
    errors: list[BaseException] = []

    def start() -> None:
        try:
            planes.append(ControlPlane(assets=assets, controllers="none").start())
        except BaseException as error:  # reported below
            errors.append(error)

    threads = [threading.Thread(target=start) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    try:
        assert not errors, errors
        first, second = planes
        assert first.server != second.server
        assert first.directory != second.directory
        # Each has its own data: an object created in one is absent in the other.
        one = kubernetes.client.CoreV1Api(client_for(first.kubeconfig))
        two = kubernetes.client.CoreV1Api(client_for(second.kubeconfig))
        one.create_namespaced_config_map("default", {"metadata": {"name": "only-in-first"}})
        with pytest.raises(kubernetes.client.ApiException) as missing:
            two.read_namespaced_config_map("only-in-first", "default")
        assert missing.value.status == 404
    finally:
        for plane in planes:
            plane.stop()


def test_taken_port_is_retried_with_new_ports(assets: Assets, monkeypatch: pytest.MonkeyPatch) -> None:
    """A port grabbed between choosing and binding: the plane starts on other ports."""
    import socket

    from ktest.controlplane import plane as plane_module

    squatter = socket.socket()
    squatter.bind(("127.0.0.1", 0))
    squatter.listen()
    taken = squatter.getsockname()[1]
    real_free_ports = plane_module.free_ports
    calls: list[list[int]] = []

    def first_choice_taken(count: int, *, prefer: tuple[int, ...] = ()) -> list[int]:
        ports = real_free_ports(count, prefer=prefer)
        if not calls:
            ports[2] = taken  # the API server's port, as if someone bound it meanwhile
        calls.append(ports)
        return ports

    monkeypatch.setattr(plane_module, "free_ports", first_choice_taken)
    try:
        with ControlPlane(assets=assets, controllers="none") as plane:
            assert len(calls) == 2
            assert plane.server == f"https://127.0.0.1:{calls[1][2]}"
            log = plane.log_path("kube-apiserver").read_text()
            assert "address already in use" in log
            core = kubernetes.client.CoreV1Api(client_for(plane.kubeconfig))
            assert core.read_namespace("default").metadata.name == "default"
    finally:
        squatter.close()


def test_an_attached_session_sees_the_owners_restarted_controller_manager(assets: Assets) -> None:
    """pytest-xdist workers ask the process that holds the plane which components died: the pid
    in their share goes stale when kube-controller-manager restarts (after new CRDs), and a
    failing test's report must not say it died when it runs."""
    from ktest.backends.bare.backend import BareBackend
    from ktest.sessions.attached import AttachedBackend
    from ktest.sessions.shared import ClusterServer, request_restart_controllers

    with ControlPlane(assets=assets, controllers="garbagecollector") as plane:
        server = ClusterServer(lambda: BareBackend(plane))
        try:
            share = server.open()
            assert share.control_address is not None
            attached = AttachedBackend(share)
            assert attached.dead_components() == []
            request_restart_controllers(share.control_address)
            assert attached.dead_components() == [], "a restarted kube-controller-manager is no death"
            plane.processes()["kube-controller-manager"].kill()
            assert [name for name, _ in attached.dead_components()] == ["kube-controller-manager"]
        finally:
            server.close()


def test_a_controller_manager_that_does_not_come_back_leaves_the_api_server_serving(
    assets: Assets, tmp_path: Path
) -> None:
    """restart_controllers() on a plane other tests share: when kube-controller-manager fails to
    start again, the error says why, etcd and the API server keep serving, the dead process is
    reported, and a later restart brings the controllers back."""
    binaries = tmp_path / "bin"
    binaries.mkdir()
    for binary in assets.directory.iterdir():
        (binaries / binary.name).symlink_to(binary)
    controller_manager = binaries / "kube-controller-manager"
    with ControlPlane(
        assets=dataclasses.replace(assets, directory=binaries), controllers="garbagecollector"
    ) as plane:
        controller_manager.unlink()
        real = assets.binary("kube-controller-manager")
        controller_manager.write_text(  # answers ktest's flag probe, then fails as it starts
            f'#!/bin/sh\n[ "$1" = --help ] && exec {real} --help\n'
            'echo "cannot start: broken on purpose"\nexit 3\n'
        )
        controller_manager.chmod(0o755)
        with pytest.raises(ControlPlaneError, match=r"kube-controller-manager(.|\n)*broken on purpose"):
            plane.restart_controllers()
        core = kubernetes.client.CoreV1Api(client_for(plane.kubeconfig))
        assert core.read_namespace("default").metadata.name == "default"
        assert not plane.processes()["kube-controller-manager"].running
        assert plane.controllers == frozenset()
        with pytest.raises(ControlPlaneError, match="broken on purpose"):
            plane.check()
        controller_manager.unlink()
        controller_manager.symlink_to(assets.binary("kube-controller-manager"))
        plane.restart_controllers()
        plane.wait_until_controllers_ready()
        assert plane.controllers == frozenset({"garbagecollector"})
        plane.check()
