"""The ``kubelet`` fixture: what the simulated kubelet does to one test's Pods (:mod:`ktest.nodes`)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from ktest.cluster import Cluster
    from ktest.nodes import Kubelet

_STAGES = ("kwok.x-k8s.io/v1alpha1", "Stage")


@pytest.fixture
def kubelet(cluster: Cluster, namespace: str, request: pytest.FixtureRequest) -> Iterator[Kubelet]:
    """Pod behaviours for this test's namespace: ``kubelet.crash_loop("app=web")``,
    ``.oom_killed``, ``.image_pull_error``, ``.not_ready``, ``.slow_start(5)``, ``.complete``,
    ``.fail``, ``.evict``, ``.node_not_ready(node)``. Removed at the end of the test; a selector
    that matched no Pod fails the test. Needs simulated nodes (``--ktest-nodes 3``); elsewhere the
    test is skipped with the reason (a real kubelet cannot be told to crash a container)."""
    from ktest.nodes import Kubelet, SimulationError

    if not cluster.discovery.served(*_STAGES):
        pytest.skip(
            "the kubelet fixture needs simulated nodes (backend bare with ktest_nodes > 0, e.g. "
            "--ktest-nodes 3): this cluster runs no KWOK (no kwok.x-k8s.io Stage API)"
        )
    simulated = Kubelet(cluster, namespace)
    yield simulated
    from ktest.plugin.session import REPORTS_KEY

    call = request.node.stash.get(REPORTS_KEY, {}).get("call")
    try:
        simulated.close(check=call is not None and call.passed)
    except SimulationError as error:
        pytest.fail(str(error), pytrace=False)
