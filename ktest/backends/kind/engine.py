"""Find the Docker engine and explain what is missing; ktest never installs or starts one.

:func:`connect` returns a docker SDK client for an engine that can run kind
nodes, or raises KindError saying what is wrong (no engine, socket permission,
engine too old, a capability the sandbox lacks with no runtime that drops it)
and how to fix it.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ktest.errors import KindError

# Docker 20.10 (API 1.41) is the oldest engine kind v0.33 and ktest's image build were tried with.
MIN_API_VERSION = (1, 41)
DEFAULT_SOCKET = "/var/run/docker.sock"
_CONNECT_TIMEOUT_SECONDS = 30
# Runtimes that are plain runc: they cannot start privileged containers when the bounding set
# lacks a capability the kernel knows (Docker asks for all of them).
_PLAIN_RUNC = {"runc", "io.containerd.runc.v2", "io.containerd.runtime.v1.linux"}
_ENGINE_HOWTO = (
    "Start a Docker engine (on Debian as root, ktest's `scripts/docker-engine` installs docker.io "
    "and starts dockerd; elsewhere `sudo systemctl start docker`), or point DOCKER_HOST at one."
)
CAPABILITY_NAMES = (
    "CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_DAC_READ_SEARCH", "CAP_FOWNER", "CAP_FSETID",
    "CAP_KILL", "CAP_SETGID", "CAP_SETUID", "CAP_SETPCAP", "CAP_LINUX_IMMUTABLE",
    "CAP_NET_BIND_SERVICE", "CAP_NET_BROADCAST", "CAP_NET_ADMIN", "CAP_NET_RAW", "CAP_IPC_LOCK",
    "CAP_IPC_OWNER", "CAP_SYS_MODULE", "CAP_SYS_RAWIO", "CAP_SYS_CHROOT", "CAP_SYS_PTRACE",
    "CAP_SYS_PACCT", "CAP_SYS_ADMIN", "CAP_SYS_BOOT", "CAP_SYS_NICE", "CAP_SYS_RESOURCE",
    "CAP_SYS_TIME", "CAP_SYS_TTY_CONFIG", "CAP_MKNOD", "CAP_LEASE", "CAP_AUDIT_WRITE",
    "CAP_AUDIT_CONTROL", "CAP_SETFCAP", "CAP_MAC_OVERRIDE", "CAP_MAC_ADMIN", "CAP_SYSLOG",
    "CAP_WAKE_ALARM", "CAP_BLOCK_SUSPEND", "CAP_AUDIT_READ", "CAP_PERFMON", "CAP_BPF",
    "CAP_CHECKPOINT_RESTORE",
)


@dataclass(frozen=True)
class EngineInfo:
    """What ktest needs to know about the engine it talks to."""

    server_version: str
    api_version: str
    cgroup_version: int
    default_runtime: str
    runtimes: Mapping[str, str]
    docker_root: str
    local: bool


def missing_capabilities(status_file: Path = Path("/proc/self/status")) -> list[str]:
    """Capabilities the kernel knows that this process's bounding set lacks (e.g. CAP_SYS_RESOURCE)."""
    try:
        line = next(x for x in status_file.read_text().splitlines() if x.startswith("CapBnd:"))
        bounding = int(line.split()[1], 16)
        last = int(Path("/proc/sys/kernel/cap_last_cap").read_text().strip())
    except (OSError, StopIteration, ValueError, IndexError):
        return []
    last = min(last, len(CAPABILITY_NAMES) - 1)
    return [CAPABILITY_NAMES[bit] for bit in range(last + 1) if not (bounding >> bit) & 1]


def engine_address(env: Mapping[str, str] | None = None) -> str:
    env = os.environ if env is None else env
    return env.get("DOCKER_HOST") or f"unix://{DEFAULT_SOCKET}"


def connect(env: Mapping[str, str] | None = None, *, check_runtime: bool = True) -> Any:
    """A ``docker.DockerClient`` for an engine able to run kind nodes, or KindError saying why not."""
    import docker
    from docker.errors import APIError, DockerException

    env = dict(os.environ if env is None else env)
    address = engine_address(env)
    try:
        client = docker.DockerClient.from_env(
            environment=env, timeout=_CONNECT_TIMEOUT_SECONDS, use_ssh_client=False
        )
        client.ping()
    except (DockerException, APIError, OSError) as error:
        raise _connection_error(address, error) from error
    info = engine_info(client, env)
    check_version(info, address)
    if check_runtime and info.local:
        check_runtime_for(info, address, missing_capabilities())
    return client


def engine_info(client: Any, env: Mapping[str, str] | None = None) -> EngineInfo:
    """Version, cgroup version and runtimes of the engine ``client`` talks to."""
    info = client.info()
    address = engine_address(env)
    return EngineInfo(
        server_version=str(info.get("ServerVersion", "?")),
        api_version=str(client.api.api_version),
        cgroup_version=int(info.get("CgroupVersion") or 1),
        default_runtime=str(info.get("DefaultRuntime") or "runc"),
        runtimes={
            name: str((spec or {}).get("path", ""))
            for name, spec in (info.get("Runtimes") or {}).items()
        },
        docker_root=str(info.get("DockerRootDir") or "/var/lib/docker"),
        local=address.startswith("unix://"),
    )


def cgroup_version(client: Any) -> int:
    """1 or 2: the cgroup version the engine's containers (and so kind's kubelets) see."""
    return engine_info(client).cgroup_version


def _connection_error(address: str, error: BaseException) -> KindError:
    text = str(error)
    socket_path = address.removeprefix("unix://") if address.startswith("unix://") else None
    if "Permission denied" in text or "PermissionError" in text:
        return KindError(
            f"permission denied on the Docker engine socket {socket_path or address}: this user "
            f"(uid {os.getuid()}) may not talk to Docker.\n"
            "Add the user to the `docker` group (`sudo usermod -aG docker $USER`, then log in again), "
            "or run as root."
        )
    if socket_path is not None and not Path(socket_path).exists():
        reason = f"there is no socket at {socket_path}"
    else:
        reason = f"connecting to it failed ({_short(text)})"
    return KindError(
        f"no Docker engine at {address}: {reason}. kind clusters and node images need one.\n"
        + _ENGINE_HOWTO
    )


def check_version(info: EngineInfo, address: str) -> None:
    """KindError when the engine's API is older than kind and the image build were tried with."""
    try:
        api = tuple(int(part) for part in info.api_version.split("."))
    except ValueError:
        return
    if api < MIN_API_VERSION:
        need = ".".join(map(str, MIN_API_VERSION))
        raise KindError(
            f"the Docker engine at {address} is too old: version {info.server_version}, API "
            f"{info.api_version}; kind needs API {need} (Docker 20.10) or newer.\n"
            "Upgrade the engine (Debian: `apt-get install docker.io` from bookworm or later)."
        )


def check_runtime_for(info: EngineInfo, address: str, missing: list[str]) -> None:
    """KindError when capabilities are ``missing`` and the engine's default runtime is plain runc."""
    if not missing:
        return
    default = info.default_runtime
    path = info.runtimes.get(default, default)
    if default not in _PLAIN_RUNC and Path(path).name not in _PLAIN_RUNC:
        return
    raise KindError(
        f"this machine's capability bounding set lacks {', '.join(missing)}, and the Docker "
        f"engine at {address} runs containers with plain runc (default runtime {default!r}). "
        "Docker gives privileged containers - kind nodes are privileged - every capability the "
        "kernel knows, so runc fails with 'unable to apply caps: operation not permitted'.\n"
        "Fix: make Docker's default runtime a wrapper that removes those capabilities from the "
        "container spec before calling runc: as root, stop dockerd and run ktest's "
        "`scripts/docker-engine`, which installs such a wrapper in /etc/docker/daemon.json "
        "(read only when dockerd starts) and starts dockerd again."
    )


def _short(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= 200 else text[:200] + "..."
