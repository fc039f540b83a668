"""A failing test whose operator made 1,000 API calls: the timeline's size and render time."""

from __future__ import annotations

from ktest.cluster import Cluster
from ktest.operators import OperatorContext, run_callable
from ktest.wait import eventually

CALLS = 1000


def test_a_thousand_calls_then_a_failure(cluster: Cluster, namespace: str) -> None:
    config = cluster.create(
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "counter"}, "data": {"calls": "0"}},
        namespace=namespace,
    )

    def operator(ctx: OperatorContext) -> None:
        ctx.ready()
        for _ in range(CALLS - 1):
            if ctx.stopping:
                return
            ctx.cluster.get(config)
        ctx.cluster.patch(config, {"data": {"calls": str(CALLS)}})
        ctx.stop.wait()

    with run_callable(operator, cluster, name="reader"):
        eventually(lambda: cluster.get(config)["data"]["calls"] == str(CALLS), timeout=60)
        assert cluster.get(config)["data"]["calls"] == "0", "the operator read the ConfigMap 1,000 times"
