"""Watch-driven wake-up against a real kube-apiserver.

The checks poll every SLOW_POLL seconds, a period no test waits for: a check that
passes within a fraction of it was woken by a watch event, not by a poll tick.
Writes happen on another thread once the check has failed at least once, so they
land while ``eventually`` is between attempts (or right before it sleeps, the race
the hub's change log exists for).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import kubernetes
import pytest
from bare_wiring import plane_cluster
from builders import configmap, crd

from ktest.cluster import Cluster
from ktest.cluster.reads import ReadTarget
from ktest.controlplane import ControlPlane
from ktest.wait import aio, close_hub, consistently, eventually
from ktest.wait.wakeup import WatchHub, hub_for

pytest_plugins = ("restartable_plane",)  # the restart test's plane, one with the kopf retry tests'

SLOW_POLL = 30.0
PROMPT = SLOW_POLL / 3


class Background:
    """Runs ``action`` on a thread once ``trigger`` is set; re-raises its error on join."""

    def __init__(self, action: Callable[[], object]) -> None:
        self.trigger = threading.Event()
        self.error: BaseException | None = None
        self._action = action
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        if not self.trigger.wait(20):
            return
        try:
            self._action()
        except BaseException as exc:
            self.error = exc

    def join(self) -> None:
        self.trigger.set()
        self._thread.join(20)
        if self.error is not None:
            raise self.error


def passes_promptly(check: Callable[[], Any], writer: Background) -> Any:
    """``eventually(check)`` with a poll period no test waits for: it passes within PROMPT
    only when a watch event woke it. Then the writer is joined (its error re-raised)."""
    started = time.monotonic()
    value = eventually(check, timeout=2 * SLOW_POLL, interval=SLOW_POLL)
    assert time.monotonic() - started < PROMPT, "woke on a poll tick, not on the watch event"
    writer.join()
    return value


@pytest.fixture
def seconds() -> Iterator[Callable[[], float]]:
    started = time.monotonic()
    yield lambda: time.monotonic() - started


def test_eventually_wakes_when_the_object_it_read_changes(admin: Cluster, ns: str) -> None:
    admin.create(configmap("a", ns, {"v": "0"}))
    ref = ("v1", "ConfigMap", "a", ns)
    writer = Background(lambda: admin.patch(ref, {"data": {"v": "1"}}))

    def check_value() -> dict[str, Any]:
        obj = admin.get(ref)
        writer.trigger.set()
        assert obj["data"]["v"] == "1"
        return obj

    obj = passes_promptly(check_value, writer)
    assert obj["data"]["v"] == "1"


def test_eventually_wakes_when_the_object_appears(admin: Cluster, ns: str) -> None:
    writer = Background(lambda: admin.create(configmap("late", ns, {"v": "x"})))

    def check_exists() -> None:
        writer.trigger.set()
        admin.get(("v1", "ConfigMap", "late", ns))  # 404 until created: retried

    passes_promptly(check_exists, writer)


def test_a_list_wakes_on_any_object_of_the_namespace(admin: Cluster, ns: str) -> None:
    admin.create(configmap("one", ns, {"v": "1"}))
    writer = Background(lambda: admin.create(configmap("two", ns, {"v": "2"})))

    def two_configmaps() -> None:
        names = {o["metadata"]["name"] for o in admin.list("v1", "ConfigMap", ns)}
        writer.trigger.set()
        assert {"one", "two"} <= names

    passes_promptly(two_configmaps, writer)


def test_cluster_scoped_objects_wake_too(admin: Cluster, ns: str) -> None:
    ref = ("v1", "Namespace", ns)
    writer = Background(lambda: admin.patch(ref, {"metadata": {"labels": {"stage": "done"}}}))

    def labelled() -> None:
        labels = admin.get(ref)["metadata"].get("labels", {})
        writer.trigger.set()
        assert labels.get("stage") == "done"

    passes_promptly(labelled, writer)


def test_changes_to_other_objects_do_not_wake_the_check(admin: Cluster, ns: str) -> None:
    admin.create(configmap("watched", ns, {"v": "0"}))
    admin.create(configmap("other", ns, {"v": "0"}))
    watched, other = ("v1", "ConfigMap", "watched", ns), ("v1", "ConfigMap", "other", ns)

    def noise_then_change() -> None:
        for i in range(1, 6):
            admin.patch(other, {"data": {"v": str(i)}})
        admin.patch(watched, {"data": {"v": "1"}})

    writer = Background(noise_then_change)
    attempts = []

    def check() -> None:
        attempts.append(admin.get(watched)["data"]["v"])
        writer.trigger.set()
        assert attempts[-1] == "1"

    eventually(check, timeout=2 * SLOW_POLL, interval=SLOW_POLL)
    writer.join()
    # first attempt, at most one re-check when the new watch started, then the change itself
    assert 2 <= len(attempts) <= 3, attempts


def test_explicit_watch_targets_wake_checks_that_read_elsewhere(
    admin: Cluster, ns: str, plane: ControlPlane
) -> None:
    obj = admin.create(configmap("raw", ns, {"v": "0"}))
    client = kubernetes.config.new_client_from_config(config_file=str(plane.kubeconfig))
    core = kubernetes.client.CoreV1Api(client)
    writer = Background(lambda: admin.patch(obj, {"data": {"v": "1"}}))

    def read_with_official_client() -> None:
        data = core.read_namespaced_config_map("raw", ns).data
        writer.trigger.set()
        assert data["v"] == "1"

    try:
        started = time.monotonic()
        eventually(read_with_official_client, timeout=2 * SLOW_POLL, interval=SLOW_POLL,
                   watch=[obj], cluster=admin)
        assert time.monotonic() - started < PROMPT
    finally:
        writer.join()
        client.close()


def test_watch_false_only_polls(admin: Cluster, ns: str) -> None:
    ref = ("v1", "ConfigMap", "polled", ns)
    admin.create(configmap("polled", ns, {"v": "0"}))
    writer = Background(lambda: admin.patch(ref, {"data": {"v": "1"}}))
    attempts = []

    def check() -> None:
        attempts.append(admin.get(ref)["data"]["v"])
        writer.trigger.set()
        assert attempts[-1] == "1"

    started = time.monotonic()
    eventually(check, timeout=2, interval=SLOW_POLL, watch=False)
    writer.join()
    # not woken by the change: the second attempt is the last one, at the deadline
    assert time.monotonic() - started >= 2
    assert attempts == ["0", "1"]

    with pytest.raises(AssertionError) as info:
        eventually(lambda: admin.get(ref) and False, timeout=0.1, interval=0.05, watch=False)
    assert "Re-evaluated by polling every 0.05s (watch wake-up turned off)." in str(info.value)


def test_failure_message_names_the_watched_objects(admin: Cluster, ns: str) -> None:
    admin.create(configmap("never", ns, {"v": "0"}))

    def check() -> None:
        assert admin.get(("v1", "ConfigMap", "never", ns))["data"]["v"] == "1"

    with pytest.raises(AssertionError) as info:
        eventually(check, timeout=0.5, interval=0.1)
    message = str(info.value)
    assert f"Re-evaluated by polling every 0.1s and on watch events for v1 ConfigMap {ns}/never" in message
    assert "AssertionError: assert '0' == '1'" in message


def test_consistently_catches_a_violation_shorter_than_the_poll_interval(
    admin: Cluster, ns: str
) -> None:
    ref = ("v1", "ConfigMap", "steady", ns)
    admin.create(configmap("steady", ns, {"v": "good"}))
    restored = threading.Event()

    def blip() -> None:
        admin.patch(ref, {"data": {"v": "bad"}})
        deadline = time.monotonic() + 0.5
        while time.monotonic() < deadline and not restored.is_set():
            restored.wait(0.05)
        admin.patch(ref, {"data": {"v": "good"}})

    writer = Background(blip)

    def stays_good() -> None:
        value = admin.get(ref)["data"]["v"]
        writer.trigger.set()
        if value == "bad":
            restored.set()
        assert value == "good"

    with pytest.raises(AssertionError) as info:
        consistently(stays_good, duration=5, interval=SLOW_POLL)
    writer.join()
    assert "broke on attempt" in str(info.value)
    assert "assert 'bad' == 'good'" in str(info.value)


def test_a_refused_watch_falls_back_to_polling_and_says_why(
    admin: Cluster, ns: str
) -> None:
    admin.create(configmap("limited", ns, {"v": "0"}))
    admin.create({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
        "metadata": {"name": "get-only", "namespace": ns},
        "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]}],
    })
    admin.create({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
        "metadata": {"name": "get-only", "namespace": ns},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "get-only"},
        "subjects": [{"kind": "User", "name": "getter", "apiGroup": "rbac.authorization.k8s.io"}],
    })
    getter = admin.user("getter")
    ref = ("v1", "ConfigMap", "limited", ns)
    eventually(lambda: getter.get(ref), timeout=10, interval=0.05)  # RBAC has propagated

    with pytest.raises(AssertionError) as info:
        # 5 s: on a busy machine the watch's refusal took more than 1 s to come back
        eventually(lambda: getter.get(ref)["data"]["v"] == "1", timeout=5, interval=0.1)
    assert f"No watch for v1 ConfigMap {ns}/limited: 403 Forbidden: not allowed to list/watch" in (
        str(info.value)
    )


def test_close_hub_stops_the_watch_threads(plane: ControlPlane, ns: str, admin: Cluster) -> None:
    admin.create(configmap("c", ns, {"v": "0"}))
    own = Cluster(plane.kubeconfig, name="closing")
    ref = ("v1", "ConfigMap", "c", ns)
    calls = []

    def check() -> None:
        calls.append(own.get(ref))
        assert len(calls) >= 2

    eventually(check, timeout=5, interval=SLOW_POLL)  # woken by the new watch's first list
    hub = hub_for(own)
    assert hub is not None
    threads = [w for w in hub.watches().values()]
    assert threads and all(w.alive for w in threads)
    own.close()  # calls close_hub
    assert hub.closed
    assert not hub.watches()
    for watch in threads:
        watch.join(time.monotonic() + 5)
        assert not watch.alive
    close_hub(own)  # idempotent


def test_idle_watches_are_stopped(cluster: Cluster, ns: str, admin: Cluster) -> None:
    hub = WatchHub(cluster, idle_timeout=0.0)
    try:
        first = hub.subscribe([ReadTarget("v1", "ConfigMap", ns, "x")], lambda: None)
        eventually(lambda: len(hub.watches()) == 1, timeout=5, interval=0.05, watch=False)
        (old,) = hub.watches().values()
        hub.unsubscribe(first)
        second = hub.subscribe([ReadTarget("v1", "Secret", ns, "y")], lambda: None)
        keys = set(hub.watches())
        assert keys == {("v1", "Secret", ns)}
        old.join(time.monotonic() + 5)
        assert not old.alive
        hub.unsubscribe(second)
    finally:
        hub.close()


@pytest.mark.asyncio
async def test_async_eventually_wakes_on_watch_events(admin: Cluster, ns: str) -> None:
    admin.create(configmap("async", ns, {"v": "0"}))
    ref = ("v1", "ConfigMap", "async", ns)
    writer = Background(lambda: admin.patch(ref, {"data": {"v": "1"}}))

    async def check() -> None:
        value = admin.get(ref)["data"]["v"]
        writer.trigger.set()
        assert value == "1"

    started = time.monotonic()
    await aio.eventually(check, timeout=2 * SLOW_POLL, interval=SLOW_POLL)
    assert time.monotonic() - started < PROMPT
    writer.join()


@pytest.mark.xdist_group("restartable-plane")  # its worker runs every test on that plane
def test_wake_up_survives_an_api_server_restart(restartable_plane: ControlPlane) -> None:
    # the plane is shared with the kopf retry tests: a namespace of this test's own
    with plane_cluster(restartable_plane, "restarted") as own, own.namespace(prefix="restart") as restart_ns:
        own.create(configmap("r", restart_ns, {"v": "0"}))
        ref = ("v1", "ConfigMap", "r", restart_ns)
        eventually(lambda: own.get(ref), timeout=5, interval=0.05)
        eventually(lambda: own.get(ref) and len(hub_for(own).watches()) == 1,  # type: ignore[union-attr]
                   timeout=5, interval=SLOW_POLL)
        restartable_plane.restart()
        writer = Background(lambda: own.patch(ref, {"data": {"v": "1"}}))

        def check() -> None:
            value = own.get(ref)["data"]["v"]
            writer.trigger.set()
            assert value == "1"

        passes_promptly(check, writer)


GADGET_CRD = crd("wait.ktest.dev", "Gadget", status=True)


def test_custom_resources_installed_after_the_cluster_started_wake_too(
    admin: Cluster, ns: str
) -> None:
    hub_for(admin)  # the hub (and the dynamic client's discovery) exist before the CRD
    admin.install_crds(GADGET_CRD)
    gadget = admin.create({"apiVersion": "wait.ktest.dev/v1", "kind": "Gadget",
                           "metadata": {"name": "g", "namespace": ns}})
    writer = Background(lambda: admin.patch(gadget, {"status": {"phase": "Ready"}},
                                            subresource="status"))

    def ready() -> None:
        phase = admin.get(gadget).get("status", {}).get("phase")
        writer.trigger.set()
        assert phase == "Ready"

    passes_promptly(ready, writer)
