"""kill -9 of the process that runs ``ControlPlane(nodes=3)`` leaves no kube-scheduler, no KWOK
and no directory behind: they die with their owner like the plane's other components."""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

import pytest
from processes import descendants, live_processes_using, reporting_child, wait_until_all_gone

from ktest.assets import Assets
from ktest.base.procfs import process_alive

HERE = Path(__file__).parent


@pytest.mark.slow
def test_kill_9_of_a_plane_with_nodes_takes_the_scheduler_and_kwok_with_it(k8s_assets: Assets) -> None:
    command = [sys.executable, str(HERE / "child_nodes_plane.py"), k8s_assets.version]
    with reporting_child(command, "the child could not start a plane with nodes") as (child, report):
        directory = Path(report["directory"])
        pids: dict[str, int] = report["pids"]
        assert {"kube-scheduler", "kwok"} <= set(pids), pids
        tree = descendants(child.pid)
        started = {pid: start for pid, (_, start) in tree.items()}
        assert set(pids.values()) <= set(started), (pids, tree)
        simulators = {pids[name]: started[pids[name]] for name in ("kube-scheduler", "kwok")}
        assert all(process_alive(pid, start) for pid, start in simulators.items())

        os.kill(child.pid, signal.SIGKILL)
        child.wait(30)

        wait_until_all_gone(simulators, directory, started, what="kube-scheduler and kwok")
        assert live_processes_using(directory) == []
