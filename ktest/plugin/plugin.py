"""The pytest plugin (entry point ``pytest11: ktest``): settings, fixtures (every one listed in
:mod:`ktest.plugin.fixtures`), report hooks.

A thin layer: settings come from :mod:`ktest.config`, clusters from
:mod:`ktest.backends`, namespaces from :mod:`ktest.cluster.namespaces`, report
text from :mod:`ktest.plugin.diagnostics`. Nothing starts until a test asks
for ``cluster`` (or a fixture built on it), so the plugin costs nothing in
test runs that do not use it.

pytest-xdist: the controller process holds the one control plane and starts
it when the first worker asks (see :mod:`ktest.sessions.shared`); workers
attach to it and isolate tests with per-test namespaces.

What differs between backends (their fixtures, attaching, health checks, logs of a
failed run) is asked of the session's backend in :mod:`ktest.backend_registry`.
"""

from __future__ import annotations

import functools
from collections.abc import Generator
from typing import TYPE_CHECKING, Any

import pytest

from ktest import backend_registry as registry
from ktest.config import Settings, all_settings, resolve_settings
from ktest.errors import ConfigError
from ktest.plugin.session import (
    CONTEXT_KEY,
    NAMESPACE_KEY,
    REPORTS_KEY,
    SESSION_KEY,
    WORKER_ADDRESS_KEY,
    KtestSession,
    ktest_session,
)

if TYPE_CHECKING:
    pass

# -------------------------------------------------------------------- options and settings


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("ktest", "ktest: Kubernetes control plane for operator tests")
    for spec in all_settings():
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

    options = {spec.name: config.getoption(f"ktest_{spec.name}") for spec in all_settings()}
    ini = {}
    for spec in all_settings():
        try:
            ini[spec.name] = config.getini(spec.ini)
        except (pytest.UsageError, ValueError) as error:  # pytest refused the text (type="bool")
            raise ConfigError(
                f"ini key {spec.ini}: {error}; allowed values: true or false (also 1/0, yes/no, on/off)"
            ) from None
    ini_dir = config.inipath.parent if config.inipath else config.rootpath
    # pytest-kind's options (taken or refused on backend kind); the arguments show the ones spelled out
    arguments = [
        *config.invocation_params.args,
        *config.getini("addopts"),
        *shlex.split(os.environ.get("PYTEST_ADDOPTS", "")),
    ]
    foreign = given_foreign_options(lambda dest: config.getoption(dest, None), arguments)
    return resolve_settings(
        options=options, ini=ini, cwd=config.invocation_params.dir, ini_dir=ini_dir, foreign=foreign
    )


MARKERS = (
    "ktest_nodes: the test needs real nodes (containers that run: exec, logs, images, port-forward): "
    "skipped with the reason on backend bare (simulated nodes run no container) and on an existing "
    "cluster without nodes; `-m ktest_nodes` runs only these",
    'ktest_min_k8s(version): the test needs Kubernetes VERSION (major.minor, e.g. "1.36") or newer: '
    "skipped with the reason on an older cluster",
)


_PROGRESS_BEFORE_KEY = pytest.StashKey[Any]()  # where progress went before (a TextStream or None)


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
    config.stash[SESSION_KEY] = KtestSession(config, settings, error)
    config.pluginmanager.register(config.stash[SESSION_KEY], "ktest-session")
    from ktest.plugin import fixtures

    config.pluginmanager.register(fixtures, "ktest-fixtures")
    chosen = registry.spec(settings.backend)
    for backend, register_fixtures in registry.parts("fixtures"):  # every backend's, so they skip elsewhere
        register_fixtures(config, selected=backend is chosen)
    from ktest import addon_registry
    from ktest.plugin import markers, xdist_groups

    config.pluginmanager.register(markers, "ktest-markers")
    config.pluginmanager.register(xdist_groups, "ktest-xdist-groups")
    addon_registry.register_pytest_plugins(config)  # webhooks, upgrades, nodes, RBAC audit, timeline
    from ktest.assets.progress import show_on
    from ktest.plugin.terminal_progress import TerminalProgress

    config.stash[_PROGRESS_BEFORE_KEY] = show_on(TerminalProgress(config))


def pytest_unconfigure(config: pytest.Config) -> None:
    from ktest.assets.progress import show_on

    show_on(config.stash.get(_PROGRESS_BEFORE_KEY, None))  # an inner session's ends, the outer's stays
    session = config.stash.get(SESSION_KEY, None)
    if session is not None:
        session.close()


def pytest_report_header(config: pytest.Config) -> list[str]:
    session = ktest_session(config)
    if session.settings_error is not None:
        return [f"ktest: bad settings (ignored unless a test uses a ktest fixture): {session.settings_error}"]
    from ktest.base.environment_proxies import loopback_proxy_note

    proxy_note = loopback_proxy_note()
    return [
        f"ktest: {session.settings.describe()}",
        f"ktest settings from: {session.settings.describe_sources()}",
        *([f"ktest: {proxy_note}"] if proxy_note else []),
    ]


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    """xdist controller: tell each worker where to ask for the shared cluster."""
    node.workerinput[WORKER_ADDRESS_KEY] = ktest_session(node.config).serve_workers()


def pytest_sessionstart(session: pytest.Session) -> None:
    from ktest.base.interrupts import witness_interrupts

    ktest_session(session.config).enter()
    from ktest.plugin.operator_logs import leave_operator_records_to_ktest

    leave_operator_records_to_ktest(session.config)
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
    state = session.config.stash.get(SESSION_KEY, None)
    if state is not None:
        state.exit()


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    session = config.stash.get(SESSION_KEY, None)
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
    from ktest.run_context import run_context

    with run_context(item.nodeid, test=True) as context:
        item.stash[CONTEXT_KEY] = context
        return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_fixture_setup(fixturedef: Any, request: pytest.FixtureRequest) -> Generator[None, Any, Any]:
    """Fixtures wider than a test register health checks and sections for the whole session."""
    session = request.config.stash.get(SESSION_KEY, None)
    if fixturedef.scope == "function" or session is None or session.context is None:
        return (yield)
    from ktest.run_context import use_context

    with use_context(session.context):
        return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, Any, Any]:
    """Before the test body, every part of the cluster runs (the backend's ``until_ready``); after
    it, an operator that crashed meanwhile fails the test with its own error."""
    from ktest.run_context import check_health

    session = item.config.stash.get(SESSION_KEY, None)
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
    item.stash.setdefault(REPORTS_KEY, {})[report.when] = report
    if report.failed:
        for title, text in _failure_sections(item, report.when):
            report.sections.append((f"ktest: {title}", text))
    return report


def _failure_sections(item: pytest.Item, when: str) -> list[tuple[str, str]]:
    sections: list[tuple[str, str]] = []
    context = item.stash.get(CONTEXT_KEY, None)
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
                sections.append((title, _fold_go_traces(item, title, text)))
    used = item.stash.get(NAMESPACE_KEY, None)
    if used is not None and when in ("setup", "call"):
        from ktest.plugin.diagnostics import describe_namespace

        cluster, name = used
        sections.append((f"namespace {name}", describe_namespace(cluster, name)))
    session = item.config.stash.get(SESSION_KEY, None)
    if session is not None and session.backend is not None:
        backend = session.backend
        for component, tail in backend.dead_components():
            sections.append((f"{component} died; last lines of its log", tail or "(empty log)"))
        export = session.log_export(backend)
        if export is not None:
            promise = f"exported at the end of the session ({export.how}) to {export.directory}"
            sections.append((export.what, promise))
    return sections


def _fold_go_traces(item: pytest.Item, title: str, text: str) -> str:
    """A section with Go goroutine dumps keeps each dump's first goroutine; the whole text goes to
    ``<artifacts>/operator-logs/<test>/<section>.log``, named in the section."""
    from ktest.base.procfs import write_private_file
    from ktest.operators.go_traces import fold_goroutines
    from ktest.plugin.artifacts import safe_name

    session = item.config.stash.get(SESSION_KEY, None)
    if session is None:
        return text
    path = session.artifacts / "operator-logs" / safe_name(item.nodeid) / f"{safe_name(title)}.log"
    folded = fold_goroutines(text, lambda count: f"... {count} more goroutines folded; the whole log: {path}")
    if not folded.goroutines:
        return text
    try:
        session.prepare_artifacts(session.artifacts)
        write_private_file(path, text)  # an operator's log is private (0600), as ktest keeps it
    except OSError as error:
        return f"{text}\n(the goroutines were not folded: {path} could not be written: {error})"
    return folded.text
