"""The processes on this machine, read from /proc, for tests that check nothing is left
running (``import processes``: tests/ is on ``sys.path``). Whether one pid is alive is
ktest's own answer: :func:`ktest.base.procfs.process_alive`."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ktest.base.procfs import process_alive
from ktest.wait import eventually


def _stat_fields(pid: int) -> list[str] | None:
    """The fields of /proc/<pid>/stat, the command name first (it may hold spaces); None when gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return [stat[stat.index("(") + 1 : stat.rindex(")")], *stat[stat.rindex(")") + 2 :].split()]


def _pids() -> list[int]:
    return [int(entry) for entry in os.listdir("/proc") if entry.isdigit()]


def descendants(root: int) -> dict[int, tuple[str, str]]:
    """Live (non-zombie) descendants of ``root``: pid -> (command name, start time)."""
    children: dict[int, list[int]] = {}
    info: dict[int, tuple[str, str]] = {}
    for pid in _pids():
        fields = _stat_fields(pid)
        if fields is None or fields[1] in ("Z", "X"):
            continue
        children.setdefault(int(fields[2]), []).append(pid)
        info[pid] = (fields[0], fields[20])
    found: dict[int, tuple[str, str]] = {}
    stack = [root]
    while stack:
        for child in children.get(stack.pop(), []):
            found[child] = info[child]
            stack.append(child)
    return found


@contextmanager
def reporting_child(command: list[str], what: str) -> Iterator[tuple[subprocess.Popen[str], dict[str, Any]]]:
    """Run a child script that prints one JSON line once it is up: yields the child and that
    report, and kills the child on the way out if it still runs. A child that ends without
    reporting fails the test with ``what`` and its stderr."""
    child = subprocess.Popen(
        command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        line = child.stdout.readline() if child.stdout else ""
        if not line:
            raise AssertionError(f"{what}:\n{child.stderr.read() if child.stderr else ''}")
        yield child, json.loads(line)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()


def wait_until_all_gone(
    components: Mapping[int, str | None],
    directory: Path,
    owned: Mapping[int, str | None],
    what: str = "the components",
) -> None:
    """After an owner died: its ``components`` (pid -> start time) exit, ``directory`` is removed,
    and then every process it ``owned`` exits (its janitor too, once that has cleaned up)."""
    eventually(
        lambda: not any(process_alive(pid, start) for pid, start in components.items()),
        timeout=20,
        description=f"{what} to die with their owner",
    )
    eventually(lambda: not directory.exists(), timeout=20, description=f"{directory} to be removed")
    eventually(
        lambda: not any(process_alive(pid, start) for pid, start in owned.items()),
        timeout=20,
        description="every descendant of the owner (the janitor too) to exit",
    )


def live_processes_using(directory: Path) -> list[tuple[int, str]]:
    """(pid, command line) of live (non-zombie) processes whose command line mentions ``directory``."""
    needle = str(directory).encode()
    found = []
    for pid in _pids():
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        if needle in cmdline and process_alive(pid):
            found.append((pid, cmdline.replace(b"\0", b" ").decode(errors="replace")))
    return found


def socket_inodes(pid: int) -> set[str]:
    """The inodes of the sockets process ``pid`` holds open (empty once it is gone)."""
    inodes = set()
    try:
        entries = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return inodes
    for entry in entries:
        try:
            target = os.readlink(f"/proc/{pid}/fd/{entry}")
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[len("socket:[") : -1])
    return inodes


def tcp_sockets(pid: int) -> list[tuple[str, str, str, str]]:
    """(table, local, remote, state) of every TCP socket ``pid`` holds, as /proc/<pid>/net/tcp*
    write them: table ``tcp`` or ``tcp6``, addresses ``HEXADDR:HEXPORT``, state ``0A`` = LISTEN."""
    inodes = socket_inodes(pid)
    found = []
    for table in ("tcp", "tcp6"):
        try:
            lines = Path(f"/proc/{pid}/net/{table}").read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if fields[9] in inodes:
                found.append((table, fields[1], fields[2], fields[3]))
    return found


def with_default_sigint() -> None:
    """``preexec_fn`` for a child a test will Ctrl-C (SIGINT): a terminal's job has SIGINT at its
    default, but a suite started with it ignored (``make test &`` from a script) passes that on,
    and Python then installs no KeyboardInterrupt handler."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
