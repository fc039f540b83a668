"""kube-controller-manager running only the controllers tests need: by default the garbage
collector and the namespace controller, so owner references are really garbage-collected and
namespaces really finish deleting, which envtest (API server + etcd only) cannot do.
"""

from __future__ import annotations

import shutil
import warnings
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from ktest.base.kubeconfig import credentials_directory
from ktest.base.process import ManagedProcess, component_environment
from ktest.controlplane.flags import BinaryFlags, probe
from ktest.controlplane.startup_gate import StartupGate
from ktest.errors import ControlPlaneError

if TYPE_CHECKING:
    from ktest.assets.bundle import Assets

DEFAULT_CONTROLLERS = ("garbagecollector", "namespace")
GATE_KUBECONFIG = "kube-controller-manager.kubeconfig"
_STOP_TIMEOUT = 10.0

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


def controllers_to_run(requested: tuple[str, ...], assets: Assets) -> dict[str, str]:
    """:func:`resolve_controllers` for the kube-controller-manager in ``assets``; none, with a
    warning, when the binaries lack it."""
    if not requested:
        return {}
    if not assets.has("kube-controller-manager"):
        warnings.warn(
            f"kube-controller-manager is not in {assets.directory}: running without "
            f"controllers ({', '.join(requested)}), so owner references "
            "are not garbage-collected and namespaces never finish deleting. Install a "
            "complete set of binaries with `ktest binaries install` to get them.",
            stacklevel=5,  # the user's `with ControlPlane()` or start()
        )
        return {}
    binary = assets.binary("kube-controller-manager")
    return resolve_controllers(requested, probe(binary), binary)


def controller_manager_process(
    binary: Path,
    *,
    kubeconfig: Path,
    controllers: Iterable[str],
    known: BinaryFlags,
    log_path: Path,
    extra_flags: Iterable[str] = (),
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
    command.extend(extra_flags)
    return ManagedProcess("kube-controller-manager", command, log_path, env=component_environment())


def ready_markers(requested: Iterable[str]) -> list[bytes]:
    """Log lines that must appear before the requested controllers do their job."""
    return [marker for name in requested for marker in _READY_LINES.get(_normalized(name), ())]


class ControllerManager:
    """One control plane's kube-controller-manager, launched with the API server behind a
    :class:`StartupGate` (its kubeconfig points at the gate), which answers its start-up
    ``/healthz`` once :meth:`release` is called: the API server is ready then (kube-controller-manager
    itself would ask once a second; on etcd-template data readiness skips the bootstrap hooks' timer).

    ``controllers`` maps each requested name to the binary's own (see :func:`resolve_controllers`);
    ``log_note`` is added to its failure messages."""

    def __init__(
        self,
        binary: Path,
        controllers: Mapping[str, str],
        directory: Path,
        log_note: str = "",
        extra_flags: Iterable[str] = (),
    ) -> None:
        self.binary = binary
        self.extra_flags = tuple(extra_flags)
        self.controllers = dict(controllers)
        self.kubeconfig = directory / GATE_KUBECONFIG
        self.log_path = directory / "logs" / "kube-controller-manager.log"
        self.log_note = log_note
        self.process: ManagedProcess | None = None
        self.running: frozenset[str] = frozenset()  # what it runs as far as callers are told
        self.confirmed = False  # its log showed every controller doing its job
        self._gate: StartupGate | None = None

    def launch(
        self, api_port: int, serving: tuple[Path, Path], write_kubeconfig: Callable[[Path, str], Path]
    ) -> None:
        """Open a gate in front of the API server on ``api_port`` (``serving``: its certificate
        and key), write the admin kubeconfig naming the gate (``write_kubeconfig(path, server)``)
        and start kube-controller-manager on it."""
        gate = self._gate = StartupGate(api_port, *serving)
        kubeconfig = write_kubeconfig(self.kubeconfig, gate.url)
        self.confirmed = False
        self.running = frozenset(self.controllers)
        process = self.process = controller_manager_process(
            self.binary,
            kubeconfig=kubeconfig,
            controllers=self.controllers.values(),
            known=probe(self.binary),
            log_path=self.log_path,
            extra_flags=self.extra_flags,
        )
        process.log_note = self.log_note
        process.start()

    def release(self, wait: bool, timeout: float) -> None:
        """The API server is ready: let kube-controller-manager start its controllers, and with
        ``wait`` wait until they run."""
        if self._gate is None:
            return
        self._gate.open()
        if wait:
            self.wait_until_running(timeout)

    def wait_until_running(self, timeout: float) -> None:
        """Until its log shows every controller doing its job; ControlPlaneError if it died."""
        process = self.process
        assert process is not None
        markers = ready_markers(self.controllers.values())
        process.wait_until(
            lambda: all(marker in process.log_since_start() for marker in markers),
            timeout=timeout,
            what="running its controllers",
        )
        self.confirmed = True

    def halt(self) -> None:
        """Stop it, if launched (the process stays known, with its log), and close the gate."""
        self.running = frozenset()
        if self.process is not None:
            self.process.stop(_STOP_TIMEOUT)
        self.close_gate()

    def stopping(self) -> ManagedProcess | None:
        """Its process, forgotten here, for the plane to stop together with the API server."""
        self.running = frozenset()
        process, self.process = self.process, None
        return process

    def close_gate(self) -> None:
        """Close the gate and remove the kubeconfig naming it."""
        gate, self._gate = self._gate, None
        if gate is not None:
            gate.close()
            self.kubeconfig.unlink(missing_ok=True)
            shutil.rmtree(credentials_directory(self.kubeconfig), ignore_errors=True)
