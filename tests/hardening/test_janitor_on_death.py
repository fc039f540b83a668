"""The janitor's one generic rule: after a holder dies without releasing it, it runs the command
lines the holder registered (``JanitorHandle.on_death``), then removes the held directory. It knows
no backend: kind registers ``ktest/backends/kind/on_death.py`` this way (its cluster deleted after
``kill -9``: tests/on_kind/test_kind_lifecycle.py)."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from ktest.base.janitor_client import JanitorHandle
from ktest.wait import eventually

HOLDER = """
import sys
from pathlib import Path
from ktest.base.janitor_client import JanitorHandle

directory, marker, release = Path(sys.argv[1]), sys.argv[2], sys.argv[3] == "release"
handle = JanitorHandle(directory)
handle.on_death([sys.executable, "-c", "import sys; open(sys.argv[1], 'w').write(' '.join(sys.argv[2:]))",
                 marker, "cluster", "with spaces"])
if release:
    handle.release()
print(handle.pid, flush=True)
sys.stdin.read()  # until killed, or its stdin closes
"""


def _hold(tmp_path: Path, release: bool) -> tuple[subprocess.Popen[str], int, Path, Path]:
    directory = tmp_path / "held"
    directory.mkdir()
    marker = tmp_path / "ran"
    holder = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(HOLDER), str(directory), str(marker),
         "release" if release else "keep"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )
    assert holder.stdout is not None
    janitor_pid = int(holder.stdout.readline())
    return holder, janitor_pid, directory, marker


def _exited(pid: int) -> bool:
    return not Path(f"/proc/{pid}").exists() or Path(f"/proc/{pid}/stat").read_text().split(") ")[1][0] == "Z"


def test_a_killed_holders_on_death_command_runs_before_its_directory_goes(tmp_path: Path) -> None:
    holder, janitor_pid, directory, marker = _hold(tmp_path, release=False)
    holder.send_signal(signal.SIGKILL)
    holder.wait()
    eventually(lambda: marker.exists() and not directory.exists(), timeout=15,
               description="the janitor ran the on-death command line and removed the held directory")
    assert marker.read_text() == "cluster with spaces"  # each word passed as it was given
    eventually(lambda: _exited(janitor_pid), timeout=15, description="the janitor exited once done")


def test_a_released_holders_on_death_command_never_runs(tmp_path: Path) -> None:
    holder, janitor_pid, directory, marker = _hold(tmp_path, release=True)
    holder.send_signal(signal.SIGKILL)
    holder.wait()
    eventually(lambda: _exited(janitor_pid), timeout=15, description="the released janitor exited")
    assert not marker.exists() and directory.exists()


def test_a_command_line_the_protocol_cannot_carry_is_refused(tmp_path: Path) -> None:
    handle = JanitorHandle(None)
    try:
        with pytest.raises(ValueError, match="an on-death command line cannot hold tabs or newlines"):
            handle.on_death(["kind", "delete", "cluster\tname"])
    finally:
        handle.release()
