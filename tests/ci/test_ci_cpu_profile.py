"""scripts/cpu_profile.py: a run's CPU by component and by the test file that started a process."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

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
    import importlib.util

    spec = importlib.util.spec_from_file_location("cpu_profile", SCRIPT)
    assert spec is not None and spec.loader is not None
    profile = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "cpu_profile", profile)  # its dataclasses look their module up there
    spec.loader.exec_module(profile)
    sessions = [["-m", "pytest", "-q"], ["-mpytest"], ["/x/.venv/bin/pytest"],
                ["-c", "import pytest; pytest.main([])"]]
    others = [["-c", "print(1)", "/tmp/pytest-of-root/pytest-1/op"], ["/tmp/pytest-of-root/pytest-1/op.py"],
              []]
    assert [profile._runs_pytest(argv) for argv in sessions] == [True] * 4
    assert [profile._runs_pytest(argv) for argv in others] == [False] * 3
