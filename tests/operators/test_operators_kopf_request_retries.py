"""kopf's own API-request retries: an API server briefly away (restarted, upgraded) makes kopf log
each failed attempt as an ERROR ("Request attempt #1/9 failed; will retry"); that passes when a
later attempt succeeds, and fails the test, naming the request, when kopf gives up or the request
is still failing when the test ends."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from bare_wiring import plane_cluster
from builders import configmap, configmap_ref
from operator_helpers import SAMPLES, wait_for

from ktest.assets import Assets
from ktest.controlplane import ControlPlane
from ktest.errors import OperatorError
from ktest.operators import run_kopf
from ktest.run_context import check_health, run_context
from ktest.wait import eventually

MIRROR = {"ktest.dev/kopf-copy": "true"}


@pytest.fixture
def own_plane(k8s_assets: Assets) -> Iterator[ControlPlane]:
    """A control plane of this test's own: these tests stop its API server."""
    with ControlPlane(assets=k8s_assets, controllers=None) as cp:
        yield cp


def quick_retries(settings: Any) -> None:
    # nine attempts over 22.5 s: a restart of etcd and the API server on a busy machine took more
    # than the 5 s of six attempts (CI saw kopf give up on a PATCH while the plane restarted)
    settings.networking.error_backoffs = [0.5, 1, 1, 2, 2, 4, 4, 8]
    settings.watching.reconnect_backoff = 0.2


def test_a_kopf_operator_passes_through_a_restart_of_the_api_server_with_fail_on_errors_on(
    own_plane: ControlPlane, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.syspath_prepend(str(SAMPLES.parent))
    with (
        run_context("test-scope"),
        plane_cluster(own_plane, "restarted") as cluster,
        cluster.namespace(prefix="retries") as ns,
        run_kopf(SAMPLES / "kopf_mirror.py", cluster, namespaces=[ns], configure=quick_retries) as op,
    ):
        cluster.create(configmap("before", ns, {"k": "v"}, labels=MIRROR))
        eventually(lambda: cluster.get(configmap_ref("before-kopf", ns))["data"] == {"k": "v"}, timeout=60)

        own_plane.restart()  # etcd, kube-apiserver: stopped, then started on the same ports

        cluster.create(configmap("after", ns, {"k": "new"}, labels=MIRROR))
        eventually(lambda: cluster.get(configmap_ref("after-kopf", ns))["data"] == {"k": "new"}, timeout=60)
        eventually(lambda: op.pending_request_retries == [])
        check_health()
        assert op.error is None
    assert op.error is None
    assert "Request attempt #1/9 failed; will retry" in op.logs


def test_a_request_kopf_gives_up_on_fails_the_test_naming_it_and_its_last_error(
    own_plane: ControlPlane, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.syspath_prepend(str(SAMPLES.parent))
    cluster = plane_cluster(own_plane, "stopped")
    with run_context("test-scope"), cluster:
        op = run_kopf(  # a namespace the plane need not have: nothing is left to clean up there
            SAMPLES / "kopf_mirror.py",
            cluster,
            namespaces=["unreachable"],
            configure=quick_retries,
            name="gives-up",
        )
        try:
            own_plane.stop()  # the API server away for longer than kopf retries
            with pytest.raises(OperatorError) as raised:
                eventually(lambda: check_health() or False, timeout=60)
        finally:
            op.close()
    message = str(raised.value)
    assert "operator 'gives-up' (kopf) gave up on its API request GET https://127.0.0.1:" in message
    assert "after 9 attempts" in message
    assert "Its last error: " in message


def test_a_request_still_failing_when_the_test_ends_fails_it_naming_the_request(
    own_plane: ControlPlane, monkeypatch: pytest.MonkeyPatch
) -> None:
    def slow_retries(settings: Any) -> None:
        settings.networking.error_backoffs = [2] * 10  # kopf gives up after 20 s, later than the test ends

    monkeypatch.syspath_prepend(str(SAMPLES.parent))
    cluster = plane_cluster(own_plane, "stopped")
    with run_context("test-scope"), cluster:
        op = run_kopf(
            SAMPLES / "kopf_mirror.py",
            cluster,
            namespaces=["unreachable"],
            configure=slow_retries,
            name="pending",
        )
        own_plane.stop()
        wait_for(lambda: len(op.pending_request_retries) > 0)
        check_health()  # kopf is retrying, within its attempts: no failure yet
        with pytest.raises(OperatorError) as raised:
            op.close()  # the end of the test
    message = str(raised.value)
    assert "operator 'pending' (kopf) was still retrying its API request GET https://127.0.0.1:" in message
    assert "when the test ended: attempt #" in message
    assert "failed and no attempt has succeeded since" in message
    assert "Its last error: " in message
