"""Backend ``bare``: an embedded control plane owned by this process."""

from __future__ import annotations

from ktest.base.procfs import process_start_time
from ktest.cluster import Cluster
from ktest.config import Settings, apiserver_arguments, check_apiserver_flags
from ktest.controller_names import runs_controller
from ktest.controlplane import ControlPlane
from ktest.sessions.backend import Backend, ClusterShare, Component


class BareBackend(Backend):
    """Starts a :class:`ControlPlane` and stops it on :meth:`close`."""

    name = "bare"

    def __init__(self, plane: ControlPlane) -> None:
        self._plane = plane
        # Every test of the session (and its xdist workers, a `ktest up` plane's sessions) uses it.
        plane.shared_by = plane.shared_by or "the test session's cluster (every test and xdist worker)"
        super().__init__(
            Cluster(
                plane.kubeconfig,
                user_issuer=plane.add_user,
                controllers=frozenset(plane.controllers),
                name="ktest",
                webhook_host="127.0.0.1",  # the API server runs on this machine
                webhook_client_ca=plane.webhook_client_ca,
                # The GC notices new kinds only on its 30 s discovery resync; a restart takes ~0.4 s.
                on_crds_installed=(
                    (lambda names: plane.restart_controllers())
                    if runs_controller(plane.controllers, "garbagecollector")
                    else None
                ),
            )
        )

    @classmethod
    def start(cls, settings: Settings) -> BareBackend:
        """Start a control plane as ``settings`` say (version, controllers, extra API server flags)."""
        assets = None
        if settings.apiserver_flags or settings.feature_gates:
            from ktest.assets import resolve_assets

            assets = resolve_assets(settings.k8s_version)
            check_apiserver_flags(settings, assets.binary("kube-apiserver"), assets.version)
        plane = ControlPlane(
            settings.k8s_version,
            assets=assets,
            controllers=settings.controllers or "none",
            root_directory=settings.run_dir,
            apiserver_flags=apiserver_arguments(settings),
            # The session's fixtures (CRDs, operators) run while the controllers come up;
            # until_ready, before each test body, waits for them.
            wait_for_controllers=False,
            nodes=getattr(settings, "nodes", None) or 0,
        )
        plane.start()
        try:
            return cls(plane)
        except BaseException:
            plane.stop()
            raise

    @property
    def control_plane(self) -> ControlPlane:
        return self._plane

    def describe(self) -> str:
        controllers = ",".join(sorted(self._plane.controllers)) or "none"
        plane = self._plane
        beside = "".join(f"; {addon}" for addon in plane.addons)
        where = f"embedded control plane {plane.version} at {plane.server}"
        return f"{where} (controllers: {controllers}{beside})"

    def share(self) -> ClusterShare:
        return share_of(self._plane, self.describe())

    def dead_components(self) -> list[tuple[str, str]]:
        return [
            (name, process.log_tail())
            for name, process in self._plane.processes().items()
            if not process.running
        ]

    def until_ready(self) -> None:
        self._plane.wait_until_controllers_ready()

    def close(self) -> None:
        try:
            super().close()
        finally:
            self._plane.stop()


def share_of(plane: ControlPlane, description: str) -> ClusterShare:
    """How other processes attach to ``plane`` (admin kubeconfig, CA directory, component pids)."""
    components = {}
    for name, process in plane.processes().items():
        pid = process.pid
        start_time = process_start_time(pid) if pid else None
        if pid and start_time:
            components[name] = Component(pid, start_time, str(plane.log_path(name)))
    return ClusterShare(
        kubeconfig=str(plane.kubeconfig),
        version=plane.version,
        description=description,
        controllers=tuple(sorted(plane.controllers)),
        directory=str(plane.directory),
        components=components,
    )


def _open_bare(settings: Settings, notes: list[str]) -> Backend:
    """The bare backend: a warm ``ktest up`` control plane when reuse is on and one matches,
    else a control plane of the session's own."""
    if settings.reuse:
        from ktest.backends.bare import reuse

        record, removed = reuse.find_compatible(settings)
        notes.extend(removed)
        if record is not None:
            return reuse.attach(record)
        notes.append(
            "reuse: no running control plane matches "
            f"(Kubernetes {settings.k8s_version or 'latest'}, controllers "
            f"{','.join(settings.controllers) or 'none'}); started one for this session. "
            "`ktest up` keeps one warm between runs"
        )
    return BareBackend.start(settings)
