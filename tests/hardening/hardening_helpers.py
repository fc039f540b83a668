"""Helpers for the hardening tests: who listens where, what a run left behind."""

from __future__ import annotations

import ipaddress
import os
import socket
import stat
import subprocess
from pathlib import Path

from cli_runs import run_ktest_cli
from processes import tcp_sockets

KEY_MARKERS = (b"PRIVATE KEY", b"BEGIN CERTIFICATE")


def _address(hex_address: str, family: int) -> str:
    raw = bytes.fromhex(hex_address)
    if family == socket.AF_INET:
        return str(ipaddress.IPv4Address(raw[::-1]))
    words = [raw[i : i + 4][::-1] for i in range(0, 16, 4)]
    return str(ipaddress.IPv6Address(b"".join(words)))


def listening_addresses(pid: int) -> list[tuple[str, int]]:
    """(address, port) of every TCP socket ``pid`` listens on (from /proc)."""
    found = []
    for table, local, _remote, state in tcp_sockets(pid):
        if state == "0A":  # LISTEN
            address, port = local.split(":")
            found.append(
                (_address(address, socket.AF_INET if table == "tcp" else socket.AF_INET6), int(port, 16))
            )
    return found


def is_loopback(address: str) -> bool:
    return ipaddress.ip_address(address).is_loopback


def files_with_key_material(root: Path) -> list[Path]:
    """Files under ``root`` holding a PEM private key or certificate."""
    found = []
    for directory, _subdirectories, files in os.walk(root):
        for name in files:
            path = Path(directory) / name
            try:
                data = path.read_bytes()
            except OSError:
                continue
            if any(marker in data for marker in KEY_MARKERS):
                found.append(path)
    return found


def sandbox_env(tmp_path: Path, assets_directory: Path) -> dict[str, str]:
    """This process's environment for a child ktest run of its own: a private TMPDIR, run
    directory and state directory under ``tmp_path``, the session's binaries, no controllers,
    and none of the variables that would tie it to this test session."""
    env = dict(os.environ)
    tied = ("PYTEST_ADDOPTS", "PYTEST_XDIST_WORKER", "KTEST_REUSE", "KTEST_BACKEND", "KUBEBUILDER_ASSETS")
    for variable in tied:
        env.pop(variable, None)
    for name in ("tmp", "run", "state"):
        (tmp_path / name).mkdir()
    env.update(
        TMPDIR=str(tmp_path / "tmp"),
        KTEST_RUN_DIR=str(tmp_path / "run"),
        XDG_STATE_HOME=str(tmp_path / "state"),
        KTEST_ASSETS=str(assets_directory),
        KTEST_CONTROLLERS="none",
    )
    return env


def run_ktest(env: dict[str, str], *args: str, timeout: float = 180) -> subprocess.CompletedProcess[str]:
    """``python -m ktest ARGS`` in ``env``; its result, whatever the exit code."""
    return run_ktest_cli(*args, env=env, timeout=timeout)


def loose_modes(root: Path, *, include_root: bool = True) -> list[str]:
    """Every path under ``root`` (itself too, unless the test made it) whose mode gives group or
    others any access."""
    found = []
    paths = [root] if include_root else []
    for directory, subdirectories, files in os.walk(root):
        paths += [Path(directory) / name for name in [*subdirectories, *files]]
    assert len(paths) > int(include_root), f"nothing under {root}: the walk saw nothing to check"
    for path in paths:
        mode = os.lstat(path).st_mode
        if stat.S_ISLNK(mode):
            continue
        if stat.S_IMODE(mode) & 0o077:
            found.append(f"{oct(stat.S_IMODE(mode))} {path}")
    return found
