"""Lifecycle: nothing leaks after stop, an exception, or kill -9; restart keeps
data; several control planes run side by side.

Besides the owners' deaths (each a child process with a plane of its own), one module-scoped pair
of private planes carries the tests (see ``pair``): started at once, the first on a taken port;
the second, once compared with the first, ended by an exception in its ``with`` body. The tests
that restart or break a part of the first check it is healthy and leave it healthy again."""

from __future__ import annotations

import dataclasses
import os
import signal
import socket
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import kubernetes
import pytest
from controlplane_helpers import client_for
from processes import descendants, live_processes_using, reporting_child, wait_until_all_gone

from ktest.assets.bundle import Assets
from ktest.backends.bare.backend import BareBackend
from ktest.base.process import ManagedProcess
from ktest.base.procfs import process_alive
from ktest.controlplane import ControlPlane
from ktest.controlplane import plane as plane_module
from ktest.errors import ControlPlaneError

HERE = Path(__file__).parent
OWN_THREAD = "lifecycle-own-plane"
PAIR = pytest.mark.xdist_group("lifecycle-plane-pair")  # one worker starts it


def _assert_nothing_left(directory: Path, pids: list[int]) -> None:
    assert not directory.exists(), f"{directory} was not removed"
    assert not [pid for pid in pids if process_alive(pid)], "a component process is still running"
    assert live_processes_using(directory) == []


@pytest.mark.parametrize("ending", ["exit without stop", "kill -9 with a forked child"])
def test_owner_death_leaves_nothing(assets: Assets, ending: str) -> None:
    """kill -9 of the Python process that started a plane (from a thread that has
    since ended) takes its components and its directory with it. The owner has forked a child
    that outlives it: what a plain kill -9 must do, checked the same way, and cleanup that does
    not wait for a process holding copies of the owner's descriptors (one plane for both)."""
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


@dataclasses.dataclass
class Ended:
    """A plane whose ``with`` body raised, as seen while it ran and after."""

    plane: ControlPlane
    directory: Path
    processes: list[ManagedProcess]
    pids: list[int]
    all_alive: bool
    janitor_pid: int | None
    janitor_alive: bool
    escaped: BaseException | None  # what left the with block


class Boom(RuntimeError):
    """The exception the ``with`` body raises."""


def _seen_running(plane: ControlPlane) -> Ended:
    processes = list(plane.processes().values())
    pids = [p.pid for p in processes if p.pid]
    janitor_pid = plane._janitor.pid if plane._janitor else None
    return Ended(
        plane, plane.directory, processes, pids, all(process_alive(pid) for pid in pids),
        janitor_pid, janitor_pid is not None and process_alive(janitor_pid), None,
    )


@dataclasses.dataclass
class Apart:
    """Two planes compared while both ran."""

    servers: tuple[str, str]
    directories: tuple[Path, Path]
    read_in_second: int  # HTTP status of reading, from the second, a ConfigMap created in the first


def _compare(first: ControlPlane, second: ControlPlane) -> Apart:
    one = kubernetes.client.CoreV1Api(client_for(first.kubeconfig))
    two = kubernetes.client.CoreV1Api(client_for(second.kubeconfig))
    one.create_namespaced_config_map("default", {"metadata": {"name": "only-in-first"}})
    try:
        two.read_namespaced_config_map("only-in-first", "default")
        status = 200
    except kubernetes.client.ApiException as missing:
        status = missing.status
    return Apart((first.server, second.server), (first.directory, second.directory), status)


@dataclasses.dataclass
class Pair:
    """Two planes started at the same time from two threads of this process."""

    own: ControlPlane  # garbage collector; its binaries are symlinks in ``binaries``; kept running
    binaries: Path
    own_port_choices: list[list[int]]  # what free_ports gave ``own``'s start, first one taken
    own_server_at_start: str
    own_apiserver_log_at_start: str
    apart: Apart
    second: Ended  # default controllers; ended by an exception in its with body after ``apart``


@pytest.fixture(scope="module")
def pair(assets: Assets, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pair]:
    """``own`` and a second plane, started at once: the API server port first chosen for ``own`` is
    taken between choosing and binding (as if someone bound it meanwhile); the second runs in a
    ``with`` block of its thread, whose body raises once the two are compared."""
    binaries = tmp_path_factory.mktemp("bin")
    for binary in assets.directory.iterdir():
        (binaries / binary.name).symlink_to(binary)
    own = ControlPlane(assets=dataclasses.replace(assets, directory=binaries), controllers="garbagecollector")
    squatter = socket.socket()
    squatter.bind(("127.0.0.1", 0))
    squatter.listen()
    real_free_ports = plane_module.free_ports
    choices: list[list[int]] = []

    def first_choice_taken(count: int, *, prefer: tuple[int, ...] = ()) -> list[int]:
        ports = real_free_ports(count, prefer=prefer)
        if threading.current_thread().name == OWN_THREAD:
            if not choices:
                ports[2] = squatter.getsockname()[1]  # the API server's port
            choices.append(list(ports))
        return ports

    errors: list[BaseException] = []
    second: list[ControlPlane] = []
    ended: list[Ended] = []
    second_up, compared = threading.Event(), threading.Event()

    def start_own() -> None:
        try:
            own.start()
        except BaseException as error:  # raised below
            errors.append(error)

    def run_second() -> None:
        try:
            with ControlPlane(assets=assets) as plane:
                second.append(plane)
                second_up.set()
                compared.wait()
                ended.append(_seen_running(plane))
                raise Boom("boom")
        except Boom as error:
            ended[0].escaped = error
        except BaseException as error:  # raised below
            errors.append(error)
        finally:
            second_up.set()

    own_thread = threading.Thread(target=start_own, name=OWN_THREAD)
    second_thread = threading.Thread(target=run_second)
    try:
        try:
            with pytest.MonkeyPatch.context() as patch:
                patch.setattr(plane_module, "free_ports", first_choice_taken)
                own_thread.start()
                second_thread.start()
                own_thread.join()
                second_up.wait()
            squatter.close()
            assert not errors, errors
            apart = _compare(own, second[0])
        finally:
            squatter.close()
            compared.set()
            second_thread.join()
        assert not errors, errors
        assert ended, "the with block ended without the exception"
        log = own.log_path("kube-apiserver").read_text()
        yield Pair(own, binaries, choices, own.server, log, apart, ended[0])
    finally:
        own.stop()


@PAIR
def test_several_planes_run_side_by_side(pair: Pair) -> None:
    """Compared by the fixture while both ran."""
    first, second = pair.apart.servers
    assert first != second
    assert pair.apart.directories[0] != pair.apart.directories[1]
    # Each has its own data: an object created in one is absent in the other.
    assert pair.apart.read_in_second == 404


@PAIR
def test_stop_leaves_no_process_and_no_directory_and_needs_no_sigkill(pair: Pair) -> None:
    """Components exit on SIGTERM: stop() (here by leaving the with block) does not fall back to SIGKILL."""
    ended = pair.second
    assert len(ended.pids) == 3 and ended.all_alive
    assert ended.janitor_pid is not None and ended.janitor_alive
    _assert_nothing_left(ended.directory, ended.pids)
    assert not process_alive(ended.janitor_pid)
    for process in ended.processes:
        assert process.returncode is not None
        assert process.returncode != -signal.SIGKILL, f"{process.name} needed SIGKILL"
    ended.plane.stop()  # idempotent


@PAIR
def test_exception_in_with_body_stops_everything(pair: Pair) -> None:
    ended = pair.second
    assert isinstance(ended.escaped, RuntimeError) and str(ended.escaped) == "boom"
    assert len(ended.pids) == 3  # etcd, kube-apiserver, kube-controller-manager
    _assert_nothing_left(ended.directory, ended.pids)


@PAIR
def test_taken_port_is_retried_with_new_ports(pair: Pair) -> None:
    """A port grabbed between choosing and binding: the plane starts on other ports."""
    calls = pair.own_port_choices
    assert len(calls) == 2
    assert pair.own_server_at_start == f"https://127.0.0.1:{calls[1][2]}"
    assert "address already in use" in pair.own_apiserver_log_at_start
    core = kubernetes.client.CoreV1Api(client_for(pair.own.kubeconfig))
    assert core.read_namespace("default").metadata.name == "default"


@PAIR
def test_restart_keeps_data_and_kubeconfig(pair: Pair) -> None:
    plane = pair.own
    plane.check()  # as the previous test left it
    client = client_for(plane.kubeconfig)
    core = kubernetes.client.CoreV1Api(client)
    core.create_namespaced_config_map("default", {"metadata": {"name": "survivor"}})
    old_pids = [p.pid for p in plane.processes().values()]
    old_server = plane.server

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


class _LentBackend(BareBackend):
    """The bare backend on a plane this module lends it: closing it leaves the plane to the next test."""

    def close(self) -> None:
        super(BareBackend, self).close()


@PAIR
def test_an_attached_session_sees_the_owners_restarted_controller_manager(pair: Pair) -> None:
    """pytest-xdist workers ask the process that holds the plane which components died: the pid
    in their share goes stale when kube-controller-manager restarts (after new CRDs), and a
    failing test's report must not say it died when it runs."""
    from ktest.sessions.attached import AttachedBackend
    from ktest.sessions.shared import ClusterServer, request_restart_controllers

    plane = pair.own
    plane.check()  # as the previous test left it
    server = ClusterServer(lambda: _LentBackend(plane))
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
        plane.restart_controllers()  # healthy again for the next test
    plane.check()


@PAIR
def test_a_controller_manager_that_does_not_come_back_leaves_the_api_server_serving(pair: Pair) -> None:
    """restart_controllers() on a plane other tests share: when kube-controller-manager fails to
    start again, the error says why, etcd and the API server keep serving, the dead process is
    reported, and a later restart brings the controllers back."""
    plane = pair.own
    plane.check()  # as the previous test left it
    controller_manager = pair.binaries / "kube-controller-manager"
    target = controller_manager.resolve()
    controller_manager.unlink()
    try:
        controller_manager.write_text(  # answers ktest's flag probe, then fails as it starts
            f'#!/bin/sh\n[ "$1" = --help ] && exec {target} --help\n'
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
    finally:
        controller_manager.unlink()
        controller_manager.symlink_to(target)
    plane.restart_controllers()
    plane.wait_until_controllers_ready()
    assert plane.controllers == frozenset({"garbagecollector"})
    plane.check()
