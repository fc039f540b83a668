"""Replicas: bad input is one clear error, a failed start leaves nothing running, and
``replicas=1`` is today's single handle."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from ktest.cluster import Cluster
from ktest.errors import OperatorError
from ktest.operators import CallableOperator, OperatorContext, run_callable, run_kopf, run_subprocess
from ktest.replicas import OperatorReplicas, assert_failover, assert_single_writer


def idle(ctx: OperatorContext) -> None:
    ctx.ready()
    ctx.stop.wait()  # type: ignore[call-arg]


@pytest.mark.parametrize("replicas", [0, -1, True, 1.5, "2"])
@pytest.mark.parametrize("runner", ["run_callable", "run_kopf", "run_subprocess"])
def test_replicas_below_one_or_not_a_count_is_a_value_error(
    admin: Cluster, runner: str, replicas: Any
) -> None:
    start = {
        "run_callable": lambda: run_callable(idle, admin, replicas=replicas),
        "run_kopf": lambda: run_kopf("kopf_stamp", admin, replicas=replicas),
        "run_subprocess": lambda: run_subprocess(["true"], admin, replicas=replicas),
    }[runner]
    before = threading.active_count()
    expected = rf"^{runner}: replicas={replicas!r} must be a whole number of at least 1"
    with pytest.raises(ValueError, match=expected):
        start()
    assert threading.active_count() == before


@pytest.mark.slow
def test_replicas_1_is_the_single_handle_of_today(admin: Cluster) -> None:
    with run_callable(idle, admin, replicas=1, name="single") as op:
        assert type(op) is CallableOperator and op.name == "single" and op.replica is None


def test_a_replica_that_fails_to_start_stops_them_all(admin: Cluster) -> None:
    started: list[str] = []

    def second_fails(ctx: OperatorContext) -> None:
        started.append(ctx.name)
        if ctx.name.endswith("-1"):
            raise RuntimeError("replica 1 cannot start")
        idle(ctx)

    with pytest.raises(OperatorError, match=r"operator 'flaky-1' .*replica 1 cannot start"):
        run_callable(second_fails, admin, replicas=3, name="flaky")
    assert sorted(started) == ["flaky-0", "flaky-1", "flaky-2"]
    left = [thread.name for thread in threading.enumerate() if "flaky" in thread.name]
    assert left == []  # no operator thread, no proxy thread


def test_replica_numbers_and_assertion_arguments_are_checked(admin: Cluster) -> None:
    with run_callable(idle, admin, replicas=2, name="pair") as op:
        assert isinstance(op, OperatorReplicas) and op.names == ["pair-0", "pair-1"]
        with pytest.raises(OperatorError, match=r"^op.partition\(2\): there is no replica 2; operator 'pair' "
                           r"runs 2 replicas, numbered 0 to 1 \(pair-0, pair-1\)\.$"):
            op.partition(2)
        with pytest.raises(OperatorError, match=r"^op.heal\(0\): replica 'pair-0' is not partitioned"):
            op.heal(0)
        with pytest.raises(OperatorError, match=r"^op.kill\(-1\): there is no replica -1"):
            op.kill(-1)
        with pytest.raises(ValueError, match=r"^assert_failover: how='drain' must be one of 'kill', "):
            assert_failover(op, within=1, how="drain")
        with pytest.raises(ValueError, match=r"^assert_single_writer: window=-1 must be seconds"):
            assert_single_writer(op, window=-1)
        no_leader = r"no replica of 'pair' led within 0.2 s: no replica has touched a Lease or KopfPeering"
        with pytest.raises(AssertionError, match=no_leader):
            op.wait_leader(timeout=0.2)
        op.partition(1)
        assert op.partitioned == [1] and op.replicas[1].proxy is not None and op.replicas[1].proxy.partitioned
        op.heal(1)
        assert op.partitioned == [] and op.replicas[1].alive
    assert all(replica.state == "closed" for replica in op.replicas)


@pytest.mark.slow
def test_each_subprocess_replica_gets_its_own_name_and_port(admin: Cluster) -> None:
    command = ["sh", "-c", 'echo "I am $POD_NAME on {port}"; exec sleep 60']
    with run_subprocess(command, admin, env={"POD_NAME": "{name}"}, ready_log="I am", replicas=2) as op:
        ports = [replica.port for replica in op.replicas]
        assert ports[0] != ports[1]
        for index, replica in enumerate(op.replicas):
            assert f"I am sh-{index} on {ports[index]}" in replica.logs
