"""scripts/cpu_profile.py: a run's CPU by component and by the test file that started a process."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from ci_helpers import BURN_CPU

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "cpu_profile.py"

PARENT = f"""
import os, subprocess, sys
env = dict(os.environ, PYTEST_CURRENT_TEST="tests/test_burner.py::test_burns (call)")
subprocess.run([sys.executable, "-c", {BURN_CPU!r}], env=env, check=True)
sys.exit(3)
"""


def test_a_grandchild_started_inside_a_test_is_counted_for_its_file_and_the_exit_status_kept() -> None:
    env = {key: value for key, value in os.environ.items() if key != "PYTEST_CURRENT_TEST"}
    command = [sys.executable, str(SCRIPT), "--interval", "0.2", "--", sys.executable, "-c", PARENT]
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 3, done.stderr  # the command's own status
    found = re.search(r"^\| tests/test_burner\.py \| (\d+\.\d) \|$", done.stdout, re.MULTILINE)
    assert found, done.stdout
    # At least what it burnt, but for the last interval before it ended (a floor, as documented).
    assert float(found[1]) >= 2.5 - 0.5, done.stdout
    row = r"^\| python: other \(xdist workers, operators, scripts\) \| (\d+\.\d\d) \|"
    python = re.search(row, done.stdout, re.MULTILINE)
    assert python and float(python[1]) * 60 >= 2.0, done.stdout


def test_the_census_counts_pytest_sessions_not_command_lines_that_hold_a_pytest_path(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A pytest session is ``-m pytest``, a pytest script, or ``-c`` code calling pytest.main: a
    command line that merely names a path under /tmp/pytest-of-… (an operator a test started) is none."""
    profile: Any = _profile_module(monkeypatch)
    sessions = [["-m", "pytest", "-q"], ["-mpytest"], ["/x/.venv/bin/pytest"],
                ["-c", "import pytest; pytest.main([])"]]
    others = [["-c", "print(1)", "/tmp/pytest-of-root/pytest-1/op"], ["/tmp/pytest-of-root/pytest-1/op.py"],
              []]
    assert [profile._runs_pytest(argv) for argv in sessions] == [True] * 4
    assert [profile._runs_pytest(argv) for argv in others] == [False] * 3


def _profile_module(monkeypatch: pytest.MonkeyPatch) -> object:
    import importlib.util

    spec = importlib.util.spec_from_file_location("cpu_profile", SCRIPT)
    assert spec is not None and spec.loader is not None
    profile = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "cpu_profile", profile)  # its dataclasses look their module up there
    spec.loader.exec_module(profile)
    return profile


def test_a_plane_is_its_etcd_data_directory_in_its_mount_namespace(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A restarted or upgraded plane starts a new etcd on the same data: one plane, two etcd
    processes; kind nodes keep /var/lib/etcd each in a container (mount namespace) of its own."""
    profile: Any = _profile_module(monkeypatch)
    data = tmp_path / "ktest-cp-x" / "etcd"
    code = "import time; print('started', flush=True); time.sleep(60)"
    command = [sys.executable, "-c", code, f"--data-dir={data}"]
    etcd = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
    try:
        # once it prints, it runs its own command line (not the parent's, between fork and exec)
        assert etcd.stdout is not None and etcd.stdout.readline() == "started\n"
        plane = profile._etcd_plane(str(etcd.pid))
    finally:
        etcd.kill()
        etcd.wait()
    assert plane == f"{data} in {os.readlink('/proc/self/ns/mnt')}"

    def seen(test_file: str, plane: str) -> Any:
        return profile.Seen("etcd", test_file, f"{test_file}::t", 0, 1, plane)

    processes = {
        "1@1": seen("tests/a.py", "/tmp/p1/etcd in mnt:[1]"),
        "2@2": seen("tests/a.py", "/tmp/p1/etcd in mnt:[1]"),  # the same plane, restarted
        "3@3": seen("tests/b.py", "/tmp/p2/etcd in mnt:[1]"),
        "4@4": seen("", "/var/lib/etcd in mnt:[7]"),  # two kind nodes
        "5@5": seen("", "/var/lib/etcd in mnt:[8]"),
    }
    census = profile.census(processes, 10)
    assert census.startswith("Census: 4 control planes (5 etcd processes)"), census
    assert "| tests/a.py | 1 | 2 | 0 | 0 |" in census, census
    assert "| (no test) | 2 | 2 | 0 | 0 |" in census, census
