"""Run a kopf operator in-process: its own thread, event loop, registry and credentials.

Nothing process-wide changes while it runs: handlers load into a fresh ``kopf.OperatorRegistry``
(``loading``), credentials come from a login handler ktest adds (the operator's own
``@kopf.on.login`` handlers would read production credentials), and settings are fresh per run,
the test's ``configure=`` winning over the operator's startup handlers (``settings``).

Ready means: the startup handlers finished, every resource the handlers name is resolved (a
missing CRD keeps it not ready, and the wait says so), a watch stream runs for every resource in
every namespace served, and (``liveness=True``) the liveness endpoint answers. kopf lists before
it watches, so nothing created after that point is missed.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, overload

from ktest.errors import OperatorError
from ktest.operators import client_defaults
from ktest.operators.denials import find_denials
from ktest.operators.inprocess import ThreadOperator, ThreadRun
from ktest.operators.kopf.liveness import answers, read_probe
from ktest.operators.kopf.loading import (
    RESOURCE_REGISTRIES,
    SiblingModules,
    Source,
    describe_sources,
    is_path,
    load_registry,
    registry_handlers,
)
from ktest.operators.kopf.retries import (
    DEFAULT_SETTLE_TIMEOUT,
    DEFAULT_TOLERATED_RETRIES,
    REQUEST_HINT,
    RequestRetry,
    RequestRetryTracker,
    Retry,
    RetryTracker,
    is_kopf_stream_cancel_noise,
    retried_object_exists,
    still_failing_failure,
)
from ktest.operators.kopf.settings import configure_pinned
from ktest.operators.operator import launch_replicated
from ktest.operators.threads import RunThreads, close_loop

if TYPE_CHECKING:
    import kopf
    from typing_extensions import Unpack

    from ktest.cluster import Cluster
    from ktest.operators.options import KopfOptions

_LOGIN_ID = "ktest-test-cluster-login"


@dataclass
class _KopfRun(ThreadRun):
    registry: Any = None
    settings: Any = None
    phase: str = "starting"
    siblings: SiblingModules = field(default_factory=SiblingModules)
    retries: RetryTracker = field(default_factory=RetryTracker)
    requests: RequestRetryTracker = field(default_factory=RequestRetryTracker)


_WEBHOOK_DENIAL = re.compile(r"(^|\] )Webhook '[^']*' failed permanently: ")


class KopfOperator(ThreadOperator):
    """A kopf operator run in-process against the test cluster."""

    kind = "kopf"
    runner = "run_kopf"
    ended_with = "stopped with"
    returned_early = "exited although it was not asked to stop (one of kopf's root tasks ended)"

    def is_expected_error(self, record: logging.LogRecord) -> bool:
        """kopf logs an admission handler's denial (``kopf.AdmissionError``, a PermanentError) as
        "Webhook '<id>' failed permanently: <message>": the webhook rejecting a request, not a failure."""
        denial = record.name.startswith("kopf.objects") and bool(_WEBHOOK_DENIAL.search(record.getMessage()))
        return denial or is_kopf_stream_cancel_noise(record)

    error_hint = (
        "kopf logs handler exceptions and failed API requests as errors: the handler's own error "
        "is above. If the test provokes this failure on purpose, wrap that step in "
        "`with op.expect_crash(match=...):`; fail_on_errors=False ignores every logged error. "
        "A failure that is expected to pass should raise kopf.TemporaryError: its retries fail "
        "the test only when they do not end in success."
    )
    retry_hint = (
        "kopf retries a handler that raised kopf.TemporaryError; ktest lets such retries pass when "
        "the handler then succeeds, but not when it keeps failing (more than tolerated_retries times "
        "in a row) or is still failing when the test ends. A user error that retrying cannot fix "
        "should be reported (status, kopf.PermanentError), not retried."
    )
    _run: _KopfRun

    def __init__(
        self,
        sources: Source | Sequence[Source],
        cluster: Cluster,
        *,
        configure: Callable[[Any], None] | None = None,
        memo: dict[str, Any] | None = None,
        name: str | None = None,
        log_level: int = logging.INFO,
        liveness: bool = False,
        tolerated_retries: int = DEFAULT_TOLERATED_RETRIES,
        settle_timeout: float = DEFAULT_SETTLE_TIMEOUT,
        peering: str | None = None,
        priority: int = 0,
        **options: Any,
    ) -> None:
        import kopf  # noqa: F401 - fail here, with ImportError, when kopf is not installed

        if not isinstance(liveness, bool):
            raise OperatorError(
                f"run_kopf: liveness={liveness!r} is not supported; pass liveness=True: ktest serves "
                "kopf's liveness endpoint (what `kopf run --liveness` does) on a free port of 127.0.0.1 "
                "at /healthz, and op.probe() reads it (op.liveness_url is its address)."
            )
        if type(tolerated_retries) is not int or tolerated_retries < 0:
            raise OperatorError(
                f"run_kopf: tolerated_retries={tolerated_retries!r} must be a whole number >= 0 (how many "
                "kopf.TemporaryError failures in a row of one handler on one object pass; 0: none)."
            )

        if peering is not None and (not isinstance(peering, str) or not peering):
            raise OperatorError(
                f"run_kopf: peering={peering!r} must be the name of the KopfPeering object the operator "
                "keeps alive in (kopf run --peering NAME), or None to run standalone."
            )
        if isinstance(priority, bool) or not isinstance(priority, int):
            raise OperatorError(f"run_kopf: priority={priority!r} must be a whole number (kopf --priority).")
        sources = [sources] if isinstance(sources, (str, Path)) else list(sources)
        if not sources:
            raise OperatorError("run_kopf needs at least one module name or file path with kopf handlers.")
        default_name = Path(str(sources[0])).stem if is_path(sources[0]) else str(sources[0])
        super().__init__(name or default_name, cluster, **options)
        self.sources = sources
        self.configure = configure
        self.memo = dict(memo or {})
        self.log_level = log_level
        self.liveness = liveness
        self.tolerated_retries = tolerated_retries
        """kopf.TemporaryError failures in a row of one handler on one object that pass."""
        self.settle_timeout = settle_timeout
        """Seconds a still-retrying handler gets to succeed once the test ends (:meth:`settle`)."""
        self.liveness_url: str | None = None
        """``http://127.0.0.1:<port>/healthz`` with ``liveness=True`` (the same port for every run)."""
        self.peering = peering
        """The KopfPeering object kopf keeps alive in, its identity this handle's name; None: standalone."""
        self.priority = priority
        """kopf's peering priority: a live peer of higher priority pauses this one."""
        self._run = _KopfRun(RunThreads(self._sink))

    @property
    def registry(self) -> kopf.OperatorRegistry:
        """The ``kopf.OperatorRegistry`` of the current run (fresh for every run)."""
        return self._run.registry

    @property
    def settings(self) -> kopf.OperatorSettings:
        """The ``kopf.OperatorSettings`` of the current run."""
        return self._run.settings

    # ------------------------------------------------------------ hooks

    def _launch(self) -> None:
        import kopf

        run = _KopfRun(RunThreads(self._sink))
        route = self._route_client_defaults(run)  # import-time load_kube_config() reaches the proxy too
        try:
            with client_defaults.importing(route):
                registry = load_registry(self.sources, run.siblings)
            _bind_credentials(registry, self.api_cluster)
            settings = kopf.OperatorSettings()
            configure_pinned(
                settings, ("the test's configure=", self.configure), ("ktest", _ktest_settings)
            )
            if self.liveness and self.liveness_url is None:
                from ktest.base.ports import free_ports

                (port,) = free_ports(1)
                self.liveness_url = f"http://127.0.0.1:{port}/healthz"
        except BaseException:
            run.siblings.release()
            self._unroute_client_defaults(run)
            raise
        run.registry, run.settings = registry, settings
        self._run = run
        self._start_thread(run, lambda: self._body(run), f"ktest-kopf-{self.name}")

    def _body(self, run: _KopfRun) -> None:
        import kopf
        from kopf._cogs.structs.references import Insights  # kopf.operator(insights=...) takes one
        from kopf._core.engines.peering import Identity

        loop = run.loop = asyncio.new_event_loop()
        asyncio.set_event_loop(loop)
        try:
            insights = Insights()
            ready_flag = asyncio.Event()
            run.stop = stop_flag = asyncio.Event()
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
                    stop_flag=stop_flag,
                    standalone=self.peering is None,
                    peering_name=self.peering,
                    priority=self.priority,
                    identity=Identity(self.name) if self.peering is not None else None,
                    clusterwide=self.cluster_wide,
                    namespaces=self.namespaces or (),
                    memo=memo,
                    liveness_endpoint=self.liveness_url if self.liveness else None,
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
        while self.liveness_url is not None and self.liveness and not await answers(self.liveness_url):
            run.phase = f"starting its liveness endpoint {self.liveness_url}"
            await asyncio.sleep(0.02)
        run.phase = "ready"
        run.ready.set()
        self._wake.set()

    def _after_run(self, run: ThreadRun) -> None:
        executor = getattr(getattr(run, "settings", None), "execution", None)
        executor = getattr(executor, "executor", None)
        if executor is not None:
            executor.shutdown(wait=False, cancel_futures=True)
        if isinstance(run, _KopfRun):
            run.siblings.release()
            run.requests.release()

    # ------------------------------------------------------------ retries by design

    def _routing_level(self) -> int:
        return min(self.log_level, logging.INFO)  # kopf's "succeeded" records end a retry

    def _writes(self, record: logging.LogRecord) -> bool:
        return record.levelno >= self.log_level

    def _observe(self, run: ThreadRun, record: logging.LogRecord, text: str) -> bool:
        if not isinstance(run, _KopfRun) or not self.fail_on_errors or self._crashes.expecting:
            return False  # inside expect_crash() a temporary failure is the expected failure
        if self._crashes.aftermath_open() or self._failure is not None:
            return False  # kopf's "failed temporarily" after the handler's own error: the same failure
        networking = getattr(run.settings, "networking", None)
        request = run.requests.observe(record, getattr(networking, "error_backoffs", None))
        if request is not None:
            if self.fail_on_forbidden and find_denials(text):
                return False  # kopf retries a 403 too (for upgrades), but an RBAC refusal fails at once
            if request.gave_up:
                what, details = request.gave_up_failure()
                self._record_failure(what, details=details, hint=REQUEST_HINT)
            return True
        retry = run.retries.observe(record)
        if retry is None:
            return False
        if retry.failures > self.tolerated_retries:
            self._record_failure(
                f"kept retrying {retry.handler}{retry.where}: it failed temporarily "
                f"{retry.failures} times in a row (tolerated_retries={self.tolerated_retries})",
                details=f"Its last error: {retry.last_error}",
                hint=self.retry_hint,
            )
        return True

    @property
    def pending_request_retries(self) -> list[RequestRetry]:
        """kopf's own API requests of the current run whose last attempt failed and that kopf
        retries (the API server was unavailable, say): they end when an attempt succeeds."""
        return self._run.requests.pending

    @property
    def pending_retries(self) -> list[Retry]:
        """Handlers of the current run whose last attempt failed with ``kopf.TemporaryError``
        and that have not succeeded since."""
        return self._run.retries.pending

    def _settle(self, timeout: float | None) -> None:
        if not self.fail_on_errors:
            return
        timeout = self.settle_timeout if timeout is None else timeout
        requests = self._run.requests.settle(timeout)
        if requests:
            what, details = still_failing_failure(requests)
            self._record_failure(what, details=details, hint=REQUEST_HINT)
            return
        still = self._run.retries.settle(timeout)
        still = [retry for retry in still if retried_object_exists(self.cluster, retry)]
        if still:
            what, details = still_failing_failure(still)
            self._record_failure(what, details=details, hint=self.retry_hint)

    def owns_finalizer(self, finalizer: str) -> bool:
        """kopf's own finalizer: the run's ``settings.persistence.finalizer`` (after its startup
        handlers, which may set it)."""
        settings = self._run.settings
        if settings is None:
            return super().owns_finalizer(finalizer)
        return bool(finalizer == settings.persistence.finalizer)

    # ------------------------------------------------------------ probes

    def probe(self, timeout: float = 10.0) -> dict[str, Any]:
        """kopf's answer on its liveness endpoint: the results of the ``@kopf.on.probe``
        handlers by handler id (what a kubelet's liveness probe reads). kopf caches the
        results for 10 s, so a second call within that time returns the same answer.

        Needs ``run_kopf(..., liveness=True)`` and a running operator."""
        if not self.liveness or self.liveness_url is None:
            raise OperatorError(
                f"operator {self.name!r} serves no liveness endpoint: start it with "
                "run_kopf(..., liveness=True) to call op.probe()."
            )
        if not self.alive:
            raise OperatorError(
                f"operator {self.name!r} is {self.state} and not running: nothing answers probes."
            )
        return read_probe(self.name, self.liveness_url, timeout)

    def _is_ready(self) -> bool:
        return self._run.ready.is_set()

    def _not_ready_reason(self) -> str:
        return f"kopf: {self._run.phase}"

    def _describe(self) -> str:
        where = "cluster-wide" if self.cluster_wide else f"namespaces {self.namespaces}"
        peering = f", peering {self.peering!r} priority {self.priority}" if self.peering else ""
        return f"kopf handlers from: {describe_sources(self.sources)} ({where}{peering})"


def _ktest_settings(settings: Any) -> None:
    # kopf SIGKILLs its own thread (i.e. this whole process) if a cancelled operator takes
    # too long to exit; a test process must never be killed by the operator under test.
    settings.process.ultimate_exiting_timeout = None


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


def _unresolved_selectors(registry: Any, insights: Any) -> list[str]:
    unresolved = []
    for handler in registry_handlers(registry, RESOURCE_REGISTRIES):
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


Sources = Source | Sequence[Source]


@overload
def run_kopf(
    modules_or_paths: Sources, cluster: Cluster, *, replicas: Literal[1] = 1, **options: Unpack[KopfOptions]
) -> KopfOperator: ...
@overload
def run_kopf(
    modules_or_paths: Sources, cluster: Cluster, *, replicas: int, **options: Unpack[KopfOptions]
) -> Any: ...
def run_kopf(
    modules_or_paths: Source | Sequence[Source],
    cluster: Cluster,
    *,
    replicas: int = 1,
    **options: Unpack[KopfOptions],
) -> KopfOperator | Any:
    """Run kopf handlers (module names such as ``"my_op.handlers"`` or ``.py`` paths) in-process.

    ``namespaces=[...]`` (names or kopf globs) limits the operator to those
    namespaces; without it, it serves the whole cluster. A ``.py`` path is imported as
    ``kopf run path.py`` does: its folder first on ``sys.path``, so sibling modules import
    (undone when the run ends). ``configure(settings)`` adjusts each run's fresh
    ``kopf.OperatorSettings``; what it sets wins over the operator's own startup handlers
    (their change is ignored and noted in the log). The operator's ``@kopf.on.login``
    handlers are replaced by one for the test cluster. Handlers find the kubeconfig path in
    ``memo.kubeconfig`` for clients of their own. Every run (``restart()`` too) loads the
    modules afresh into a new registry.

    ``liveness=True`` serves kopf's liveness endpoint (``kopf run --liveness``) on a free
    127.0.0.1 port: ``op.probe()`` returns the ``@kopf.on.probe`` handlers' answer.
    ``kopf.TemporaryError`` retries pass when the handler then succeeds; one failing more
    than ``tolerated_retries`` times in a row on one object, or still failing ``settle_timeout``
    s after the test ended, fails the test (with ``fail_on_errors``, the default). kopf's retries
    of its own API requests (the API server briefly away) pass when a later attempt succeeds; a
    request kopf gives up on, or still failing when the test ends, fails the test.
    The other keyword arguments (``proxy``: ``op.traffic``, ``op.faults``):
    :class:`~ktest.operators.options.InProcessOptions`.

    ``peering="NAME"``: kopf's peering (``kopf run --peering NAME --priority P``), not standalone;
    it keeps alive in the KopfPeering NAME (ClusterKopfPeering when cluster-wide) under its
    handle's name and pauses while a peer of higher ``priority`` lives. ``replicas=3``: instances
    ``<name>-0`` .. ``<name>-2``, each behind its own proxy, priorities ``priority + 2`` ..
    ``priority`` (the first leads): a ``ktest.replicas.OperatorReplicas``.
    """
    wait = options.pop("wait", True)
    count = replicas if isinstance(replicas, int) and not isinstance(replicas, bool) else 1
    priority = options.get("priority", 0)
    rest: dict[str, Any] = {key: value for key, value in options.items() if key != "priority"}

    def make(replica: int | None) -> KopfOperator:
        rank = priority if replica is None else priority + count - 1 - replica
        return KopfOperator(modules_or_paths, cluster, priority=rank, replica=replica, **rest)

    return launch_replicated("run_kopf", replicas, make, wait)
