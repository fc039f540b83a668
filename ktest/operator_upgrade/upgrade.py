"""``operator_upgrade``: version A of the operator converges, stops; version B starts over the
same cluster and converges; what B changed on the objects A left is the upgrade's diff."""

from __future__ import annotations

import time
from collections.abc import Callable, Collection, Sequence
from types import TracebackType
from typing import TYPE_CHECKING, Any

from ktest.errors import KtestError, OperatorError
from ktest.operator_upgrade.diff import ObjectChange, object_changes
from ktest.operator_upgrade.snapshot import ObjectKey, collections_of, is_bookkeeping, take
from ktest.operator_upgrade.versions import OperatorVersion, VersionSpec, as_version

if TYPE_CHECKING:
    from ktest.cluster import Cluster
    from ktest.operators.operator import OperatorHandle
    from ktest.proxy.traffic import Call

RULE_NO_ROLLOUT = (
    "an operator upgrade must leave the Pod templates of the workloads it manages as they were: a "
    "change to spec.template makes the Deployment, StatefulSet or DaemonSet replace every Pod, so "
    "rolling the operator out restarts every workload it manages at once"
)
RULE_QUIET = (
    "an upgraded operator that finds its objects as the previous version left them has nothing to "
    "write: each write it makes anyway (defaults re-applied, a field re-formatted, an annotation "
    "stamped) happens to every object it manages the moment the upgrade rolls out"
)
WORKLOADS = frozenset({("apps", "deployments"), ("apps", "statefulsets"), ("apps", "daemonsets")})
DEFAULT_SETTLE = 1.0
DEFAULT_TIMEOUT = 30.0
_POLL = 0.05


class OperatorUpgrade:
    """The operator upgraded in place: ``with operator_upgrade(cluster, before=A, after=B) as up:``
    runs A (a kopf module or ``.py`` path, a command list, a callable, or ``kopf_version(...)``,
    ``command_version(...)``, ``callable_version(...)``) until ``converged()`` passes and it wrote
    nothing for ``settle`` s, stops it, starts B over the same cluster and lets it converge the
    same way (``converged_after``, default ``converged``). In the block B runs; ``up.diff()``,
    ``up.assert_no_rollout()``, ``up.assert_quiet()`` judge what B changed. ``options`` go to the
    runner of both versions (``namespaces=[ns]``, ``name=``: by default B takes A's); a B that
    does not start is one OperatorError, with A already stopped and nothing left running."""

    def __init__(
        self,
        cluster: Cluster,
        *,
        before: VersionSpec,
        after: VersionSpec,
        converged: Callable[[], Any] | None = None,
        converged_after: Callable[[], Any] | None = None,
        settle: float = DEFAULT_SETTLE,
        timeout: float = DEFAULT_TIMEOUT,
        **options: Any,
    ) -> None:
        if options.get("proxy") is False:
            raise OperatorError("operator_upgrade reads version B's writes from ktest's API proxy: "
                                "leave proxy on (drop proxy=False)")
        if settle < 0 or timeout <= 0:
            raise OperatorError(
                f"operator_upgrade: settle={settle!r} must be >= 0 and timeout={timeout!r} > 0 (seconds)"
            )
        self.cluster = cluster
        self.before: OperatorVersion = as_version(before, "before")
        self.after: OperatorVersion = as_version(after, "after")
        self.converged = converged
        self.converged_after = converged_after or converged
        self.settle = settle
        self.timeout = timeout
        self.options: dict[str, Any] = dict(options)
        self.previous: OperatorHandle | None = None
        """Version A, stopped once it converged."""
        self.operator: OperatorHandle | None = None
        """Version B, running from the upgrade until the ``with`` block ends."""
        self.state_before: dict[ObjectKey, dict[str, Any]] = {}
        """The objects as version A left them."""
        self.state_after: dict[ObjectKey, dict[str, Any]] = {}
        """The same objects (and those B wrote) once version B converged."""
        self._writes: list[Call] = []
        self._changes: list[ObjectChange] = []

    # ------------------------------------------------------------ running it

    def run(self) -> OperatorUpgrade:
        served = self.options.get("namespaces")
        first = self.previous = self._start(self.before, "version A")
        try:
            self._converge(first, self.converged, "version A")
            scope = collections_of(first.traffic.calls(), served)
            self.state_before = take(self.cluster, scope, served)
        finally:
            first.wait_for_namespaces = False  # B takes over what A served, as in production
            first.close()
        self.options.setdefault("name", first.name)  # one operator, two versions: one name (field manager)
        second = self._start(self.after, "version B", started_after=first)
        self.operator = second
        try:
            self._converge(second, self.converged_after, "version B")
            calls = second.traffic.calls()
            self._writes = [call for call in calls if call.is_write and not is_bookkeeping(call.request)]
            self.state_after = take(self.cluster, scope | collections_of(calls, served), served)
            self._changes = object_changes(self._writes, self.state_before, self.state_after)
        except BaseException:
            self.close()
            raise
        return self

    def _start(self, version: OperatorVersion, which: str, started_after: Any = None) -> OperatorHandle:
        try:
            return version.start(self.cluster, self.options)
        except KtestError as error:
            if started_after is None:
                raise
            raise OperatorError(
                f"operator_upgrade: {which} ({version.describe()}) did not start over the objects version A "
                f"({self.before.describe()}) left: {error}\nVersion A was stopped before it and nothing of "
                "either version is left running; the objects stay as version A left them (fix the new "
                "version's start-up, its readiness check or its options)"
            ) from error

    def _converge(self, handle: OperatorHandle, check: Callable[[], Any] | None, which: str) -> None:
        """The user's check passes (``eventually``), then no write for ``settle`` s."""
        deadline = time.monotonic() + self.timeout
        if check is not None:
            from ktest.wait import eventually

            eventually(check, timeout=self.timeout)
        writes = -1
        quiet_since = time.monotonic()
        while True:
            count = len(handle.traffic.writes())
            now = time.monotonic()
            if count != writes:
                writes, quiet_since = count, now
            elif now - quiet_since >= self.settle:
                return
            if now > deadline:
                raise OperatorError(
                    f"operator_upgrade: {which} did not settle: it still wrote within every "
                    f"{self.settle:g} s after {self.timeout:g} s (its last calls:\n"
                    f"{handle.traffic.describe(limit=10)})\n"
                    "give converged=... a check of its converged state, or a longer timeout="
                )
            time.sleep(_POLL)

    def close(self) -> None:
        """Stop version B (the end of the ``with`` block)."""
        if self.operator is not None:
            self.operator.close()

    def __enter__(self) -> OperatorUpgrade:
        return self.run()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    # ------------------------------------------------------------ what B did

    def diff(self) -> list[ObjectChange]:
        """Each object B changed (``changed`` with its fields, ``created``, ``deleted``); empty for
        an upgrade that found nothing to do (A to A)."""
        return list(self._changes)

    def writes(self) -> list[Call]:
        """B's writes while it converged (its events and leader lease left out)."""
        return list(self._writes)

    def assert_no_rollout(self) -> None:
        """No Pod template of a Deployment, StatefulSet or DaemonSet changed; else the failure
        names each workload and field."""
        __tracebackhide__ = True
        rolled = [
            (change, [line for line in change.fields if line.startswith("spec.template")])
            for change in self._changes
            if (change.key.group, change.key.resource) in WORKLOADS
        ]
        rolled = [(change, lines) for change, lines in rolled if lines]
        if not rolled:
            return
        shown = "\n".join(f"  {change.key.describe()}:\n" + "\n".join(f"    {line}" for line in lines)
                          for change, lines in rolled)
        raise AssertionError(
            f"upgrading the operator from {self.before.describe()} to {self.after.describe()} rolls out "
            f"{len(rolled)} workload(s): version B changed their Pod template, so every Pod of them "
            f"restarts:\n{shown}\nRule: {RULE_NO_ROLLOUT}"
        )

    def assert_quiet(self, allow: Collection[str] | Sequence[str] = ()) -> None:
        """B wrote nothing over the state A converged to, except to ``allow`` (resources, or
        ``resource/subresource``: ``"webapps/status"``); else the failure names each write and
        what it changed."""
        __tracebackhide__ = True
        allowed = set(allow)
        extra = [
            call for call in self._writes if not {call.request.resource, call.request.resource_path} & allowed
        ]
        if not extra:
            return
        by_object = {(c.key.group, c.key.resource, c.key.namespace, c.key.name): c for c in self._changes}
        lines = []
        for call in extra:
            request = call.request
            change = by_object.get((request.group, request.resource, request.namespace, request.name or ""))
            what = "; ".join(change.fields[:4]) if change and change.fields else (
                change.change if change else "changed nothing (a write with no effect)")
            lines.append(f"  {call.describe()}\n    {what}")
        raise AssertionError(
            f"version B ({self.after.describe()}) wrote {len(extra)} time(s) over the objects version A "
            f"({self.before.describe()}) had converged:\n" + "\n".join(lines) + f"\nRule: {RULE_QUIET}"
            + "\n(allow=[...] names writes the upgrade needs, e.g. allow=['webapps/status'])"
        )


operator_upgrade = OperatorUpgrade
"""``with operator_upgrade(cluster, before=A, after=B) as up:``: see :class:`OperatorUpgrade`."""
