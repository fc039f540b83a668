"""The state of one pytest session of ktest: its settings, its backend (opened on first use),
its run context and the namespace deletions it waits for, kept in pytest's stash."""

from __future__ import annotations

import contextlib
import warnings
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from ktest import backend_registry as registry
from ktest.backend_registry import BackendSpec, LogExport
from ktest.config import Settings
from ktest.errors import ConfigError
from ktest.plugin.artifacts import artifacts_root, prepare
from ktest.run_context import RunContext

if TYPE_CHECKING:
    from ktest.cluster import Cluster
    from ktest.sessions.backend import Backend
    from ktest.sessions.shared import ClusterServer

WORKER_ADDRESS_KEY = "ktest_cluster_address"


class NamespaceCleanupWarning(UserWarning):
    """A test namespace needed help to go away (finalizers removed), or could not be deleted."""


class KeptNamespaceWarning(UserWarning):
    """A test namespace was kept for debugging (``ktest_keep_namespaces``)."""


class KtestSession:
    """Per-pytest-session state: settings, the backend (opened on first use), contexts."""

    def __init__(self, config: pytest.Config, settings: Settings, error: ConfigError | None = None) -> None:
        self.config = config
        self.settings = settings  # the defaults when ``error`` is set
        self.settings_error = error
        self.settings_error_raised = False  # a test's ktest fixture met it: reported with that test
        self._checked = False
        self.backend: Backend | None = None
        self.server: ClusterServer | None = None
        self.notes: list[str] = []
        self.context: RunContext | None = None
        self.description: str | None = None
        self._stack = contextlib.ExitStack()
        self.failed = False  # a test failed: worth exporting the cluster's logs before it goes
        self._warned_notes: set[str] = set()

    def enter(self) -> None:
        """Open the session's run context and wait defaults (pytest_sessionstart); raise the
        process's open-file limit to its hard limit (connections of operators, proxies and other
        users' connections to ktest's listeners must not run it out of descriptors)."""
        from ktest.base.connection_cap import raise_open_file_limit
        from ktest.run_context import run_context
        from ktest.wait.defaults import WaitDefaults, use_defaults

        raise_open_file_limit()
        settings = self.settings
        self.context = self._stack.enter_context(run_context("session"))
        if self.settings_error is None:
            defaults = WaitDefaults(settings.timeout, settings.interval, settings.consistently)
            self._stack.enter_context(use_defaults(defaults))
            from ktest.proxy.defaults import use_operator_proxy, use_operator_proxy_http2

            self._stack.enter_context(use_operator_proxy(settings.operator_proxy))
            self._stack.enter_context(use_operator_proxy_http2(settings.operator_proxy_http2))

    def usable_settings(self) -> Settings:
        """The settings, once checked as far as possible before anything starts (CRD files
        parse and hold CRDs, backend existing's context); raises ConfigError otherwise."""
        if self.settings_error is not None:
            self.settings_error_raised = True
            raise self.settings_error
        if not self._checked:
            from ktest.config import check_before_start

            try:
                check_before_start(self.settings)
            except ConfigError as error:
                self.settings_error = error
                self.settings_error_raised = True
                raise
            self._checked = True
        return self.settings

    def exit(self) -> None:
        self._stack.close()

    @property
    def backend_spec(self) -> BackendSpec:
        """The registration of the session's backend (its parts: fixtures, attach, diagnostics...)."""
        return registry.spec(self.settings.backend)

    def open_backend(self) -> Backend:
        if self.backend is None:
            workerinput = getattr(self.config, "workerinput", None)
            if workerinput and workerinput.get(WORKER_ADDRESS_KEY):
                from ktest.sessions.attached import AttachedBackend
                from ktest.sessions.shared import request_share

                share = request_share(workerinput[WORKER_ADDRESS_KEY])
                attach = self.backend_spec.load("attach") or AttachedBackend
                self.backend = attach(share, name="xdist")
            else:
                from ktest.backends import open_session

                self.backend = open_session(self.settings, self.notes)
            self.description = self.backend.describe()
        return self.backend

    def close_backend(self) -> None:
        backend, self.backend = self.backend, None
        if backend is not None:
            self.export_logs(backend)
            backend.close()

    @property
    def artifacts(self) -> Path:
        """The artifacts directory (``--ktest-artifacts``, else ``.ktest-artifacts`` in the rootdir)."""
        return artifacts_root(self.settings.artifacts_dir, self.config.rootpath)

    def prepare_artifacts(self, directory: Path) -> Path:
        """Create ``directory`` below :attr:`artifacts`, which ignores itself in git."""
        return prepare(self.artifacts, directory)

    def log_export(self, backend: Backend) -> LogExport | None:
        """Where the backend keeps a failed run's cluster logs (its ``diagnostics``), if anywhere."""
        diagnostics = self.backend_spec.load("diagnostics")
        if diagnostics is None:
            return None
        found: LogExport | None = diagnostics(backend, self.artifacts)
        return found

    def export_logs(self, backend: Backend) -> None:
        """After a failed run, keep the owned cluster's logs (it is deleted next)."""
        if not self.failed:
            return
        export = self.log_export(backend)
        if export is None or export.export is None:
            return
        try:
            self.prepare_artifacts(export.directory)
            export.export()
            self.notes.append(f"{export.what} of the failed run ({export.contents}): {export.directory}")
        except Exception as error:
            self.notes.append(f"could not export the {export.what} to {export.directory}: {error}")

    def finish_deletions(self) -> None:
        """Wait for background namespace deletions; warn about forced ones, raise on failures."""
        if self.backend is None:
            return
        failures = []
        for cleanup in self.backend.cluster.drain_namespaces():
            if cleanup.error is not None:
                failures.append(f"namespace of {cleanup.requested_by}: {cleanup.error}")
            elif cleanup.forced:
                warnings.warn(
                    NamespaceCleanupWarning(f"namespace of {cleanup.requested_by}: {cleanup.summary()}"),
                    stacklevel=1,
                )
            elif cleanup.note and self.first_time(cleanup.note.replace(cleanup.name, "<ns>")):
                warnings.warn(NamespaceCleanupWarning(cleanup.note), stacklevel=1)
        if failures:
            from ktest.errors import ClusterError

            raise ClusterError("background deletion of test namespaces failed:\n" + "\n".join(failures))

    def serve_workers(self) -> str:
        """Start (once) the server xdist workers ask for the cluster; return its address."""
        if self.server is None:
            from ktest.backends import open_session
            from ktest.sessions.shared import ClusterServer

            self.server = ClusterServer(lambda: open_session(self.settings, self.notes))
        return self.server.address

    def close(self) -> None:
        try:
            self.close_backend()
        finally:
            server, self.server = self.server, None
            if server is not None:
                if server.backend is not None:
                    self.export_logs(server.backend)
                server.close()

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        """Remember failures (xdist workers' reports reach the controller's hook too)."""
        if report.failed:
            self.failed = True

    def first_time(self, note: str) -> bool:
        """True the first time ``note`` is seen (a note that would repeat for every test)."""
        if note in self._warned_notes:
            return False
        self._warned_notes.add(note)
        return True

    def describe_cluster(self) -> str | None:
        if self.server is not None and self.server.backend is not None:
            return self.server.backend.describe()
        return self.description


SESSION_KEY = pytest.StashKey[KtestSession]()
REPORTS_KEY = pytest.StashKey[dict[str, pytest.TestReport]]()
CONTEXT_KEY = pytest.StashKey[RunContext]()
NAMESPACE_KEY: pytest.StashKey[tuple[Cluster, str]] = pytest.StashKey()


def ktest_session(config: pytest.Config) -> KtestSession:
    return config.stash[SESSION_KEY]
