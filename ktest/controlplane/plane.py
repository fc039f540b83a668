"""ControlPlane: etcd + kube-apiserver + kube-controller-manager that never leak.

The class orchestrates its parts: the private directory (``run_directory``), certificates and
kubeconfigs (``pki``), the components (``etcd``, ``apiserver``, ``controller_manager``) and the
etcd template (``etcd_template``)."""

from __future__ import annotations

import functools
import threading
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from ktest.assets.bundle import Assets
from ktest.base.closing import StartedOnEnter
from ktest.base.janitor_client import JanitorHandle
from ktest.base.ports import free_ports, is_address_in_use
from ktest.base.process import ManagedProcess
from ktest.controlplane import etcd_template
from ktest.controlplane.addons import plane_addons, upgrade, with_addon_controllers
from ktest.controlplane.admission import ADMISSION_CONFIG_FLAG, webhook_client_ca
from ktest.controlplane.apiserver import (
    STATIC_FLAGS,
    ApiServerClient,
    apiserver_process,
    check_extra_flags,
    extra_flag_names,
    rejected_flags_hint,
    served_version,
    wait_until_ready,
    write_audit_policy,
)
from ktest.controlplane.binaries import plane_assets
from ktest.controlplane.controller_manager import (
    DEFAULT_CONTROLLERS,
    ControllerManager,
    controllers_to_run,
    requested_controllers,
)
from ktest.controlplane.etcd import etcd_healthy, etcd_process
from ktest.controlplane.flags import probe
from ktest.controlplane.pki import PlaneCertificates
from ktest.controlplane.run_directory import (
    create_run_directory,
    default_base_directory,
    disk_hint,
    remove_run_directory,
    says_disk_full,
    writing_in,
)
from ktest.controlplane.upgrade_report import UpgradeReport
from ktest.errors import ControlPlaneError

__all__ = ["ControlPlane", "default_base_directory"]

_PORT_ATTEMPTS = 3
_STOP_TIMEOUT = 10.0


class _PortTaken(Exception):
    """A component could not bind its port: choose new ports and start again."""


class ControlPlane(StartedOnEnter):
    """A private etcd + kube-apiserver (+ kube-controller-manager) for tests.

    ``with ControlPlane() as cp:`` starts it and always stops it; every child process is bound
    to this Python process, so not even ``kill -9`` of it leaves a process or directory behind.

    ``controllers`` selects kube-controller-manager's controllers (default: garbage collector and
    namespace; ``"none"`` or ``()``: no controller-manager). ``apiserver_flags`` (``["--name=value"]``
    or a mapping) replace ktest's value of a flag or are added (one the binary does not know: refused
    before anything starts). ``audit=True`` writes a Metadata-level audit log to :attr:`audit_log`.
    ``etcd_template=True`` starts etcd on a copy of data bootstrapped once per version
    (:mod:`ktest.controlplane.etcd_template`; not with ``apiserver_flags``).
    ``wait_for_controllers=False``: :meth:`start` returns once the API server is ready and
    kube-controller-manager is launched; :meth:`wait_until_controllers_ready` waits for it (the
    pytest plugin does before the first test body), and restarts wait for it only after that.
    ``nodes=3`` adds simulated nodes (:mod:`ktest.nodes`): Pods are scheduled, Running and Ready.
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
        nodes: int = 0,
    ) -> None:
        self.k8s_version = k8s_version
        self._assets_argument = assets
        self._addons = plane_addons(nodes=nodes)
        self._requested_controllers = with_addon_controllers(requested_controllers(controllers), self._addons)
        # The user's own admission configuration replaces ktest's, and with it the client
        # certificate the API server presents to webhooks (see webhook_client_ca).
        self._writes_admission_config = ADMISSION_CONFIG_FLAG not in extra_flag_names(apiserver_flags)
        self._apiserver_flags = apiserver_flags
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
        self._certificates: PlaneCertificates | None = None
        self._client: ApiServerClient | None = None
        self._ports: tuple[int, int, int] = (0, 0, 0)  # etcd client, etcd peer, apiserver
        self._etcd: ManagedProcess | None = None
        self._apiserver: ManagedProcess | None = None
        # kube-controller-manager (None: the plane runs no controllers), behind a start-up gate.
        self._controller_manager: ControllerManager | None = None
        self._controllers_waited_for = False
        self._version = ""
        self._started = False
        self.shared_by: str | None = None  # who else uses it (upgrade() refuses then)

    # -- public state ------------------------------------------------------------
    @property
    def directory(self) -> Path:
        """The private temporary directory. Its layout is relied upon elsewhere: ``admin.kubeconfig``,
        ``users/<name>.kubeconfig``, ``certs/ca.crt`` and ``certs/ca.key`` (ECDSA), ``certs/etcd/``
        (etcd's own CA, no key on disk), ``certs/webhook-client/`` (the API server's client
        certificate for admission webhooks, its CA's key not on disk, and the admission
        configuration naming it), ``kube-controller-manager.kubeconfig`` (on etcd-template data: the
        admin identity, the start-up gate's address), ``<kubeconfig>.credentials/`` (the files each
        kubeconfig names), ``logs/<component>.log``, ``etcd/`` (data), ``audit.log``."""
        if self._directory is None:
            raise ControlPlaneError("the control plane has no directory yet: call start() first.")
        return self._directory

    @property
    def kubeconfig(self) -> Path:
        """The admin kubeconfig (client certificate in group system:masters)."""
        self._require_started()
        return self.kubeconfig_path

    @property
    def kubeconfig_path(self) -> Path:
        """Where the admin kubeconfig is written (available during start)."""
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
        manager = self._controller_manager
        return manager.running if manager is not None else frozenset()

    @property
    def addons(self) -> tuple[str, ...]:
        """What runs beside it, in words (``3 simulated nodes (kube-scheduler + KWOK 0.8.0)``)."""
        return tuple(filter(None, (addon.describe() for addon in self._addons)))

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
            "kube-controller-manager": self._controller_manager.process if self._controller_manager else None,
        }
        for addon in self._addons:
            found.update(addon.processes())
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

    close = stop  # ``with ControlPlane() as cp:`` stops it at the end

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
            manager = self._controller_manager
            if manager is not None and manager.process is not None and not manager.confirmed:
                manager.wait_until_running(self.start_timeout if timeout is None else timeout)
            for addon in self._addons:
                addon.wait_until_ready(self.start_timeout if timeout is None else timeout)

    def restart_controllers(self) -> None:
        """Restart kube-controller-manager alone (a no-op when the plane runs no controllers).

        The garbage collector discovers resource types at start and then only every 30 s: call
        this after installing CRDs, so that it watches their kinds at once. If it does not come
        back, the error says why and etcd and the API server keep serving (others may use them);
        the failed process stays in :meth:`processes`, and calling this again tries again.
        """
        with self._lock:
            self._require_started()
            manager = self._controller_manager
            if manager is None:
                return
            manager.halt()
            manager.process = None
            try:
                self._launch_controller_manager()
                self._release_controllers()
            except BaseException:
                manager.halt()  # still listed, dead, with its log
                raise

    def upgrade(self, to: str, *, assets: Assets | Path | str | None = None) -> UpgradeReport:
        """Upgrade in place to the next minor: see :func:`ktest.plane_upgrade.upgrade.upgrade_plane`."""
        return upgrade(self, to, assets)

    def add_user(self, name: str, groups: Iterable[str] = ()) -> Path:
        """A kubeconfig for a client-certificate identity (CN=name, O=groups)."""
        with self._lock:
            self._require_started()
            if not name or not isinstance(name, str):
                raise ControlPlaneError(f"add_user needs a non-empty user name, got {name!r}.")
            group_tuple = (groups,) if isinstance(groups, str) else tuple(groups)
            certificates = self._certificates
            assert certificates is not None
            return certificates.add_user(name, group_tuple, self.server)

    # -- internals: preparation ---------------------------------------------------
    def _require_started(self) -> None:
        if not self._started:
            raise ControlPlaneError(
                "the control plane is not running: use `with ControlPlane() as cp:` or call cp.start() first."
            )

    def _prepare(self) -> None:
        """Everything that can fail on bad input, before any process starts."""
        assets = self._assets = plane_assets(self._assets_argument, self.k8s_version)
        check_extra_flags(self._apiserver_flags, assets.binary("kube-apiserver"))
        self._controller_manager = None
        controller_names = controllers_to_run(self._requested_controllers, assets)
        for addon in self._addons:
            addon.prepare(assets)
        probe(assets.binary("etcd"))  # cached: decides --unsafe-no-fsync
        self._certificates = None
        self._ports = (0, 0, 0)
        base = self._root_directory or default_base_directory()
        directory, self._janitor = create_run_directory(base, keep_directory=self.keep_directory)
        self._directory = directory
        self._certificates = PlaneCertificates(directory)
        if controller_names:
            self._controller_manager = ControllerManager(
                assets.binary("kube-controller-manager"), controller_names, directory, self._log_note(),
                extra_flags=[flag for addon in self._addons for flag in addon.controller_manager_flags],
            )
        self._template = self._find_template() if self.etcd_template and not self._apiserver_flags else None

    def _find_template(self) -> Path | None:
        """The etcd template for these binaries (:func:`etcd_template.find_or_bootstrap`)."""
        assets, timeout = self._assets, self.start_timeout
        assert assets is not None
        new_plane = functools.partial(
            ControlPlane, assets=assets, controllers="none", root_directory=self._root_directory,
            start_timeout=timeout, etcd_template=False,
        )
        binaries = [assets.binary("etcd"), assets.binary("kube-apiserver")]
        return etcd_template.find_or_bootstrap(binaries, STATIC_FLAGS, new_plane, timeout)

    def _log_note(self) -> str:
        return "" if self.keep_directory else "(removed on failure; keep_directory=True keeps it)"

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

    def _launch(self, process: ManagedProcess) -> None:
        process.log_note = self._log_note()
        process.start()

    def _launch_apiserver(self, assets: Assets) -> None:
        """Start ``assets``' kube-apiserver on this plane's etcd, ports and certificates (start, upgrade)."""
        certificates = self._certificates
        assert certificates is not None
        with writing_in(self.directory):
            audit = write_audit_policy(self.directory) if self.audit else None
        files = certificates.apiserver_files(audit=audit, admission_config=self._writes_admission_config)
        etcd_port, _, api_port = self._ports
        self._apiserver = apiserver_process(
            assets.binary("kube-apiserver"), port=api_port, etcd_port=etcd_port, files=files,
            extra_flags=self._apiserver_flags, log_path=self.log_path("kube-apiserver"),
        )
        self._launch(self._apiserver)

    def _start_once(self, prefer_ports: tuple[int, ...]) -> None:
        assets, certificates = self._assets, self._certificates
        assert assets is not None and certificates is not None
        etcd_port, peer_port, api_port = free_ports(3, prefer=prefer_ports)
        self._ports = (etcd_port, peer_port, api_port)
        data_dir = self.directory / "etcd"
        template = self._template
        self._bootstrap = None
        if template is not None and not data_dir.exists():
            with writing_in(self.directory):
                etcd_template.restore(template, data_dir)
            # Only on the data just restored: there the hooks have nothing to create or change.
            # After a restart a test may have changed a bootstrap role, which the hooks would
            # put back a second later, so restarts wait for them as a plain start does.
            self._bootstrap = etcd_template.bootstrap_objects(template)
        self._etcd = etcd_process(
            assets.binary("etcd"), data_dir=data_dir, client_port=etcd_port, peer_port=peer_port,
            credentials=certificates.etcd(), log_path=self.log_path("etcd"),
        )
        self._launch(self._etcd)
        self._launch_apiserver(assets)  # while etcd starts
        certificates.write_kubeconfigs(f"https://127.0.0.1:{api_port}")
        self._client = certificates.admin_client(api_port)
        if self._controller_manager is not None:
            self._launch_controller_manager()  # its start-up overlaps the API server's
        self._wait_for_apiserver()
        self._version = served_version(self._client, assets.version)
        note = self._log_note()
        for addon in self._addons:  # scheduler, nodes: while the controllers come up
            addon.start(request=self._client.request, plane=self, version=self._version, log_note=note)
        self._release_controllers()

    def _launch_controller_manager(self) -> None:
        """kube-controller-manager behind its start-up gate, with the admin's identity."""
        manager, certificates = self._controller_manager, self._certificates
        assert manager is not None and certificates is not None
        files = certificates.apiserver_files()
        serving = (files.serving_cert, files.serving_key)
        manager.launch(self._ports[2], serving, certificates.write_admin_kubeconfig)

    def _release_controllers(self) -> None:
        """The API server is ready: let kube-controller-manager start its controllers (and wait
        for them unless the plane defers that)."""
        manager = self._controller_manager
        wait = self.wait_for_controllers or self._controllers_waited_for
        if manager is not None:
            manager.release(wait, self.start_timeout)
        for addon in self._addons if wait else ():
            addon.wait_until_ready(self.start_timeout)

    def _wait_for_apiserver(self) -> None:
        etcd, apiserver, client, certificates = self._etcd, self._apiserver, self._client, self._certificates
        assert etcd is not None and apiserver is not None and client is not None and certificates is not None
        wait_until_ready(
            client,
            self._bootstrap,
            timeout=self.start_timeout,
            etcd=etcd,
            apiserver=apiserver,
            on_exit=self._raise_start_failure,
            etcd_healthy=lambda: etcd_healthy(self._ports[0], certificates.etcd()),
        )
        if self._bootstrap is not None and (problem := client.point_kubernetes_service_here()):
            raise apiserver.failure(problem)

    def _raise_start_failure(self, process: ManagedProcess) -> None:
        assert self._assets is not None
        raw = process.log_since_start()
        log = raw.decode("utf-8", "replace")
        if is_address_in_use(log):
            raise _PortTaken(f"{process.name} could not bind its port")
        hint = ""
        if says_disk_full(raw):
            hint = f"The disk is full: {process.name} could not write in {self.directory}. "
            hint += disk_hint(self.directory.parent)
        elif process is self._apiserver:
            hint = rejected_flags_hint(self._apiserver_flags, self._assets.binary("kube-apiserver"), log)
        raise process.failure("exited during start", hint)

    def _stop_front(self) -> None:
        """Stop controllers and API server together; etcd keeps running (an upgrade keeps it)."""
        for addon in self._addons:
            addon.stop(_STOP_TIMEOUT)
        manager = self._controller_manager
        front = [p for p in (manager.stopping() if manager else None, self._apiserver) if p is not None]
        for process in front:
            process.terminate()
        for process in front:
            process.stop(_STOP_TIMEOUT)
        if manager is not None:
            manager.close_gate()
        self._apiserver = None

    def _stop_components(self) -> None:
        """Stop controllers and API server, then etcd (the API server needs it)."""
        self._stop_front()
        if self._etcd is not None:
            self._etcd.stop(_STOP_TIMEOUT)
        self._etcd = None

    def _teardown(self) -> None:
        """Stop everything this control plane started and remove its directory."""
        self._started = False
        try:
            self._stop_components()
        finally:
            janitor_handle, self._janitor = self._janitor, None
            remove_run_directory(self._directory, janitor_handle, keep=self.keep_directory)
