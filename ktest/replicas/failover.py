"""``assert_failover``: the leader goes (killed, or cut off), another replica leads and reconciles
within a bound; the leaderless gap is measured and reported, in the pass case too."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from ktest import run_context
from ktest.errors import OperatorError
from ktest.replicas.replica_set import Failover

if TYPE_CHECKING:
    from ktest.replicas.election import Leadership
    from ktest.replicas.replica_set import OperatorReplicas

_POLL = 0.05
HOW = ("kill", "partition")


def assert_failover(
    op: OperatorReplicas,
    within: float,
    *,
    how: str = "kill",
    trigger: Callable[[], object] | None = None,
    check: Callable[[], object] | None = None,
    timeout: float | None = None,
) -> Failover:
    """Take the leader away (``how``: ``"kill"`` it, or ``"partition"`` it off the API server) and
    assert that another replica leads, and ``check`` passes, within ``within`` seconds.

    The current leader is waited for first (up to ``timeout``, default: the ``eventually``
    timeout). ``trigger()`` runs right after the leader went (create the object the new leader must
    reconcile); ``check()`` is retried until it returns without raising (a reconciled object
    found; any exception but ``OperatorError`` means not yet). Returns the :class:`Failover`
    (``gap``: the leaderless gap measured), also kept in ``op.failovers`` and in the test's report.
    The failure names the gap measured so far and the election's lock with its term (a lease
    duration longer than ``within`` cannot pass).
    """
    __tracebackhide__ = True
    if how not in HOW:
        raise ValueError(f"assert_failover: how={how!r} must be one of {', '.join(map(repr, HOW))}.")
    if isinstance(within, bool) or not isinstance(within, (int, float)) or within <= 0:
        raise ValueError(f"assert_failover: within={within!r} must be a number of seconds above 0.")
    old = op.wait_leader(timeout)
    old_name = op.replicas[old].name
    gone = time.monotonic()
    (op.kill if how == "kill" else op.partition)(old)
    if trigger is not None:
        trigger()
    deadline = gone + within
    new: int | None = None
    led_at = reconciled_at = None
    last_error: BaseException | None = None
    state = op.leadership()
    while True:
        run_context.check_health()
        if new is None:
            state = op.leadership()
            if state.leader is not None and state.leader != old:
                new, led_at = state.leader, time.monotonic()
        if new is not None:
            try:
                if check is not None:
                    check()
            except OperatorError:
                raise
            except Exception as error:  # not reconciled yet: an assertion, a 404 of what it makes
                last_error = error
            else:
                reconciled_at = time.monotonic()
                break
        if time.monotonic() >= deadline:
            raise AssertionError(_missed(op, old_name, how, within, gone, led_at, new, state, last_error))
        time.sleep(_POLL)
    assert led_at is not None
    result = Failover(
        old_name,
        op.replicas[new].name,
        how,
        gap=led_at - gone,
        reconciled=reconciled_at - gone if check is not None else None,
    )
    op.failovers.append(result)
    _report(op)
    return result


def _missed(
    op: OperatorReplicas,
    old: str,
    how: str,
    within: float,
    gone: float,
    led_at: float | None,
    new: int | None,
    state: Leadership,
    last_error: BaseException | None,
) -> str:
    waited = time.monotonic() - gone
    what = "killed" if how == "kill" else "cut off from the API server"
    if new is None:
        head = (
            f"failover missed its bound: {old} was {what} and no other replica of {op.name!r} led within "
            f"{within:g} s; leaderless gap measured: more than {waited:.2f} s."
        )
    else:
        head = (
            f"failover missed its bound: {old} was {what}; {op.replicas[new].name} led after "
            f"{led_at - gone if led_at else 0:.2f} s (the leaderless gap) but check() still failed "
            f"{waited:.2f} s after: {last_error}"
        )
    lines = [head, f"Leader election now: {state.describe(op.names)}."]
    if state.term is not None and state.term >= within:
        lines.append(
            f"Its term, {state.term:g} s after each renewal, is not shorter than the bound {within:g} s: "
            "followers wait it out before they take over, so a failover cannot be quicker. Shorten the "
            "lease duration (controller-runtime: LeaseDuration / --leader-elect-lease-duration; kopf: "
            "settings.peering.lifetime)."
        )
    if state.lock is None:
        lines.append(
            "No replica touched a Lease or KopfPeering: the operator does not seem to run leader election."
        )
    return "\n".join(lines)


def _report(op: OperatorReplicas) -> None:
    if len(op.failovers) == 1:
        run_context.add_report_section(
            f"operator {op.name} failovers", lambda: "\n".join(f.describe() for f in op.failovers)
        )
