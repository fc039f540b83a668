"""Running ktest's command line in a child process, as a user's shell does (``python -m ktest``),
for the test folders that check what a command prints and returns, and the command line of an
inner pytest session (``import cli_runs``: tests/ is on ``sys.path``)."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path


def run_ktest_cli(
    *args: str, env: Mapping[str, str] | None = None, cwd: Path | None = None, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    """``python -m ktest ARGS`` with ``env`` as its whole environment (default: this process's),
    in ``cwd``; its result, whatever the exit code."""
    return subprocess.run(
        [sys.executable, "-m", "ktest", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        timeout=timeout,
        check=False,
    )


def pytest_command(*args: str) -> list[str]:
    """``python -m pytest -q -p no:cacheprovider ARGS``: an inner pytest session in a child process,
    quiet and writing no ``.pytest_cache`` into the project it runs."""
    return [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args]
