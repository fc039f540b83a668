# Over 500 lines: every pytest hook and session fixture of the plugin, each a thin call into the library.
"""The pytest plugin (entry point ``pytest11: ktest``): settings, fixtures, report hooks.

A thin layer: settings come from :mod:`ktest.config`, clusters from
:mod:`ktest.backends`, namespaces from :mod:`ktest.cluster.namespaces`, report
text from :mod:`ktest.plugin.diagnostics`. Nothing starts until a test asks
for ``cluster`` (or a fixture built on it), so the plugin costs nothing in
test runs that do not use it.

pytest-xdist: the controller process owns the one control plane and starts
it when the first worker asks (see :mod:`ktest.sessions.shared`); workers
attach to it and isolate tests with per-test namespaces.

What differs between backends (their fixtures, attaching, health checks, logs of a
failed run) is asked of the session's backend in :mod:`ktest.backend_registry`.
"""

from __future__ import annotations

import contextlib
import functools
import warnings
from collections.abc import Generator, Iterator
from typing import TYPE_CHECKING, Any

import pytest

from ktest import backend_registry as registry
from ktest.backend_registry import BackendSpec, LogExport
from ktest.config import SETTINGS, Settings, resolve_settings
from ktest.context import RunContext
from ktest.errors import ConfigError

if TYPE_CHECKING:
    from ktest.cluster import Cluster
    from ktest.controlplane import ControlPlane
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
        """Open the session's run context and wait defaults (pytest_sessionstart)."""
        from ktest.context import run_context
        from ktest.wait.defaults import WaitDefaults, use_defaults

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

    def log_export(self, backend: Backend) -> LogExport | None:
        """Where the backend keeps a failed run's cluster logs (its ``diagnostics``), if anywhere."""
        diagnostics = self.backend_spec.load("diagnostics")
        if diagnostics is None:
            return None
        artifacts = self.settings.artifacts_dir or self.config.rootpath / ".ktest-artifacts"
        found: LogExport | None = diagnostics(backend, artifacts)
        return found

    def export_logs(self, backend: Backend) -> None:
        """After a failed run, keep the owned cluster's logs (it is deleted next)."""
        if not self.failed:
            return
        export = self.log_export(backend)
        if export is None or export.export is None:
            return
        try:
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
                failures.append(f"namespace of {cleanup.owner}: {cleanup.error}")
            elif cleanup.forced:
                warnings.warn(
                    NamespaceCleanupWarning(f"namespace of {cleanup.owner}: {cleanup.summary()}"),
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


_SESSION = pytest.StashKey[KtestSession]()
_REPORTS = pytest.StashKey[dict[str, pytest.TestReport]]()
_CONTEXT = pytest.StashKey[RunContext]()
_NAMESPACE: pytest.StashKey[tuple[Cluster, str]] = pytest.StashKey()


def _session(config: pytest.Config) -> KtestSession:
    return config.stash[_SESSION]


# -------------------------------------------------------------------- options and settings


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("ktest", "ktest: Kubernetes control plane for operator tests")
    for spec in SETTINGS:
        help_text = f"{spec.help} (env {spec.env}, ini {spec.ini}; default {spec.default_text})"
        dest = f"ktest_{spec.name}"
        if spec.flag:
            group.addoption(
                spec.option, action="store_const", const=True, default=None, dest=dest, help=help_text
            )
            group.addoption(
                spec.option.replace("--ktest-", "--ktest-no-"),
                action="store_const",
                const=False,
                dest=dest,
                help=f"turn {spec.option} off",
            )
        elif spec.multiple:
            group.addoption(
                spec.option,
                action="append",
                default=None,
                dest=dest,
                metavar=spec.metavar,
                help=help_text + "; may be repeated",
            )
        else:
            group.addoption(spec.option, default=None, dest=dest, metavar=spec.metavar, help=help_text)
        # default=None: an ini key that is not set reads as None, never as False or "".
        parser.addini(spec.ini, help=help_text, type=spec.ini_type, default=None)  # type: ignore[arg-type]


def settings_from_config(config: pytest.Config) -> Settings:
    """Resolve the settings of a pytest run (option > environment > ini > default)."""
    import os
    import shlex

    from ktest.config import given_foreign_options

    options = {spec.name: config.getoption(f"ktest_{spec.name}") for spec in SETTINGS}
    ini = {}
    for spec in SETTINGS:
        try:
            ini[spec.name] = config.getini(spec.ini)
        except (pytest.UsageError, ValueError) as error:  # pytest refused the text (type="bool")
            raise ConfigError(
                f"ini key {spec.ini}: {error}; allowed values: true or false (also 1/0, yes/no, on/off)"
            ) from None
    ini_dir = config.inipath.parent if config.inipath else config.rootpath
    # pytest-kind's options (taken or refused on backend kind); the arguments show the ones spelled out
    arguments = [*config.invocation_params.args, *config.getini("addopts"),
                 *shlex.split(os.environ.get("PYTEST_ADDOPTS", ""))]
    foreign = given_foreign_options(lambda dest: config.getoption(dest, None), arguments)
    return resolve_settings(
        options=options, ini=ini, cwd=config.invocation_params.dir, ini_dir=ini_dir, foreign=foreign
    )


MARKERS = (
    "ktest_nodes: the test needs real nodes (Pods that run, images, port-forward): skipped with the reason "
    "on backend bare and on an existing cluster without nodes; `-m ktest_nodes` runs only these",
    'ktest_min_k8s(version): the test needs Kubernetes VERSION (major.minor, e.g. "1.36") or newer: '
    "skipped with the reason on an older cluster",
)


def pytest_configure(config: pytest.Config) -> None:
    """Resolve the settings; bad ones are reported in the header and the summary, and are an
    error in the first test that uses a ktest fixture, so a stray KTEST_* variable cannot break
    runs that do not use ktest.  (Not a Python warning: ``filterwarnings = error`` would turn it
    into exactly the start-up failure this avoids.)"""
    error: ConfigError | None = None
    try:
        settings = settings_from_config(config)
    except ConfigError as caught:
        settings, error = Settings(), caught
    for marker in MARKERS:
        config.addinivalue_line("markers", marker)
    config.stash[_SESSION] = KtestSession(config, settings, error)
    config.pluginmanager.register(config.stash[_SESSION], "ktest-session")
    chosen = registry.spec(settings.backend)
    for backend, register_fixtures in registry.parts("fixtures"):  # every backend's, so they skip elsewhere
        register_fixtures(config, selected=backend is chosen)
    from ktest.plugin import webhook_fixtures, xdist_groups

    config.pluginmanager.register(webhook_fixtures, "ktest-webhook-fixtures")
    config.pluginmanager.register(xdist_groups, "ktest-xdist-groups")


def pytest_unconfigure(config: pytest.Config) -> None:
    session = config.stash.get(_SESSION, None)
    if session is not None:
        session.close()


def pytest_report_header(config: pytest.Config) -> list[str]:
    session = _session(config)
    if session.settings_error is not None:
        return [f"ktest: bad settings (ignored unless a test uses a ktest fixture): {session.settings_error}"]
    from ktest.base.proxies import loopback_proxy_note

    proxy_note = loopback_proxy_note()
    return [
        f"ktest: {session.settings.describe()}",
        f"ktest settings from: {session.settings.describe_sources()}",
        *([f"ktest: {proxy_note}"] if proxy_note else []),
    ]


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    """xdist controller: tell each worker where to ask for the shared cluster."""
    node.workerinput[WORKER_ADDRESS_KEY] = _session(node.config).serve_workers()


def pytest_sessionstart(session: pytest.Session) -> None:
    from ktest.base.interrupts import witness_interrupts

    _session(session.config).enter()
    # A Ctrl-C whose KeyboardInterrupt Python drops (raised in a finalizer, which the garbage
    # collection at the session's end runs) still ends the run as interrupted, not passed.
    session.config.add_cleanup(witness_interrupts(functools.partial(_interrupted, session)))


_INTERRUPTED = pytest.StashKey[bool]()


def _interrupted(session: pytest.Session) -> None:
    session.config.stash[_INTERRUPTED] = True
    session.exitstatus = pytest.ExitCode.INTERRUPTED  # pytest_sessionfinish sets it again if reset


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session: pytest.Session) -> None:
    if session.config.stash.get(_INTERRUPTED, False):  # the run loop set its own status since
        session.exitstatus = pytest.ExitCode.INTERRUPTED
    ktest_session = session.config.stash.get(_SESSION, None)
    if ktest_session is not None:
        ktest_session.exit()


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    session = config.stash.get(_SESSION, None)
    if session is None or hasattr(config, "workerinput"):
        return
    described = session.describe_cluster()
    unreported_error = session.settings_error is not None and not session.settings_error_raised
    if described is None and not session.notes and not unreported_error:
        return
    terminalreporter.write_sep("-", "ktest")
    if unreported_error:
        terminalreporter.write_line(
            f"bad settings (ignored unless a test uses a ktest fixture): {session.settings_error}"
        )
    if described:
        terminalreporter.write_line(f"cluster: {described}")
    for note in session.notes:
        terminalreporter.write_line(f"note: {note}")


# -------------------------------------------------------------------- contexts, health, reports


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Generator[None, Any, Any]:
    """Each test runs (setup, call, teardown) in its own run context."""
    from ktest.context import run_context

    with run_context(item.nodeid, test=True) as context:
        item.stash[_CONTEXT] = context
        return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_fixture_setup(fixturedef: Any, request: pytest.FixtureRequest) -> Generator[None, Any, Any]:
    """Fixtures wider than a test register health checks and sections for the whole session."""
    session = request.config.stash.get(_SESSION, None)
    if fixturedef.scope == "function" or session is None or session.context is None:
        return (yield)
    from ktest.context import use_context

    with use_context(session.context):
        return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, Any, Any]:
    """Before the test body, every part of the cluster runs (the backend's ``until_ready``); after
    it, an operator that crashed meanwhile fails the test with its own error."""
    from ktest.context import check_health

    session = item.config.stash.get(_SESSION, None)
    if session is not None and session.backend is not None:
        session.backend.until_ready()  # e.g. the controllers, started while session fixtures ran
    try:
        result = yield
    except Exception:  # not skip/fail/exit outcomes: those are BaseExceptions
        check_health()  # raised here, the operator's error is chained to the test's
        raise
    check_health()
    return result


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[Any]) -> Generator[None, Any, Any]:
    report: pytest.TestReport = yield
    item.stash.setdefault(_REPORTS, {})[report.when] = report
    if report.failed:
        for title, text in _failure_sections(item, report.when):
            report.sections.append((f"ktest: {title}", text))
    return report


def _failure_sections(item: pytest.Item, when: str) -> list[tuple[str, str]]:
    sections: list[tuple[str, str]] = []
    context = item.stash.get(_CONTEXT, None)
    seen: set[int] = set()
    for scope in context.chain() if context is not None else ():
        for title, provider in scope.sections:
            if id(provider) in seen:
                continue
            seen.add(id(provider))
            try:
                text = provider()
            except Exception as error:
                text = f"(this section could not be produced: {type(error).__name__}: {error})"
            if text.strip():  # an operator that wrote nothing during the test gets no empty section
                sections.append((title, text))
    used = item.stash.get(_NAMESPACE, None)
    if used is not None and when in ("setup", "call"):
        from ktest.plugin.diagnostics import describe_namespace

        cluster, name = used
        sections.append((f"namespace {name}", describe_namespace(cluster, name)))
    session = item.config.stash.get(_SESSION, None)
    backend = session.backend if session is not None else None
    if backend is not None:
        for component, tail in backend.dead_components():
            sections.append((f"{component} died; last lines of its log", tail or "(empty log)"))
        export = session.log_export(backend) if session is not None else None
        if export is not None:
            promise = f"exported at the end of the session ({export.how}) to {export.directory}"
            sections.append((export.what, promise))
    return sections


# -------------------------------------------------------------------- fixtures


_NO_NODES = (
    "ktest_nodes: this test needs real nodes, and backend {backend} runs a control plane "
    "without nodes; run it with {with_nodes}"
)


def _with_nodes() -> str:
    """How to choose a backend with nodes: ``--ktest-backend kind (or KTEST_BACKEND=kind)``."""
    return " or ".join(f"--ktest-backend {name} (or KTEST_BACKEND={name})" for name in registry.node_names())


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    """A ``ktest_nodes`` test on backend bare is skipped before any fixture (``kind`` included) starts;
    so is a ``ktest_min_k8s`` test whose version the settings already rule out (backend bare)."""
    session = item.config.stash.get(_SESSION, None)
    if session is None or session.settings_error is not None:
        return
    if item.get_closest_marker("ktest_nodes") is not None and _nodes(session.settings) == "never":
        pytest.skip(_NO_NODES.format(backend=session.settings.backend, with_nodes=_with_nodes()))
    minimum = item.get_closest_marker("ktest_min_k8s")
    if minimum is not None:
        version = _planned_version(session)
        if version is not None:
            _require_version(_minimum_version(minimum), version)


def _nodes(settings: Settings) -> str:
    return registry.spec(settings.backend).nodes


@pytest.fixture(autouse=True)
def _ktest_markers(request: pytest.FixtureRequest) -> None:
    """``ktest_nodes`` and ``ktest_min_k8s``: skip, with the reason, where the cluster cannot run the test.

    Costs nothing for unmarked tests; a ``ktest_nodes`` test on backend bare was
    already skipped by :func:`pytest_runtest_setup` without starting anything, and so was
    a ``ktest_min_k8s`` test on backend bare: the version setting decides there, without
    a control plane (other backends ask the cluster)."""
    node = request.node
    needs_nodes = node.get_closest_marker("ktest_nodes") is not None
    minimum = node.get_closest_marker("ktest_min_k8s")
    if not needs_nodes and minimum is None:
        return
    wanted = _minimum_version(minimum) if minimum is not None else None
    settings: Settings = request.getfixturevalue("ktest_settings")
    if needs_nodes and _nodes(settings) == "ask":
        backend: Backend = request.getfixturevalue("ktest_backend")
        if not backend.cluster.list("v1", "Node"):
            pytest.skip(
                f"ktest_nodes: this test needs real nodes, and the existing cluster ({backend.describe()}) "
                f"has none; run it against a cluster with nodes or with {_with_nodes()}"
            )
    if wanted is not None:
        version = _planned_version(_session(request.config))
        if version is None:  # only the cluster can say
            version = request.getfixturevalue("ktest_backend").cluster.version
        _require_version(wanted, version)


def _require_version(wanted: tuple[int, ...], version: str) -> None:
    """Skip the test, saying why, when ``version`` is older than ``wanted`` (major, minor)."""
    if _version_tuple(version) < wanted:
        pytest.skip(
            f"ktest_min_k8s: this test needs Kubernetes {'.'.join(map(str, wanted))} or newer, "
            f"and the cluster runs {version}"
        )


_PLANNED_VERSION = pytest.StashKey[str]()


def _planned_version(session: KtestSession) -> str | None:
    """The Kubernetes version of the session's cluster, known without starting one where the
    settings decide it (a control plane ktest starts runs the k8s_version selector's minor, or
    the binaries ``latest`` resolves to); None when only the cluster can tell."""
    if session.backend is not None:
        return session.backend.cluster.version
    settings = session.settings
    if not registry.spec(settings.backend).starts_control_plane or settings.reuse:
        return None
    selector = settings.k8s_selector
    if not selector.is_latest:
        return f"{selector.major}.{selector.minor}"
    if _PLANNED_VERSION not in session.config.stash:
        from ktest.assets import resolve_assets

        session.config.stash[_PLANNED_VERSION] = resolve_assets(settings.k8s_version).version
    return session.config.stash[_PLANNED_VERSION]


def _version_tuple(text: str) -> tuple[int, ...]:
    from ktest.assets.selectors import KubeVersion

    version = KubeVersion.parse(text)
    return (version.major, version.minor)


def _minimum_version(marker: pytest.Mark) -> tuple[int, ...]:
    """The version of ``@pytest.mark.ktest_min_k8s("1.36")``; a wrong use fails the test saying how to fix."""
    from ktest.assets.selectors import KubeVersion
    from ktest.errors import AssetsError

    args = list(marker.args) or [marker.kwargs.get("version")]
    try:
        if len(args) != 1 or args[0] is None:
            raise AssetsError("one version")
        version = KubeVersion.parse(str(args[0]))
    except AssetsError:
        pytest.fail(
            f"@pytest.mark.ktest_min_k8s{marker.args!r}: give one Kubernetes version as major.minor, "
            'for example @pytest.mark.ktest_min_k8s("1.36")',
            pytrace=False,
        )
    return (version.major, version.minor)


@pytest.fixture(scope="session")
def ktest_settings(request: pytest.FixtureRequest) -> Settings:
    """The resolved ktest settings of this run, checked before anything starts.

    Every ktest fixture depends on this one: with bad settings, the first test that
    uses ktest fails with the error (naming the option, ini key or variable, or the
    file and line) and the session stops after it.
    """
    try:
        return _session(request.config).usable_settings()
    except ConfigError as error:
        problem = f"ktest: {error}"
    request.session.shouldstop = "ktest: bad settings (the first ktest test says which)"
    pytest.fail(problem, pytrace=False)


@pytest.fixture(scope="session")
def ktest_backend(pytestconfig: pytest.Config, ktest_settings: Settings) -> Iterator[Backend]:
    """Where the session's cluster comes from (opened on first use, closed at the end)."""
    session = _session(pytestconfig)
    backend = session.open_backend()
    health = session.backend_spec.load("health")
    if health is not None:
        health(backend)
    try:
        yield backend
    finally:
        try:
            session.finish_deletions()
        finally:
            session.close_backend()


@pytest.fixture(scope="session")
def cluster(ktest_backend: Backend) -> Cluster:
    """The session's :class:`ktest.Cluster` (admin credentials), with ``ktest_crds`` installed."""
    return ktest_backend.cluster


@pytest.fixture(scope="session")
def control_plane(ktest_backend: Backend) -> ControlPlane:
    """The embedded :class:`ktest.ControlPlane` (backend bare, in the process running the tests)."""
    plane = ktest_backend.control_plane
    if plane is None:
        pytest.skip(
            "the control_plane fixture needs the embedded control plane in this process "
            f"(backend bare, without pytest-xdist or reuse); this session uses {ktest_backend.describe()}"
        )
    return plane


@pytest.fixture(scope="session")
def ktest_worker(pytestconfig: pytest.Config) -> str:
    """This process's pytest-xdist worker id (``gw0``, ``gw1``...), or ``main`` without xdist."""
    workerinput = getattr(pytestconfig, "workerinput", None)
    return str(workerinput["workerid"]) if workerinput else "main"


@pytest.fixture(scope="session")
def worker_namespace_selector(ktest_worker: str) -> str:
    """The label selector of the test namespaces this worker creates (``ktest.dev/worker=gw0``).

    With ``-n N`` every worker runs its own copy of a session-scoped operator against the
    one shared cluster; an operator watching every namespace would then reconcile other
    workers' objects too, two copies writing the same object. Give it this selector."""
    from ktest.cluster.namespaces import WORKER_LABEL

    return f"{WORKER_LABEL}={ktest_worker}"


@pytest.fixture
def namespace(
    cluster: Cluster, request: pytest.FixtureRequest, ktest_settings: Settings, ktest_worker: str
) -> Iterator[str]:
    """A fresh namespace named after the test, labelled with its xdist worker, deleted afterwards:
    the deletion is waited for in the background while later tests run
    (``ktest_namespace_deletion = wait``: in the teardown)."""
    from ktest.cluster.namespaces import WORKER_LABEL, delete_namespace, release_namespace, unique_name

    name = unique_name(request.node.nodeid)
    cluster.create_namespace(name, labels={WORKER_LABEL: ktest_worker})
    request.node.stash[_NAMESPACE] = (cluster, name)
    yield name
    if _keep_namespace(request.node, ktest_settings.keep_namespaces):
        release_namespace(cluster, name)  # kept on purpose: no later sweep deletes it
        warnings.warn(
            KeptNamespaceWarning(
                f"kept namespace {name} (ktest_keep_namespaces={ktest_settings.keep_namespaces}); "
                f"cluster: {cluster.server}, kubeconfig {cluster.kubeconfig}"
            ),
            stacklevel=1,
        )
        return
    if ktest_settings.namespace_deletion == "background":
        # Deleted now; waited for on a background thread while the next tests run (see
        # Cluster.namespace_reaper: operators drain it before they stop).
        reaper = cluster.namespace_reaper()
        reaper.timeout = ktest_settings.namespace_timeout
        reaper.force_finalizers_after = ktest_settings.finalizer_grace
        reaper.submit(name, owner=request.node.nodeid)
        return
    delete = functools.partial(
        delete_namespace,
        cluster,
        name,
        timeout=ktest_settings.namespace_timeout,
        force_finalizers_after=ktest_settings.finalizer_grace,
    )
    cleanup = delete()
    if cleanup.forced:
        warnings.warn(NamespaceCleanupWarning(cleanup.summary()), stacklevel=1)
        request.node.add_report_section("teardown", "ktest namespace cleanup", cleanup.summary())
    elif cleanup.note and _session(request.config).first_time(cleanup.note.replace(name, "<ns>")):
        warnings.warn(NamespaceCleanupWarning(cleanup.note), stacklevel=1)


def _keep_namespace(item: pytest.Item, policy: str) -> bool:
    if policy == "always":
        return True
    if policy == "on-failure":
        reports = item.stash.get(_REPORTS, {})
        return any(report.failed for report in reports.values())
    return False
