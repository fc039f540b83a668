"""kill -9 of the process that runs ``ControlPlane(nodes=3)`` leaves no kube-scheduler, no KWOK
and no directory behind: they die with their owner like the plane's other components."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from processes import descendants, live_processes_using, wait_until_all_gone

from ktest.assets import Assets
from ktest.base.procfs import process_alive

HERE = Path(__file__).parent


@pytest.mark.slow
def test_kill_9_of_a_plane_with_nodes_takes_the_scheduler_and_kwok_with_it(k8s_assets: Assets) -> None:
    child = subprocess.Popen(
        [sys.executable, str(HERE / "child_nodes_plane.py"), k8s_assets.version],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    report: dict[str, Any] = {}
    try:
        line = child.stdout.readline() if child.stdout else ""
        if not line:
            raise AssertionError(f"the child could not start a plane with nodes:\n{child.stderr.read()}")
        report = json.loads(line)
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
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
