"""kopf's own API-request retries: an API server briefly away (restarted, upgraded) makes kopf log
each failed attempt as an ERROR ("Request attempt #1/9 failed; will retry"); that passes when a
later attempt succeeds, and fails the test, naming the request, when kopf gives up or the request
is still failing when the test ends."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Any

import pytest
from bare_wiring import plane_cluster
from builders import configmap, configmap_ref
from operator_helpers import SAMPLES, wait_for

from ktest.controlplane import ControlPlane
from ktest.errors import OperatorError
from ktest.operators import run_kopf
from ktest.run_context import check_health, run_context, use_context
from ktest.wait import eventually

MIRROR = {"ktest.dev/kopf-copy": "true"}

# The tests restart the plane or stop its API server: a private one, shared with the wake-up test
# that restarts it (tests/wait/test_wakeup.py), on one worker.
pytest_plugins = ("restartable_plane",)
pytestmark = pytest.mark.xdist_group("restartable-plane")


def quick_retries(settings: Any) -> None:
    # nine attempts over 22.5 s: a restart of etcd and the API server on a busy machine took more
    # than the 5 s of six attempts (CI saw kopf give up on a PATCH while the plane restarted)
    settings.networking.error_backoffs = [0.5, 1, 1, 2, 2, 4, 4, 8]
    settings.watching.reconnect_backoff = 0.2


def test_a_kopf_operator_passes_through_a_restart_of_the_api_server_with_fail_on_errors_on(
    restartable_plane: ControlPlane, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.syspath_prepend(str(SAMPLES.parent))
    with (
        run_context("test-scope"),
        plane_cluster(restartable_plane, "restarted") as cluster,
        cluster.namespace(prefix="retries") as ns,
        run_kopf(SAMPLES / "kopf_mirror.py", cluster, namespaces=[ns], configure=quick_retries) as op,
    ):
        cluster.create(configmap("before", ns, {"k": "v"}, labels=MIRROR))
        eventually(lambda: cluster.get(configmap_ref("before-kopf", ns))["data"] == {"k": "v"}, timeout=60)

        restartable_plane.restart()  # etcd, kube-apiserver: stopped, then started on the same ports

        cluster.create(configmap("after", ns, {"k": "new"}, labels=MIRROR))
        eventually(lambda: cluster.get(configmap_ref("after-kopf", ns))["data"] == {"k": "new"}, timeout=60)
        eventually(lambda: op.pending_request_retries == [])
        check_health()
        assert op.error is None
    assert op.error is None
    assert "Request attempt #1/9 failed; will retry" in op.logs


@dataclass
class AwayForGood:
    """What two operators did when the API server went away for good, as a test ending then sees."""

    health_while_retrying: BaseException | None  # check_health() while 'pending' was retrying
    pending_close: BaseException | None  # closing 'pending' (the end of its test) while it retried
    gives_up_health: BaseException | None  # check_health() once 'gives-up' had run out of attempts


def slow_retries(settings: Any) -> None:
    settings.networking.error_backoffs = [2] * 10  # kopf gives up after 20 s, later than the test ends


@pytest.fixture(scope="module")
def away_for_good(shared_restartable_plane: ControlPlane) -> AwayForGood:
    """Two kopf operators, each in a run context of its own (its own health checks), on the
    restartable plane; then its API server stopped for good (once for both: it is not started
    again while they run). Once both have been seen, the plane is restarted for the next test.

    'pending' (slow retries) is checked and closed first, well within its 20 s of attempts;
    'gives-up' (quick retries: 22.5 s) is then waited for until it gives up."""
    plane = shared_restartable_plane
    plane.check()
    try:
        return seen_away_for_good(plane)
    finally:
        plane.restart()  # on the same etcd data: the same plane, serving again


def seen_away_for_good(plane: ControlPlane) -> AwayForGood:
    """What ``away_for_good`` runs on the serving ``plane``."""
    seen: dict[str, BaseException | None] = dict.fromkeys(("health", "pending", "gives-up"))
    with pytest.MonkeyPatch.context() as monkeypatch, contextlib.ExitStack() as operators:
        monkeypatch.syspath_prepend(str(SAMPLES.parent))
        cluster = operators.enter_context(plane_cluster(plane, "stopped"))
        operators.enter_context(run_context("test-scope"))
        # Namespaces the plane need not have: nothing is left to clean up there.
        with run_context("gives-up-scope") as giving_up:
            gives_up = run_kopf(SAMPLES / "kopf_mirror.py", cluster, namespaces=["unreachable"],
                                configure=quick_retries, name="gives-up")
            operators.callback(gives_up.close)
        with run_context("pending-scope"), contextlib.ExitStack() as unless_closed_below:
            pending = run_kopf(SAMPLES / "kopf_mirror.py", cluster, namespaces=["unreachable"],
                               configure=slow_retries, name="pending")
            unless_closed_below.callback(pending.close)
            plane.processes()["kube-apiserver"].stop()  # away for longer than kopf retries
            wait_for(lambda: len(pending.pending_request_retries) > 0)
            try:
                check_health()  # kopf is retrying, within its attempts: no failure yet
            except Exception as error:
                seen["health"] = error
            unless_closed_below.pop_all()
            try:
                pending.close()  # the end of the test
            except OperatorError as error:
                seen["pending"] = error
        with use_context(giving_up):
            try:
                eventually(lambda: check_health() or False, timeout=60)
            except OperatorError as error:
                seen["gives-up"] = error
    return AwayForGood(seen["health"], seen["pending"], seen["gives-up"])


def test_a_request_kopf_gives_up_on_fails_the_test_naming_it_and_its_last_error(
    away_for_good: AwayForGood,
) -> None:
    assert away_for_good.gives_up_health is not None, "kopf gave up, and no health check failed"
    message = str(away_for_good.gives_up_health)
    assert "operator 'gives-up' (kopf) gave up on its API request GET https://127.0.0.1:" in message
    assert "after 9 attempts" in message
    assert "Its last error: " in message


def test_a_request_still_failing_when_the_test_ends_fails_it_naming_the_request(
    away_for_good: AwayForGood,
) -> None:
    assert away_for_good.health_while_retrying is None, "a failure while kopf was still within its attempts"
    assert away_for_good.pending_close is not None, "the test ended with kopf retrying, and passed"
    message = str(away_for_good.pending_close)
    assert "operator 'pending' (kopf) was still retrying its API request GET https://127.0.0.1:" in message
    assert "when the test ended: attempt #" in message
    assert "failed and no attempt has succeeded since" in message
    assert "Its last error: " in message
