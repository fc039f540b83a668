"""Run a kopf operator in-process: its own thread, event loop, registry and credentials.

Nothing process-wide is changed while it runs: the handlers live in a fresh
``kopf.OperatorRegistry`` (see ``kopf_loading``), the credentials come from a
login handler ktest adds to that registry (the operator's own
``@kopf.on.login`` handlers, which would read production credentials, are
left out), and settings are a fresh ``kopf.OperatorSettings`` per run.

Ready means: kopf's startup handlers finished (its ``ready_flag``), it has
resolved every resource its handlers name (a missing CRD keeps it not ready,
and the wait says so), and a watch stream runs for every resource in every
namespace it serves. kopf lists before it watches, so nothing created after
that point is missed.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ktest.base.delegation import Delegated
from ktest.operators import client_defaults
from ktest.operators.handle import launch
from ktest.operators.kopf_loading import Source, describe_sources, is_path, load_registry
from ktest.operators.run_threads import RunThreads
from ktest.operators.thread_runner import ThreadOperator, ThreadRun
from ktest.operators.threads import call_in_loop, close_loop

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from ktest.cluster import Cluster
    from ktest.operators.handle import InProcessOptions

_LOGIN_ID = "ktest-test-cluster-login"
_RESOURCE_REGISTRIES = ("_indexing", "_watching", "_spawning", "_changing")


@dataclass
class _KopfRun(ThreadRun):
    stop_flag: asyncio.Event | None = None
    registry: Any = None
    settings: Any = None
    phase: str = "starting"


_WEBHOOK_DENIAL = re.compile(r"(^|\] )Webhook '[^']*' failed permanently: ")


class KopfOperator(ThreadOperator):
    """A kopf operator run in-process against the test cluster."""

    kind = "kopf"
    runner = "run_kopf"

    def is_expected_error(self, record: logging.LogRecord) -> bool:
        """kopf logs an admission handler's denial (``kopf.AdmissionError``, a PermanentError) as
        "Webhook '<id>' failed permanently: <message>": the webhook rejecting a request, not a failure."""
        return record.name.startswith("kopf.objects") and bool(_WEBHOOK_DENIAL.search(record.getMessage()))

    error_hint = (
        "kopf logs handler exceptions and failed API requests as errors: the handler's own error "
        "is above. If the test provokes this failure on purpose, wrap that step in "
        "`with op.expect_crash(match=...):`; fail_on_errors=False ignores every logged error."
    )
    _run: _KopfRun

    def __init__(
        self,
        sources: Sequence[Source],
        cluster: Cluster,
        *,
        namespaces: Sequence[str] | None = None,
        cluster_wide: bool = False,
        configure: Callable[[Any], None] | None = None,
        memo: dict[str, Any] | None = None,
        name: str | None = None,
        log_level: int = logging.INFO,
        **options: Any,
    ) -> None:
        import kopf  # noqa: F401 - fail here, with ImportError, when kopf is not installed

        sources = [sources] if isinstance(sources, (str, Path)) else list(sources)
        default_name = Path(str(sources[0])).stem if sources and is_path(sources[0]) else str(sources[0])
        super().__init__(
            name or default_name, cluster, namespaces=namespaces, cluster_wide=cluster_wide, **options
        )
        self.sources = sources
        self.configure = configure
        self.memo = dict(memo or {})
        self.log_level = log_level
        self._run = _KopfRun(RunThreads(self.name, self._sink))

    registry = Delegated[Any]("_run")
    """The ``kopf.OperatorRegistry`` of the current run (fresh for every run)."""
    settings = Delegated[Any]("_run")
    """The ``kopf.OperatorSettings`` of the current run."""

    # ------------------------------------------------------------ hooks

    def _launch(self) -> None:
        import kopf

        run = _KopfRun(RunThreads(self.name, self._sink))
        route = self._route_client_defaults(run)  # import-time load_kube_config() reaches the proxy too
        try:
            with client_defaults.importing(route):
                registry = load_registry(self.sources)
            _bind_credentials(registry, self.api_cluster)
            settings = kopf.OperatorSettings()
            if self.configure is not None:
                self.configure(settings)
            # kopf SIGKILLs its own thread (i.e. this whole process) if a cancelled operator takes
            # too long to exit; a test process must never be killed by the operator under test.
            settings.process.ultimate_exiting_timeout = None
        except BaseException:
            self._unroute_client_defaults(run)
            raise
        run.registry, run.settings = registry, settings
        self._run = run
        self._start_thread(run, lambda: self._body(run), f"ktest-kopf-{self.name}")

    def _body(self, run: _KopfRun) -> None:
        import kopf
        from kopf._cogs.structs.references import Insights  # kopf.operator(insights=...) takes one

        loop = run.loop = asyncio.new_event_loop()
        asyncio.set_event_loop(loop)
        try:
            insights = Insights()
            ready_flag = asyncio.Event()
            run.stop_flag = asyncio.Event()
            memo = kopf.Memo(self.memo)
            memo.setdefault("kubeconfig", str(self.api_cluster.kubeconfig))
            # Created before the operator, so kopf's shutdown does not count it as its own.
            watcher = loop.create_task(self._readiness(run, ready_flag, insights), name="ktest readiness")
            run.task = loop.create_task(
                kopf.operator(
                    registry=run.registry,
                    settings=run.settings,
                    insights=insights,
                    ready_flag=ready_flag,
                    stop_flag=run.stop_flag,
                    standalone=True,
                    clusterwide=self.cluster_wide,
                    namespaces=self.namespaces or (),
                    memo=memo,
                ),
                name=f"kopf operator {self.name}",
            )
            run.started.set()
            try:
                loop.run_until_complete(run.task)
            finally:
                watcher.cancel()
        finally:
            close_loop(loop, wait=not run.killed)

    async def _readiness(self, run: _KopfRun, ready_flag: asyncio.Event, insights: Any) -> None:
        run.phase = "running its startup handlers"
        await ready_flag.wait()
        run.settings.process.ultimate_exiting_timeout = None  # a startup handler may have set it
        run.phase = "discovering resources and namespaces"
        await insights.ready_resources.wait()
        await insights.ready_namespaces.wait()
        while True:
            unresolved = _unresolved_selectors(run.registry, insights)
            missing = _missing_watchers(insights)
            if not unresolved and not missing:
                break
            if unresolved:
                run.phase = f"the cluster does not serve {', '.join(unresolved)} (is its CRD installed?)"
            else:
                run.phase = f"starting watch streams: {', '.join(sorted(missing))}"
            await asyncio.sleep(0.02)
        run.phase = "ready"
        run.ready.set()
        self._wake.set()

    def _after_run(self, run: ThreadRun) -> None:
        executor = getattr(getattr(run, "settings", None), "execution", None)
        executor = getattr(executor, "executor", None)
        if executor is not None:
            executor.shutdown(wait=False, cancel_futures=True)

    def _signal_stop(self, run: ThreadRun) -> None:
        stop_flag = getattr(run, "stop_flag", None)
        if run.loop is not None and stop_flag is not None:
            call_in_loop(run.loop, stop_flag.set)

    def _death_reason(self) -> str:
        run = self._run
        if run.exception is not None:
            return f"stopped with {self._exception_text()}"
        if run.returned:
            return "exited although it was not asked to stop (one of kopf's root tasks ended)"
        return "ended without a result"

    def _is_ready(self) -> bool:
        return self._run.ready.is_set()

    def _not_ready_reason(self) -> str:
        return f"kopf: {self._run.phase}"

    def _describe(self) -> str:
        where = "cluster-wide" if self.cluster_wide else f"namespaces {self.namespaces}"
        return f"kopf handlers from: {describe_sources(self.sources)} ({where})"


def _bind_credentials(registry: Any, cluster: Cluster) -> None:
    """Replace the operator's login handlers by one returning the test cluster's credentials."""
    import kopf

    activities = registry._activities
    activities._handlers = [
        handler
        for handler in activities.get_all_handlers()
        if getattr(handler.activity, "value", handler.activity) != "authentication"
    ]
    configuration = cluster.api_client.configuration
    scheme = token = None
    authorization = (configuration.api_key or {}).get("authorization")
    if authorization:
        scheme, _, token = str(authorization).partition(" ")
        if not token:
            scheme, token = "Bearer", scheme

    def login(**_: Any) -> Any:
        return kopf.ConnectionInfo(
            server=str(configuration.host),
            ca_path=configuration.ssl_ca_cert or None,
            insecure=not configuration.verify_ssl,
            certificate_path=configuration.cert_file or None,
            private_key_path=configuration.key_file or None,
            username=configuration.username or None,
            password=configuration.password or None,
            scheme=scheme,
            token=token,
        )

    kopf.on.login(registry=registry, id=_LOGIN_ID)(login)


def _resource_handlers(registry: Any) -> list[Any]:
    found: list[Any] = []
    for part in _RESOURCE_REGISTRIES:
        found.extend(getattr(registry, part).get_all_handlers())
    return found


def _unresolved_selectors(registry: Any, insights: Any) -> list[str]:
    unresolved = []
    for handler in _resource_handlers(registry):
        selector = handler.selector
        if selector is not None and not any(selector.check(r) for r in insights.watched_resources):
            unresolved.append(_selector_text(selector))
    return sorted(set(unresolved))


def _selector_text(selector: Any) -> str:
    names = (getattr(selector, attribute, None) for attribute in ("plural", "any_name", "kind", "singular"))
    name = next((candidate for candidate in names if candidate), str(selector))
    group = getattr(selector, "group", None)
    version = getattr(selector, "version", None)
    return f"{name}.{group}" + (f"/{version}" if version else "") if group else str(name)


def _missing_watchers(insights: Any) -> set[str]:
    expected = {
        f"watcher for {resource}@{namespace if resource.namespaced else None}"
        for resource in insights.watched_resources
        for namespace in insights.namespaces
    }
    running = {task.get_name() for task in asyncio.all_tasks() if not task.done()}
    return expected - running


def run_kopf(
    modules_or_paths: Source | Sequence[Source],
    cluster: Cluster,
    *,
    configure: Callable[[Any], None] | None = None,
    memo: dict[str, Any] | None = None,
    **options: Unpack[InProcessOptions],
) -> KopfOperator:
    """Run kopf handlers (module names such as ``"my_op.handlers"`` or ``.py`` paths) in-process.

    ``namespaces=[...]`` (names or kopf globs) limits the operator to those
    namespaces; without it, it serves the whole cluster. ``configure(settings)``
    adjusts each run's fresh ``kopf.OperatorSettings``. Handlers find the
    kubeconfig path in ``memo.kubeconfig`` for clients of their own. Every run
    (``restart()`` too) loads the modules afresh into a new registry.
    ``proxy`` (default: the ``ktest_operator_proxy`` setting, on) routes the operator's
    API calls through ktest's proxy: ``op.traffic``, ``op.faults``. The other keyword
    arguments: :class:`~ktest.operators.handle.InProcessOptions`.
    """
    wait = options.pop("wait", True)
    sources = [modules_or_paths] if isinstance(modules_or_paths, (str, Path)) else list(modules_or_paths)
    handle = KopfOperator(sources, cluster, configure=configure, memo=memo, **options)
    return launch(handle, wait)
