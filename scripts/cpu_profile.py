#!/usr/bin/env python3
"""Where a run's CPU goes: by component, and by the test file that started it.

    python scripts/cpu_profile.py [--interval 1] [--top 25] [--json FILE] -- make test

Runs the command and, every ``--interval`` seconds until it ends, reads each process's own CPU time
(``/proc/<pid>/stat``: user + system) on the whole machine, keeping the last value per process; a
process is counted from its start (or, if it was there before the command, from the first read).
Each is put under a component (its executable: kube-apiserver, etcd, containerd...; Python by
role: pytest sessions, ktest's CLI, mypy, other) and, when it started inside a test, under that
test's file (``PYTEST_CURRENT_TEST`` in its environment at start: a session fixture's plane counts
for the test that first asked for it). A process that lives less than one interval may be missed,
and the last interval of one that ends is lost: the figures are a floor. On 2 cores a run is bound
by its CPU work, so this says what to make lighter; ``make test``'s stage table gives each stage's
total. Linux only; standard library only.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

PYTHON_ROLES = (("ktest CLI", "ktest"), ("mypy", "mypy"), ("mkdocs", "mkdocs"))  # pytest: _runs_pytest
TRACED = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok", "chromium")


@dataclass
class Seen:
    component: str
    test_file: str
    test: str  # the test's node id (the census by test)
    first: int
    last: int
    plane: str = ""  # etcd: its data directory and mount namespace (a restart or upgrade keeps both)

    def seconds(self, hertz: int) -> float:
        return (self.last - self.first) / hertz


def _stat(pid: str) -> tuple[str, int, str]:
    """(name, user + system clock ticks, start time) of a process."""
    text = Path(f"/proc/{pid}/stat").read_text()
    fields = text[text.rindex(")") + 2:].split()
    return text[text.index("(") + 1:text.rindex(")")], int(fields[11]) + int(fields[12]), fields[19]


def _component(pid: str, name: str) -> str:
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_text().split("\0")
    except OSError:
        return name
    executable = os.path.basename(argv[0]) or name
    if executable in ("pytest", "py.test"):
        return "python: pytest"
    if "python" not in executable:
        return executable[:24]
    if _runs_pytest(argv[1:]):
        return "python: pytest"
    words = " ".join(argv[1:4])
    for role, marker in PYTHON_ROLES:
        if marker in words:
            return f"python: {role}"
    return "python: other (xdist workers, operators, scripts)"


def _runs_pytest(arguments: list[str]) -> bool:
    """A pytest session: ``-m pytest``, a pytest script, or ``-c`` code calling ``pytest.main`` (not
    any command line that merely holds a path under ``/tmp/pytest-of-…``)."""
    first, second = [*arguments, "", ""][:2]
    if first == "-mpytest" or [first, second] == ["-m", "pytest"]:
        return True
    if os.path.basename(first) in ("pytest", "py.test"):
        return True
    return first == "-c" and "pytest.main(" in second


def _etcd_plane(pid: str) -> str:
    """Which control plane an etcd process serves: its ``--data-dir`` (a restart or an upgrade of
    the plane starts a new etcd on the same one) in its mount namespace (every kind node's etcd
    keeps its data in /var/lib/etcd of its own container)."""
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_text().split("\0")
        namespace = os.readlink(f"/proc/{pid}/ns/mnt")
    except OSError:
        return f"pid {pid}"
    values = [arg.split("=", 1)[1] for arg in argv if arg.startswith("--data-dir=")]
    values += [argv[i + 1] for i, arg in enumerate(argv[:-1]) if arg == "--data-dir"]
    return f"{values[0] if values else 'pid ' + pid} in {namespace}"


def _current_test(pid: str) -> str:
    """The node id of the test the process started in ("" outside tests)."""
    try:
        environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    except OSError:
        return ""
    for item in environ:
        if item.startswith(b"PYTEST_CURRENT_TEST="):
            return item.decode(errors="replace").split("=", 1)[1].rsplit(" (", 1)[0]
    return ""


def sample(seen: dict[str, Seen], started: bool) -> None:
    """One read of every process; ``started``: processes new since the command began count whole."""
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            name, ticks, start = _stat(pid)
        except (OSError, ValueError, IndexError):
            continue
        key = f"{pid}@{start}"
        if key not in seen:
            component = _component(pid, name)
            wanted = component.startswith("python") or component.startswith(TRACED)
            test = _current_test(pid) if wanted else ""
            plane = _etcd_plane(pid) if component == "etcd" else ""
            seen[key] = Seen(component, test.split("::")[0], test, 0 if started else ticks, ticks, plane)
        seen[key].last = ticks


def report(seen: dict[str, Seen], hertz: int, wall: float, top: int) -> str:
    by_component: collections.Counter[str] = collections.Counter()
    by_file: collections.Counter[str] = collections.Counter()
    for process in seen.values():
        by_component[process.component] += process.seconds(hertz)
        if process.test_file:
            by_file[process.test_file] += process.seconds(hertz)
    total = sum(by_component.values())
    lines = [f"CPU {total / 60:.1f} min in {wall / 60:.1f} min of wall time ({total / wall:.2f} cores)", "",
             "| component | CPU min | share |", "| --- | ---: | ---: |"]
    lines += [f"| {name} | {seconds / 60:.2f} | {seconds / total:.1%} |"
              for name, seconds in by_component.most_common(top)]
    lines += ["", "| test file (processes it started) | CPU s |", "| --- | ---: |"]
    lines += [f"| {name} | {seconds:.1f} |" for name, seconds in by_file.most_common(top)]
    return "\n".join([*lines, "", census(seen, top)])


def census(seen: dict[str, Seen], top: int) -> str:
    """How many control planes (etcd data directories: a plane restarted or upgraded is one; and etcd
    processes), API servers (restarts add) and child pytest sessions were started, by test file (the
    kind nodes' etcd, started by no test, count apart)."""
    def count(component: str) -> collections.Counter[str]:
        return collections.Counter(p.test_file or "(no test)" for p in seen.values()
                                   if p.component == component)

    first_seen: dict[str, str] = {}
    for process in seen.values():
        if process.component == "etcd":
            first_seen.setdefault(process.plane or str(id(process)), process.test_file or "(no test)")
    planes = collections.Counter(first_seen.values())
    etcd, servers, sessions = count("etcd"), count("kube-apiserver"), count("python: pytest")
    lines = [f"Census: {sum(planes.values())} control planes ({sum(etcd.values())} etcd processes), "
             f"{sum(servers.values())} kube-apiserver processes, {sum(sessions.values())} pytest processes",
             "",
             "| test file | planes | etcd | kube-apiserver | pytest |", "| --- | ---: | ---: | ---: | ---: |"]
    for name, _ in (etcd + sessions).most_common(top):
        lines.append(f"| {name} | {planes[name]} | {etcd[name]} | {servers[name]} | {sessions[name]} |")
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--interval", type=float, default=1.0)
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--json", type=Path, help="also write every process seen here")
    parser.add_argument("command", nargs="+")
    args = parser.parse_args(argv)
    seen: dict[str, Seen] = {}
    sample(seen, started=False)
    began = time.monotonic()
    command = subprocess.Popen(args.command)
    while command.poll() is None:
        sample(seen, started=True)
        time.sleep(args.interval)
    sample(seen, started=True)
    hertz = os.sysconf("SC_CLK_TCK")
    print(report(seen, hertz, time.monotonic() - began, args.top))
    if args.json:
        args.json.write_text(json.dumps({key: asdict(value) for key, value in seen.items()}))
    return command.returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
