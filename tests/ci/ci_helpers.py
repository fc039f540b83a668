"""Helpers for the CI scripts' tests (scripts/ci/ runs locally here, no control plane)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPTS = REPO / "scripts" / "ci"
VENV_BIN = Path(sys.executable).parent

BURN_CPU = ("import time\nend = time.process_time() + 2.5\nwhile time.process_time() < end: pass\n"
            "print(time.process_time())")
"""Python code that spends 2.5 s of CPU and prints how much it spent: a child whose CPU a measurement
must count."""


def read_outputs(path: Path) -> dict[str, str]:
    """Parse a ``$GITHUB_OUTPUT`` file (``name=value`` and ``name<<DELIM`` heredocs)."""
    outputs: dict[str, str] = {}
    lines = path.read_text().splitlines()
    index = 0
    while index < len(lines):
        line = lines[index]
        if "<<" in line and ("=" not in line or line.index("<<") < line.index("=")):
            name, delimiter = line.split("<<", 1)
            end = lines.index(delimiter, index + 1)
            outputs[name] = "\n".join(lines[index + 1 : end])
            index = end + 1
        else:
            name, _, value = line.partition("=")
            outputs[name] = value
            index += 1
    return outputs


def run_script(
    args: Sequence[str], *, cwd: Path, env: Mapping[str, str] | None = None, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    """Run a CI script as GitHub would (PATH has this venv's python, pytest and ktest first)."""
    environment = {**os.environ, "PATH": f"{VENV_BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
    environment.pop("GITHUB_ACTIONS", None)
    environment.update(env or {})
    return subprocess.run(
        list(args), cwd=cwd, env=environment, capture_output=True, text=True, timeout=timeout, check=False
    )


def run_ci_script(
    script: str, *args: str, cwd: Path, env: Mapping[str, str] | None = None, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    """``python scripts/ci/<script> *args``, run by :func:`run_script`."""
    return run_script([sys.executable, str(SCRIPTS / script), *args], cwd=cwd, env=env, timeout=timeout)


def tool(name: str) -> str:
    """A linter from the venv; a missing one fails the test with how to get it (never skips)."""
    found = shutil.which(name, path=str(VENV_BIN))
    if found is None:
        pytest.fail(
            f"{name} is not in {VENV_BIN}: run `make lint-workflows` (actionlint is built from its Go "
            "module by scripts/ci/install-actionlint; zizmor comes with the dev extra)"
        )
    return found
