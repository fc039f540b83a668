# Over 500 lines: ControlPlane orchestrates three processes, certificates and readiness as one public class.
"""ControlPlane: etcd + kube-apiserver + kube-controller-manager that never leak."""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import tempfile
import threading
import time
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import TypeVar

from ktest.assets.bundle import Assets
from ktest.assets.selectors import KubeVersion
from ktest.base import janitor
from ktest.base.certs import CertificateAuthority, KeyPair, service_account_key_pair
from ktest.base.janitor_client import JanitorHandle
from ktest.base.kubeconfig import credentials_directory, write_kubeconfig
from ktest.base.ports import free_ports, is_address_in_use
from ktest.base.process import ManagedProcess
from ktest.controlplane.admission import ADMISSION_CONFIG_FLAG, webhook_client_ca, write_webhook_client
from ktest.controlplane.apiserver import (
    AUDIT_POLICY,
    RESERVED_FLAGS,
    SERVING_DNS_NAMES,
    SERVING_IPS,
    STATIC_FLAGS,
    ApiServerClient,
    ApiServerFiles,
    apiserver_process,
)
from ktest.controlplane.controller_manager import (
    DEFAULT_CONTROLLERS,
    controller_manager_process,
    ready_markers,
    requested_controllers,
    resolve_controllers,
)
from ktest.controlplane.etcd import EtcdCredentials, etcd_healthy, etcd_process
from ktest.controlplane.flags import flag_name, probe
from ktest.controlplane.startup_gate import StartupGate
from ktest.errors import AssetsError, ControlPlaneError

ADMIN_USER = "ktest-admin"
ADMIN_GROUPS = ("system:masters",)
_PORT_ATTEMPTS = 3
_MIN_TMPFS_FREE = 1 << 30
# etcd preallocates its write-ahead log in 64 MiB segments; with less, it fails at some later write.
MIN_RUN_DIR_FREE = 96 << 20
_STOP_TIMEOUT = 10.0
_GATE_KUBECONFIG = "kube-controller-manager.kubeconfig"
T = TypeVar("T")


class _PortTaken(Exception):
    """A component could not bind its port: choose new ports and start again."""


@dataclass
class _User:
    name: str
    groups: tuple[str, ...]
    pair: KeyPair
    kubeconfig: Path


def _sweep_temp_leftovers() -> None:
    """Webhook and operator-log directories that killed runs left in $TMPDIR (owner recorded)."""
    from ktest.base import holders

    holders.sweep_temp()


def default_base_directory(shm: Path = Path("/dev/shm")) -> Path:
    """``shm`` when it is a writable tmpfs with 1 GiB free (etcd writes much faster
    there), else the temp directory."""
    try:
        if shm.is_dir() and os.access(shm, os.W_OK | os.X_OK):
            stats = os.statvfs(shm)
            if stats.f_bavail * stats.f_frsize >= _MIN_TMPFS_FREE:
                return shm
    except OSError:
        pass
    return Path(tempfile.gettempdir())


def disk_hint(base: Path) -> str:
    """How to get out of a full or unwritable directory for control planes."""
    return (
        f"Check the file system holding {base} (`df -h {base}`): free some space there, or "
        "put control planes elsewhere with --ktest-run-dir / ini ktest_run_dir / KTEST_RUN_DIR "
        "(ControlPlane(root_directory=...) in Python)."
    )


_NO_SPACE = (b"no space left on device", b"disk quota exceeded")


class ControlPlane:
    """A private etcd + kube-apiserver (+ kube-controller-manager) for tests.

    ``with ControlPlane() as cp:`` starts it and always stops it; every child
    process is also bound to this Python process, so not even ``kill -9`` of
    it leaves a process or a temporary directory behind.

    ``controllers`` selects kube-controller-manager's controllers (default:
    garbage collector and namespace); ``"none"`` or ``()`` runs no
    controller-manager. ``apiserver_flags`` (``["--name=value"]`` or a mapping)
    replace ktest's value of the same flag or are added. ``audit=True`` writes
    a Metadata-level audit log to :attr:`audit_log`. ``etcd_template=True`` starts
    etcd on a copy of data bootstrapped once per version (see
    :mod:`ktest.controlplane.etcd_template`; not with ``apiserver_flags``, which may
    change what is bootstrapped), so the API server has little left to create.
    ``wait_for_controllers=False``: :meth:`start` returns once the API server is ready and
    kube-controller-manager is launched; it comes up meanwhile and
    :meth:`wait_until_controllers_ready` waits for it (the pytest plugin does before the first
    test body). Either way kube-controller-manager is launched with the API server, behind a
    :class:`~ktest.controlplane.startup_gate.StartupGate` that answers its start-up health
    check once the API server is ready (on etcd-template data without waiting for the
    bootstrap hooks' fixed second). Until that first wait, restarts do not wait for the
    controllers either; after it they do.
    """

    def __init__(
        self,
        k8s_version: str | None = None,
        *,
        assets: Assets | Path | str | None = None,
        controllers: str | Iterable[str] | None = DEFAULT_CONTROLLERS,
        apiserver_flags: Sequence[str] | Mapping[str, str | None] = (),
        audit: bool = False,
        keep_directory: bool = False,
        root_directory: Path | str | None = None,
        start_timeout: float = 60.0,
        wait_for_controllers: bool = True,
        etcd_template: bool = True,
    ) -> None:
        self.k8s_version = k8s_version
        self._assets_argument = assets
        self._requested_controllers = requested_controllers(controllers)
        if isinstance(apiserver_flags, str):
            raise ControlPlaneError(
                f"apiserver_flags must be a list such as [{apiserver_flags!r}], not a string."
            )
        given_flags = apiserver_flags.keys() if isinstance(apiserver_flags, Mapping) else apiserver_flags
        reserved = sorted({flag_name(f) for f in given_flags} & RESERVED_FLAGS)
        if reserved:
            raise ControlPlaneError(
                f"apiserver_flags may not set {', '.join('--' + name for name in reserved)}: "
                "ktest chooses the API server's address, port, certificates and etcd so that "
                "parallel control planes never collide. Remove those flags; cp.server and "
                "cp.kubeconfig tell where the API server listens."
            )
        self._apiserver_flags = apiserver_flags
        # The user's own admission configuration replaces ktest's, and with it the client
        # certificate the API server presents to webhooks (see webhook_client_ca).
        self._writes_admission_config = ADMISSION_CONFIG_FLAG not in {flag_name(f) for f in given_flags}
        self.audit = audit
        self.keep_directory = keep_directory
        self._root_directory = Path(root_directory) if root_directory is not None else None
        self.start_timeout = start_timeout
        self.wait_for_controllers = wait_for_controllers
        self.etcd_template = etcd_template
        self._template: Path | None = None
        # The bootstrap objects of the template this start restored, if any: readiness then
        # needs them served instead of the bootstrap hooks' timer (see _wait_for_apiserver).
        self._bootstrap: dict[str, list[str]] | None = None

        self._lock = threading.RLock()
        self._assets: Assets | None = None
        self._directory: Path | None = None
        self._janitor: JanitorHandle | None = None
        self._ca: CertificateAuthority | None = None
        self._admin: KeyPair | None = None
        self._files: ApiServerFiles | None = None
        self._etcd_credentials: EtcdCredentials | None = None
        self._client: ApiServerClient | None = None
        self._ports: tuple[int, int, int] = (0, 0, 0)  # etcd client, etcd peer, apiserver
        self._etcd: ManagedProcess | None = None
        self._apiserver: ManagedProcess | None = None
        self._controller_manager: ManagedProcess | None = None
        self._controller_names: dict[str, str] = {}
        self._running_controllers: frozenset[str] = frozenset()
        self._controllers_waited_for = False
        self._controllers_confirmed = False
        # kube-controller-manager starts with the API server, behind this gate.
        self._gate: StartupGate | None = None
        self._users: list[_User] = []
        self._version = ""
        self._started = False

    # -- public state ------------------------------------------------------------
    @property
    def directory(self) -> Path:
        """The private temporary directory. Its layout is relied upon elsewhere:
        ``admin.kubeconfig``, ``users/<name>.kubeconfig``, ``certs/ca.crt`` and
        ``certs/ca.key`` (ECDSA), ``certs/etcd/`` (etcd's own CA, no key on disk),
        ``certs/webhook-client/`` (the API server's client certificate for admission webhooks,
        its CA's key not on disk, and the admission configuration naming it),
        ``kube-controller-manager.kubeconfig`` (on etcd-template data: the admin identity, the
        start-up gate's address), ``<kubeconfig>.credentials/`` (the files each kubeconfig names),
        ``logs/<component>.log``, ``etcd/`` (data),
        ``audit.log``."""
        if self._directory is None:
            raise ControlPlaneError("the control plane has no directory yet: call start() first.")
        return self._directory

    @property
    def kubeconfig(self) -> Path:
        """The admin kubeconfig (client certificate in group system:masters)."""
        self._require_started()
        return self.directory / "admin.kubeconfig"

    @property
    def server(self) -> str:
        self._require_started()
        return f"https://127.0.0.1:{self._ports[2]}"

    @property
    def version(self) -> str:
        """The API server's version, e.g. ``1.37.2``."""
        self._require_started()
        return self._version

    @property
    def controllers(self) -> frozenset[str]:
        """The controllers running in kube-controller-manager, as requested (may be empty)."""
        return self._running_controllers

    @property
    def audit_log(self) -> Path | None:
        return self.directory / "audit.log" if self.audit else None

    @property
    def webhook_client_ca(self) -> Path | None:
        """The CA of the client certificate this API server presents to admission webhooks
        (ktest's webhook front server requires it); None with the user's own
        ``--admission-control-config-file`` in ``apiserver_flags``."""
        return webhook_client_ca(self._directory) if self._started else None

    @property
    def assets(self) -> Assets | None:
        return self._assets

    @property
    def running(self) -> bool:
        return self._started

    def log_path(self, component: str) -> Path:
        """The log file of ``etcd``, ``kube-apiserver`` or ``kube-controller-manager``."""
        return self.directory / "logs" / f"{component}.log"

    def processes(self) -> dict[str, ManagedProcess]:
        """The running components by name."""
        found = {
            "etcd": self._etcd,
            "kube-apiserver": self._apiserver,
            "kube-controller-manager": self._controller_manager,
        }
        return {name: process for name, process in found.items() if process is not None}

    def check(self) -> None:
        """Raise ControlPlaneError (with its log tail) if a component has died since start."""
        with self._lock:
            self._require_started()
            for process in self.processes().values():
                if not process.running:
                    raise process.failure(
                        "died while the control plane was in use",
                        "Its log above says why; cp.restart() starts it again on the same data.",
                    )

    def __repr__(self) -> str:
        state = f"server={self.server}" if self._started else "stopped"
        return f"ControlPlane({state}, directory={self._directory})"

    # -- context manager -----------------------------------------------------------
    def __enter__(self) -> ControlPlane:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()

    # -- lifecycle -------------------------------------------------------------
    def start(self) -> ControlPlane:
        """Start etcd, kube-apiserver and the controllers; return once they are ready."""
        with self._lock:
            if self._started:
                raise ControlPlaneError(f"{self!r} is already started.")
            try:
                self._prepare()
                self._start_components(prefer_ports=())
            except BaseException:
                self._teardown()
                raise
            self._started = True
            return self

    def stop(self) -> None:
        """Stop every component (SIGTERM, bounded wait, SIGKILL) and remove the directory."""
        with self._lock:
            self._teardown()

    def restart(self) -> None:
        """Stop every component and start them again on the same etcd data.

        The same ports are reused when still free, so kubeconfigs stay valid; if
        one was taken meanwhile, new ports are chosen and every kubeconfig this
        control plane wrote is rewritten.
        """
        with self._lock:
            self._require_started()
            self._started = False
            try:
                self._stop_components()
                self._start_components(prefer_ports=self._ports)
            except BaseException:
                self._teardown()
                raise
            self._started = True

    def wait_until_controllers_ready(self, timeout: float | None = None) -> None:
        """Block until kube-controller-manager runs its controllers (at once if it does, or if
        none runs); see ``wait_for_controllers``. Raises ControlPlaneError if it died."""
        with self._lock:
            self._require_started()
            self._controllers_waited_for = True
            if self._controller_manager is not None and not self._controllers_confirmed:
                self._wait_for_controller_markers(self.start_timeout if timeout is None else timeout)

    def restart_controllers(self) -> None:
        """Restart kube-controller-manager alone (a no-op when the plane runs no controllers).

        The garbage collector discovers resource types at start and then only every
        30 s, so for custom resources whose CRD was installed after start, deleting an
        owner may take that long to reach its dependents. Call this after installing
        CRDs: the restarted garbage collector watches them at once.

        If kube-controller-manager does not come back, the error says why and etcd and the
        API server keep serving (other tests, xdist workers, may be using them); the failed
        process stays listed in :meth:`processes`, and calling this again tries again.
        """
        with self._lock:
            self._require_started()
            if not self._controller_names:
                return
            self._halt_controller_manager()
            self._controller_manager = None
            try:
                self._launch_behind_gate()
                self._release_controllers()
            except BaseException:
                self._halt_controller_manager()  # still listed, dead, with its log
                raise

    def add_user(self, name: str, groups: Iterable[str] = ()) -> Path:
        """A kubeconfig for a client-certificate identity (CN=name, O=groups)."""
        with self._lock:
            self._require_started()
            if not name or not isinstance(name, str):
                raise ControlPlaneError(f"add_user needs a non-empty user name, got {name!r}.")
            if isinstance(groups, str):
                groups = [groups]
            group_tuple = tuple(groups)
            assert self._ca is not None
            stem = re.sub(r"[^A-Za-z0-9._-]", "_", name)
            taken = {user.kubeconfig.stem for user in self._users}
            unique, counter = stem, 1
            while unique in taken:
                counter += 1
                unique = f"{stem}-{counter}"
            pair = self._ca.client(f"user-{unique}", name, group_tuple)
            path = self.directory / "users" / f"{unique}.kubeconfig"
            user = _User(name, group_tuple, pair, path)
            self._write_user_kubeconfig(user)
            self._users.append(user)
            return path

    # -- internals: preparation ---------------------------------------------------
    def _require_started(self) -> None:
        if not self._started:
            raise ControlPlaneError(
                "the control plane is not running: use `with ControlPlane() as cp:` or call cp.start() first."
            )

    def _resolve_assets(self) -> Assets:
        given = self._assets_argument
        if isinstance(given, Assets):
            return given
        if isinstance(given, (str, Path)):
            directory = Path(given).expanduser()
            if not directory.is_dir():
                raise AssetsError(
                    f"assets directory {directory} does not exist. Pass the directory that "
                    "holds etcd and kube-apiserver, or leave assets=None to let ktest find them."
                )
            return Assets(directory=directory, version=self.k8s_version or "", origin="path")
        from ktest.assets import resolve_assets  # deferred: it pulls in download machinery

        resolved: Assets = resolve_assets(self.k8s_version)
        return resolved

    def _prepare(self) -> None:
        """Everything that can fail on bad input, before any process starts."""
        assets = self._assets = self._resolve_assets()
        etcd_binary = assets.binary("etcd")
        assets.binary("kube-apiserver")
        self._controller_names = {}
        if self._requested_controllers:
            if assets.has("kube-controller-manager"):
                binary = assets.binary("kube-controller-manager")
                self._controller_names = resolve_controllers(
                    self._requested_controllers, probe(binary), binary
                )
            else:
                warnings.warn(
                    f"kube-controller-manager is not in {assets.directory}: running without "
                    f"controllers ({', '.join(self._requested_controllers)}), so owner references "
                    "are not garbage-collected and namespaces never finish deleting. Install a "
                    "complete set of binaries with `ktest binaries install` to get them.",
                    stacklevel=4,
                )
        probe(etcd_binary)  # cached: decides --unsafe-no-fsync
        self._ca = self._admin = self._files = self._etcd_credentials = None
        self._users = []
        self._ports = (0, 0, 0)

        base = self._root_directory or default_base_directory()
        try:
            base.mkdir(parents=True, exist_ok=True)
            janitor.sweep_stale(base)
            _sweep_temp_leftovers()
            stats = os.statvfs(base)
            free = stats.f_bavail * stats.f_frsize
            if free < MIN_RUN_DIR_FREE:
                raise ControlPlaneError(
                    f"only {free >> 20} MiB free in {base}; a control plane needs at least "
                    f"{MIN_RUN_DIR_FREE >> 20} MiB there (etcd preallocates its log in 64 MiB segments).\n"
                    f"{disk_hint(base)}"
                )
            directory = Path(tempfile.mkdtemp(prefix=f"{janitor.DIRECTORY_PREFIX}{os.getpid()}-", dir=base))
        except OSError as error:
            raise ControlPlaneError(
                f"cannot create the control plane's directory in {base}: "
                f"{error.strerror or error}.\n{disk_hint(base)}"
            ) from None
        self._directory = directory
        janitor.write_holder(directory)
        if self.keep_directory:
            janitor.write_private_text(directory / janitor.KEEP_FILE, "")
        self._janitor = JanitorHandle(directory, keep_directory=self.keep_directory)
        (directory / "logs").mkdir(mode=0o700)
        self._template = self._find_template() if self.etcd_template and not self._apiserver_flags else None

    def _find_template(self) -> Path | None:
        """The etcd template for these binaries, bootstrapped first if there is none; None
        when that fails (an unwritable cache, a bootstrap that did not start): the template
        only saves time, and this start then bootstraps itself and reports any error."""
        from ktest.controlplane import etcd_template

        assert self._assets is not None
        binaries = [self._assets.binary("etcd"), self._assets.binary("kube-apiserver")]
        bootstrap: list[ControlPlane] = []
        objects: list[dict[str, list[str]] | None] = []

        def build() -> Path:
            plane = ControlPlane(
                assets=self._assets,
                controllers="none",
                root_directory=self._root_directory,
                start_timeout=self.start_timeout,
                etcd_template=False,
            )
            bootstrap.append(plane)
            plane.start()
            with plane._lock:
                plane._forget_kubernetes_service()
                assert plane._client is not None
                objects.append(plane._client.bootstrap_objects())
                plane._stop_components()  # etcd last and cleanly: its data is complete
            return plane.directory / "etcd"

        def remove(_data_dir: Path) -> None:
            for plane in bootstrap:
                plane.stop()

        try:
            return etcd_template.ensure(
                etcd_template.template_key(binaries, STATIC_FLAGS), build, remove, lambda: objects[-1]
            )
        except (OSError, ControlPlaneError):
            return None
        finally:
            remove(Path())

    def _make_etcd_credentials(self) -> EtcdCredentials:
        if self._etcd_credentials is None:
            self._etcd_credentials = EtcdCredentials.create(self.directory / "certs" / "etcd")
        return self._etcd_credentials

    def _make_certificates(self) -> None:
        if self._ca is not None:
            return
        certs = self.directory / "certs"
        self._ca = ca = CertificateAuthority(certs)
        serving = ca.serving("apiserver", SERVING_DNS_NAMES, SERVING_IPS)
        self._admin = ca.client("admin", ADMIN_USER, ADMIN_GROUPS)
        sa_key, sa_public = service_account_key_pair(certs)
        audit_policy = audit_log = None
        if self.audit:
            audit_policy = self.directory / "audit-policy.yaml"
            janitor.write_private_text(audit_policy, AUDIT_POLICY)
            audit_log = self.directory / "audit.log"
        admission_config = None
        if self._writes_admission_config:
            admission_config = write_webhook_client(self.directory).admission_config
        self._files = ApiServerFiles(
            ca_cert=ca.cert_path,
            serving_cert=serving.cert_path,
            serving_key=serving.key_path,
            service_account_key=sa_key,
            service_account_public_key=sa_public,
            cert_dir=certs,
            etcd=self._make_etcd_credentials(),
            audit_policy=audit_policy,
            audit_log=audit_log,
            admission_config=admission_config,
        )

    # -- internals: components ------------------------------------------------
    def _start_components(self, prefer_ports: tuple[int, ...]) -> None:
        for attempt in range(1, _PORT_ATTEMPTS + 1):
            try:
                self._start_once(prefer_ports if attempt == 1 else ())
                return
            except _PortTaken as taken:
                self._stop_components()
                if attempt == _PORT_ATTEMPTS:
                    raise ControlPlaneError(
                        f"{taken} on {_PORT_ATTEMPTS} attempts with different ports. "
                        "Something on this machine keeps taking ports on 127.0.0.1; "
                        "free some ports or retry."
                    ) from None

    def _write_files(self, write: Callable[[], T]) -> T:
        """Run ``write`` (certificates, kubeconfigs); a full disk becomes a clear error."""
        try:
            return write()
        except OSError as error:
            raise ControlPlaneError(
                f"cannot write the control plane's files in {self.directory}: "
                f"{error.strerror or error} ({error.filename or ''}).\n"
                f"{disk_hint(self.directory.parent)}"
            ) from None

    def _launch(self, process: ManagedProcess) -> ManagedProcess:
        if not self.keep_directory:
            process.log_note = "(removed on failure; keep_directory=True keeps it)"
        process.start()
        return process

    def _start_once(self, prefer_ports: tuple[int, ...]) -> None:
        assert self._assets is not None
        etcd_port, peer_port, api_port = free_ports(3, prefer=prefer_ports)
        self._ports = (etcd_port, peer_port, api_port)
        data_dir = self.directory / "etcd"
        template = self._template
        self._bootstrap = None
        if template is not None and not data_dir.exists():
            from ktest.controlplane.etcd_template import bootstrap_objects, restore

            self._write_files(lambda: restore(template, data_dir))
            # Only on the data just restored: there the hooks have nothing to create or change.
            # After a restart a test may have changed a bootstrap role, which the hooks would
            # put back a second later, so restarts wait for them as a plain start does.
            self._bootstrap = bootstrap_objects(template)
        self._etcd = etcd_process(
            self._assets.binary("etcd"),
            data_dir=data_dir,
            client_port=etcd_port,
            peer_port=peer_port,
            credentials=self._write_files(self._make_etcd_credentials),
            log_path=self.log_path("etcd"),
        )
        self._launch(self._etcd)
        self._write_files(self._make_certificates)  # while etcd starts
        assert self._files is not None and self._admin is not None and self._ca is not None
        self._apiserver = apiserver_process(
            self._assets.binary("kube-apiserver"),
            port=api_port,
            etcd_port=etcd_port,
            files=self._files,
            extra_flags=self._apiserver_flags,
            log_path=self.log_path("kube-apiserver"),
        )
        self._launch(self._apiserver)
        self._write_files(self._write_kubeconfigs)
        self._client = ApiServerClient(
            api_port, self._ca.cert_path, self._admin.cert_path, self._admin.key_path
        )
        if self._controller_names:
            self._launch_behind_gate()  # its start-up overlaps the API server's
        self._wait_for_apiserver()
        self._release_controllers()
        self._version = self._read_version()

    def _launch_behind_gate(self) -> None:
        """Launch kube-controller-manager with its kubeconfig pointing at a :class:`StartupGate`,
        which answers its start-up ``/healthz`` once :meth:`_release_controllers` finds the API
        server ready (where kube-controller-manager would ask once a second; on data restored
        from an etcd template without waiting for the bootstrap hooks' timer)."""
        assert self._files is not None and self._ca is not None and self._admin is not None
        ca, admin = self._ca, self._admin
        gate = self._gate = StartupGate(self._ports[2], self._files.serving_cert, self._files.serving_key)
        kubeconfig = self._write_files(
            lambda: write_kubeconfig(
                self.directory / _GATE_KUBECONFIG,
                server=gate.url,
                ca_pem=ca.cert_pem,
                user=ADMIN_USER,
                client_cert_pem=admin.cert_pem,
                client_key_pem=admin.key_pem,
            )
        )
        self._controllers_confirmed = False
        self._running_controllers = frozenset(self._controller_names)
        self._launch_controller_manager(kubeconfig)

    def _release_controllers(self) -> None:
        """The API server is ready: let kube-controller-manager start its controllers (and wait
        for them unless the plane defers that)."""
        if self._gate is None:
            return
        self._gate.open()
        if self.wait_for_controllers or self._controllers_waited_for:
            self._wait_for_controller_markers(self.start_timeout)

    def _close_gate(self) -> None:
        gate, self._gate = self._gate, None
        if gate is not None:
            gate.close()
            kubeconfig = self.directory / _GATE_KUBECONFIG
            kubeconfig.unlink(missing_ok=True)
            shutil.rmtree(credentials_directory(kubeconfig), ignore_errors=True)

    def _wait_for_apiserver(self) -> None:
        etcd, apiserver, client = self._etcd, self._apiserver, self._client
        assert etcd is not None and apiserver is not None and client is not None
        deadline = time.monotonic() + self.start_timeout
        while True:
            for process in (etcd, apiserver):
                if not process.running:
                    self._raise_start_failure(process)
            if client.ready(self._bootstrap):
                return
            if time.monotonic() > deadline:
                healthy = etcd_healthy(self._ports[0], self._make_etcd_credentials())
                etcd_state = "healthy" if healthy else "NOT healthy"
                if self._bootstrap is not None:
                    missing = client.missing_bootstrap_objects(self._bootstrap)
                    if missing:
                        listed = ", ".join(missing[:10])
                        etcd_state += f"; bootstrap objects of the etcd template not served: {listed}"
                problem = client.service_ip_problem()
                if problem is not None:
                    etcd_state += f"; a Service cannot get a cluster IP: {problem}"
                raise apiserver.failure(
                    f"was not ready after {self.start_timeout:.0f} s (etcd is {etcd_state})",
                    "Raise start_timeout= if this machine is very busy, or look at the log above.",
                )
            time.sleep(0.02)

    def _forget_kubernetes_service(self) -> None:
        """Wait for the API server to create the ``kubernetes`` Service, then delete it.

        For an etcd template: the Service names this API server's port, and an API server
        never corrects an existing one, so each control plane must create its own."""
        client, apiserver = self._client, self._apiserver
        assert client is not None and apiserver is not None
        path = "/api/v1/namespaces/default/services/kubernetes"
        apiserver.wait_until(
            lambda: client.get(path)[0] == 200,
            timeout=self.start_timeout,
            what="serving the kubernetes Service",
        )
        status, body = client.request("DELETE", path)
        if status not in (200, 202):
            raise apiserver.failure(
                f"could not delete the kubernetes Service (status {status}: {body[:300]!r})"
            )

    def _raise_start_failure(self, process: ManagedProcess) -> None:
        raw = process.log_since_start()
        log = raw.decode("utf-8", "replace")
        if is_address_in_use(log):
            raise _PortTaken(f"{process.name} could not bind its port")
        hint = ""
        if any(marker in raw.lower() for marker in _NO_SPACE):
            hint = f"The disk is full: {process.name} could not write in {self.directory}. "
            hint += disk_hint(self.directory.parent)
        elif process is self._apiserver:
            hint = self._flag_hint(log)
        raise process.failure("exited during start", hint)

    def _flag_hint(self, log: str) -> str:
        """Point at the user's extra flag when the API server rejected one."""
        assert self._assets is not None
        given = (
            list(self._apiserver_flags.keys())
            if isinstance(self._apiserver_flags, Mapping)
            else [flag_name(argument) for argument in self._apiserver_flags]
        )
        known = probe(self._assets.binary("kube-apiserver"))
        unknown = [name for name in given if not known.accepts(name)]
        if unknown:
            return (
                f"kube-apiserver does not know the flag(s) {', '.join('--' + n for n in unknown)} "
                f"passed in apiserver_flags=. Remove or fix them (`kube-apiserver --help` lists "
                "the flags this version accepts)."
            )
        if given and ("unknown flag" in log or "invalid argument" in log or "Error:" in log):
            return (
                "Check the extra flags passed in apiserver_flags= "
                f"({', '.join('--' + n for n in given)}): the log above says why they were rejected."
            )
        return ""

    def _read_version(self) -> str:
        assert self._client is not None and self._assets is not None
        reported = self._client.version().get("gitVersion", "")
        with contextlib.suppress(AssetsError):
            stamped = KubeVersion.parse(reported)
            if stamped.patch is not None and (stamped.major, stamped.minor) != (0, 0):
                return stamped.text
        # A binary built without version stamping reports v0.0.0-master+$Format$.
        return self._assets.version or str(reported).removeprefix("v")

    def _launch_controller_manager(self, kubeconfig: Path) -> None:
        assert self._assets is not None
        binary = self._assets.binary("kube-controller-manager")
        process = self._controller_manager = controller_manager_process(
            binary,
            kubeconfig=kubeconfig,
            controllers=self._controller_names.values(),
            known=probe(binary),
            log_path=self.log_path("kube-controller-manager"),
        )
        self._launch(process)

    def _wait_for_controller_markers(self, timeout: float) -> None:
        process = self._controller_manager
        assert process is not None
        markers = ready_markers(self._controller_names.values())
        process.wait_until(
            lambda: all(marker in process.log_since_start() for marker in markers),
            timeout=timeout,
            what="running its controllers",
        )
        self._controllers_confirmed = True

    @property
    def kubeconfig_path(self) -> Path:
        """Where the admin kubeconfig is written (available during start)."""
        return self.directory / "admin.kubeconfig"

    def _write_kubeconfigs(self) -> None:
        assert self._ca is not None and self._admin is not None
        write_kubeconfig(
            self.kubeconfig_path,
            server=f"https://127.0.0.1:{self._ports[2]}",
            ca_pem=self._ca.cert_pem,
            user=ADMIN_USER,
            client_cert_pem=self._admin.cert_pem,
            client_key_pem=self._admin.key_pem,
        )
        for user in self._users:
            self._write_user_kubeconfig(user)

    def _write_user_kubeconfig(self, user: _User) -> None:
        assert self._ca is not None
        write_kubeconfig(
            user.kubeconfig,
            server=f"https://127.0.0.1:{self._ports[2]}",
            ca_pem=self._ca.cert_pem,
            user=user.name,
            client_cert_pem=user.pair.cert_pem,
            client_key_pem=user.pair.key_pem,
        )

    def _halt_controller_manager(self) -> None:
        """Stop kube-controller-manager, if one was launched, and close its start-up gate."""
        self._running_controllers = frozenset()
        if self._controller_manager is not None:
            self._controller_manager.stop(_STOP_TIMEOUT)
        self._close_gate()

    def _stop_components(self) -> None:
        """Stop controllers and API server together, then etcd (the API server needs it)."""
        self._running_controllers = frozenset()
        front = [p for p in (self._controller_manager, self._apiserver) if p is not None]
        for process in front:
            process.terminate()
        for process in front:
            process.stop(_STOP_TIMEOUT)
        self._close_gate()
        if self._etcd is not None:
            self._etcd.stop(_STOP_TIMEOUT)
        self._controller_manager = self._apiserver = self._etcd = None

    def _teardown(self) -> None:
        """Stop everything this control plane started and remove its directory."""
        self._started = False
        try:
            self._stop_components()
        finally:
            if self._directory is not None and not self.keep_directory:
                shutil.rmtree(self._directory, ignore_errors=True)
            self._release_janitor()

    def _release_janitor(self) -> None:
        janitor_handle, self._janitor = self._janitor, None
        if janitor_handle is not None:
            janitor_handle.release()
