"""Small helpers shared by the control-plane tests."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import kubernetes

COMPONENTS = ("etcd", "kube-apiserver", "kube-controller-manager")


def client_for(kubeconfig: Path) -> Any:
    """An ApiClient for one kubeconfig, without touching the kubernetes module's globals."""
    return kubernetes.config.new_client_from_config(config_file=str(kubeconfig))


def _state(pid: int) -> str | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat[stat.rindex(")") + 2 :].split()[0]


def live_processes_using(directory: Path) -> list[tuple[int, str]]:
    """(pid, command line) of live (non-zombie) processes whose command line mentions ``directory``."""
    needle = str(directory).encode()
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
        except OSError:
            continue
        if needle in cmdline and _state(int(entry)) not in (None, "Z"):
            found.append((int(entry), cmdline.replace(b"\0", b" ").decode(errors="replace")))
    return found


def alive(pid: int) -> bool:
    """True when ``pid`` exists and is not a zombie."""
    return _state(pid) not in (None, "Z")


def _stat_fields(pid: int) -> list[str] | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return [stat[stat.index("(") + 1 : stat.rindex(")")], *stat[stat.rindex(")") + 2 :].split()]


def descendants(root: int) -> dict[int, tuple[str, str]]:
    """Live descendants of ``root``: pid -> (command name, start time)."""
    children: dict[int, list[int]] = {}
    info: dict[int, tuple[str, str]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        fields = _stat_fields(int(entry))
        if fields is None or fields[1] == "Z":
            continue
        children.setdefault(int(fields[2]), []).append(int(entry))
        info[int(entry)] = (fields[0], fields[20])
    found: dict[int, tuple[str, str]] = {}
    stack = [root]
    while stack:
        for child in children.get(stack.pop(), []):
            found[child] = info[child]
            stack.append(child)
    return found


def same_process_alive(pid: int, start_time: str) -> bool:
    """True when ``pid`` still runs and is the same process (not a reused pid)."""
    fields = _stat_fields(pid)
    return fields is not None and fields[1] != "Z" and fields[20] == start_time
