"""``Kubelet``: what one test makes the simulated kubelet do to its Pods and nodes.

Each call writes KWOK Stages (named after the test's namespace) that outweigh the defaults for
the Pods it selects in that namespace; :meth:`Kubelet.close` removes them and reports a
selector that matched no Pod during the test (a typo would otherwise pass silently).
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Mapping
from typing import Any

from kubernetes.client.exceptions import ApiException

from ktest.nodes import behaviours
from ktest.nodes.selectors import SimulationError, kubernetes_selector, selector_expressions
from ktest.nodes.stages import MANAGED_LABEL, STAGE_RESOURCE, expression

LabelSelector = str | Mapping[str, str] | None
RETOUCH_AFTER = (0.5, 1.5, 3.0)
"""Seconds after a behaviour starts at which its Pods are touched again (see Behaviour.start)."""


class Behaviour:
    """One active behaviour: its Stages and what it selects."""

    def __init__(
        self, kubelet: Kubelet, name: str, selector: LabelSelector, stages: list[str], *, pods: bool
    ) -> None:
        self.kubelet, self.name, self.selector, self.stages, self.pods = kubelet, name, selector, stages, pods
        self._stopped = threading.Event()
        self._retoucher: threading.Thread | None = None

    def start(self) -> None:
        """Touch the selected Pods now and a few times in the next seconds: a Pod created right
        after the behaviour may reach KWOK before its new Stages do, and KWOK looks at a Pod
        again only when the Pod changes."""
        self.touch("started")
        if self.pods:
            self._retoucher = threading.Thread(target=self._retouch, name=f"ktest-{self.name}", daemon=True)
            self._retoucher.start()

    def _retouch(self) -> None:
        started = time.monotonic()
        for offset in RETOUCH_AFTER:
            if self._stopped.wait(max(0.0, started + offset - time.monotonic())):
                return
            try:
                self.touch(f"started ({offset:g} s)")
            except Exception:  # the cluster closing under it: the touches only hasten KWOK
                return

    def __repr__(self) -> str:
        return f"{self.name}({kubernetes_selector(self.selector) or 'every Pod'!r})"

    def stop(self) -> None:
        """Remove its Stages: the selected Pods follow the defaults again (they recover)."""
        self._stopped.set()
        if self._retoucher is not None:
            self._retoucher.join(timeout=10)
        cluster = self.kubelet.cluster
        for name in self.stages:
            cluster.delete((*STAGE_RESOURCE, name), missing_ok=True)
        if self.stages:
            self.touch("stopped")
        self.stages = []

    def touch(self, event: str) -> None:
        """KWOK chooses a Pod's next Stage when the Pod changes: annotate the selected Pods."""
        if not self.pods:
            return
        cluster, namespace = self.kubelet.cluster, self.kubelet.namespace
        stamp = {"metadata": {"annotations": {"ktest.dev/kubelet-behaviour": f"{self!r} {event}"}}}
        for pod in cluster.list(
            ("v1", "Pod"), namespace, label_selector=kubernetes_selector(self.selector) or None
        ):
            try:
                cluster.patch(("v1", "Pod", pod["metadata"]["name"], namespace), stamp)
            except ApiException as error:
                if error.status != 404:  # a Pod gone meanwhile needs nothing
                    raise


class Kubelet:
    """Pod behaviours for the Pods of ``namespace`` on simulated nodes (see :mod:`ktest.nodes.behaviours`)."""

    def __init__(self, cluster: Any, namespace: str) -> None:
        self.cluster = cluster
        self.namespace = namespace
        self.active: list[Behaviour] = []
        self._numbers = itertools.count(1)

    def crash_loop(
        self, selector: LabelSelector = None, *, exit_code: int = 1, backoff: float = 1.0
    ) -> Behaviour:
        """The selected Pods' containers exit with ``exit_code`` and restart in ``CrashLoopBackOff``."""
        return self._apply("crash_loop", selector, exit_code=exit_code, backoff=backoff)

    def oom_killed(self, selector: LabelSelector = None, *, backoff: float = 1.0) -> Behaviour:
        """The selected Pods' containers are OOM-killed (137, ``OOMKilled``) and restarted."""
        return self._apply("oom_killed", selector, backoff=backoff)

    def image_pull_error(self, selector: LabelSelector = None, *, backoff: float = 1.0) -> Behaviour:
        """The selected Pods stay Pending in ``ErrImagePull``/``ImagePullBackOff``."""
        return self._apply("image_pull_error", selector, backoff=backoff)

    def not_ready(self, selector: LabelSelector = None) -> Behaviour:
        """The selected Pods run, but their readiness fails (``Ready`` False)."""
        return self._apply("not_ready", selector)

    def slow_start(self, seconds: float, selector: LabelSelector = None) -> Behaviour:
        """The selected Pods become Ready only ``seconds`` after they start."""
        if not isinstance(seconds, (int, float)) or seconds < 0:
            raise SimulationError(f"slow_start needs a number of seconds >= 0, got {seconds!r}")
        return self._apply("slow_start", selector, seconds=seconds)

    def complete(self, selector: LabelSelector = None, *, after: float = 0.0) -> Behaviour:
        """The selected Pods' containers exit 0 after ``after`` seconds: the Pods Succeed."""
        return self._apply("complete", selector, after=after)

    def fail(self, selector: LabelSelector = None, *, exit_code: int = 1, after: float = 0.0) -> Behaviour:
        """The selected Pods' containers exit with ``exit_code``: the Pods Fail."""
        return self._apply("fail", selector, exit_code=exit_code, after=after)

    def evict(self, selector: LabelSelector = None) -> Behaviour:
        """The kubelet evicts the selected running Pods (``Evicted``, node memory pressure)."""
        return self._apply("evict", selector)

    def node_not_ready(self, node: str) -> Behaviour:
        """Node ``node`` reports NotReady until the behaviour stops (or the test ends)."""
        if self.cluster.get_or_none(("v1", "Node", node)) is None:
            raise SimulationError(f"node_not_ready: there is no node {node!r}")
        return self._write("node_not_ready", None, behaviours.node_not_ready(node), pods=False)

    def behave(self, name: str, selector: LabelSelector = None, **options: Any) -> Behaviour:
        """A behaviour by name (``"crash_loop"``, ...); SimulationError naming the known ones."""
        if name not in behaviours.POD_BEHAVIOURS:
            raise SimulationError(
                f"unknown Pod behaviour {name!r}; known: {', '.join(sorted(behaviours.POD_BEHAVIOURS))}, "
                "and node_not_ready(node)"
            )
        return self._apply(name, selector, **options)

    def _apply(self, name: str, selector: LabelSelector, **options: Any) -> Behaviour:
        expressions = [
            expression(".metadata.namespace", "In", self.namespace),
            *selector_expressions(selector),
        ]
        return self._write(name, selector, behaviours.POD_BEHAVIOURS[name](expressions, **options), pods=True)

    def _write(
        self, name: str, selector: LabelSelector, stages: list[dict[str, Any]], *, pods: bool
    ) -> Behaviour:
        number = next(self._numbers)
        written: list[str] = []
        behaviour = Behaviour(self, name, selector if pods else None, written, pods=pods)
        try:
            for stage in stages:
                stage["metadata"]["name"] = (
                    f"ktest-{self.namespace}-{number}-{name.replace('_', '-')}-{stage['metadata']['name']}"
                )
                stage["metadata"]["labels"][MANAGED_LABEL] = self.namespace
                self.cluster.create(stage)
                written.append(stage["metadata"]["name"])
        except BaseException:
            behaviour.stop()
            raise
        self.active.append(behaviour)
        behaviour.start()
        return behaviour

    def close(self, *, check: bool = True) -> None:
        """Remove every Stage of this test; with ``check``, SimulationError for a Pod behaviour
        whose selector matches no Pod of the namespace now."""
        unmatched = []
        for behaviour in self.active:
            if check and behaviour.pods:
                found = self.cluster.list(
                    ("v1", "Pod"),
                    self.namespace,
                    label_selector=kubernetes_selector(behaviour.selector) or None,
                )
                if not found:
                    unmatched.append(repr(behaviour))
            behaviour.stop()
        self.active = []
        if unmatched:
            raise SimulationError(
                f"kubelet.{', '.join(unmatched)} selected no Pod in namespace {self.namespace} by the end "
                "of the test: check the labels (a typo would make the behaviour silently do nothing)."
            )
