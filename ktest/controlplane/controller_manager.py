"""kube-controller-manager running only the controllers tests need.

Only the garbage collector and the namespace controller by default: with them,
owner references are really garbage-collected and namespaces really finish
deleting, which envtest (API server + etcd only) cannot do.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from ktest.base.process import ManagedProcess, component_environment
from ktest.controlplane.flags import BinaryFlags
from ktest.errors import ControlPlaneError

DEFAULT_CONTROLLERS = ("garbagecollector", "namespace")

# Log lines after which a controller does its job. The garbage collector deletes
# nothing until its resource monitors have synced, which takes a moment after start.
_READY_LINES = {
    "garbagecollector": (b"Proceeding to collect garbage",),
    "namespace": (b"Starting namespace controller",),
}


def _normalized(name: str) -> str:
    """``garbage-collector-controller`` and ``garbagecollector`` -> ``garbagecollector``."""
    key = name.lower().replace("-", "").replace("_", "")
    return key.removesuffix("controller") or key


def requested_controllers(controllers: str | Iterable[str] | None) -> tuple[str, ...]:
    """The user's ``controllers=`` value as a tuple; empty for None, "none" or ()."""
    if controllers is None:
        return ()
    if isinstance(controllers, str):
        if controllers.strip().lower() in ("", "none"):
            return ()
        controllers = controllers.split(",")
    names = tuple(dict.fromkeys(name.strip() for name in controllers if name.strip()))
    if any(name.lower() == "none" for name in names):
        return ()
    return names


def resolve_controllers(requested: tuple[str, ...], known: BinaryFlags, binary: Path) -> dict[str, str]:
    """Map each requested name to the binary's own controller name.

    Accepts the names kube-controller-manager lists in ``--help`` and their
    short aliases (``garbagecollector`` for ``garbage-collector-controller``).
    """
    if not known.controllers:
        return {name: name for name in requested}  # cannot validate: let the binary decide
    by_key = {_normalized(name): name for name in known.controllers}
    resolved: dict[str, str] = {}
    unknown = []
    for name in requested:
        if name in known.controllers:
            resolved[name] = name
        elif _normalized(name) in by_key:
            resolved[name] = by_key[_normalized(name)]
        else:
            unknown.append(name)
    if unknown:
        raise ControlPlaneError(
            f"unknown controller name(s) {', '.join(map(repr, unknown))} in controllers=.\n"
            f"{binary} knows: {', '.join(known.controllers)}.\n"
            "Use one of those names (short forms such as 'garbagecollector' and 'namespace' "
            "work too), or controllers='none' to run no kube-controller-manager."
        )
    return resolved


def controller_manager_process(
    binary: Path,
    *,
    kubeconfig: Path,
    controllers: Iterable[str],
    known: BinaryFlags,
    log_path: Path,
) -> ManagedProcess:
    command = [
        str(binary),
        f"--kubeconfig={kubeconfig}",
        f"--controllers={','.join(controllers)}",
        "--leader-elect=false",
        "--secure-port=0",
        "--use-service-account-credentials=false",
        # The default client rate limit (20 qps) slows namespace deletion down.
        "--kube-api-qps=500",
        "--kube-api-burst=1000",
    ]
    if known.accepts("concurrent-namespace-syncs"):
        command.append("--concurrent-namespace-syncs=10")
    return ManagedProcess("kube-controller-manager", command, log_path, env=component_environment())


def ready_markers(requested: Iterable[str]) -> list[bytes]:
    """Log lines that must appear before the requested controllers do their job."""
    markers: list[bytes] = []
    for name in requested:
        markers.extend(_READY_LINES.get(_normalized(name), ()))
    return markers
