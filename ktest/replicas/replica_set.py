"""``OperatorReplicas``: N instances of one operator run side by side, as a Deployment of N
replicas runs them, each behind its own proxy (its own record, its own network cut) and log.

The runners (``run_kopf``, ``run_subprocess``, ``run_callable``) reach :func:`start_replicas` by
name through :mod:`ktest.addon_registry` when given ``replicas=N`` (N > 1).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Generic, TypeVar

from ktest import run_context
from ktest.base.closing import StartedIfNew
from ktest.errors import OperatorError
from ktest.replicas.election import Leadership, leadership

if TYPE_CHECKING:
    from typing_extensions import Self

    from ktest.cluster import Cluster
    from ktest.operators import OperatorHandle

H = TypeVar("H", bound="OperatorHandle")

_POLL = 0.05
KILL_GRACE = 0.5
"""Seconds an in-process replica's threads get to end when killed before its loop is stopped."""
CUT_OFF = "it is cut off from the API server (op.partition({index}))"
KILLED = "it is being killed (op.kill({index}))"


@dataclass(frozen=True)
class Failover:
    """What one failover took."""

    old_leader: str
    new_leader: str
    how: str
    """"kill" or "partition"."""
    gap: float
    """The leaderless gap: seconds from the old leader's end until another replica led."""
    reconciled: float | None
    """Seconds from the old leader's end until ``check`` passed (None: no check given)."""

    def describe(self) -> str:
        text = f"{self.old_leader} ({self.how}) -> {self.new_leader}: leaderless for {self.gap:.2f} s"
        if self.reconciled is not None:
            text += f", reconciled after {self.reconciled:.2f} s"
        return text


class OperatorReplicas(StartedIfNew, Generic[H]):
    """Replicas ``<name>-0`` .. ``<name>-<N-1>`` of one operator: ``op.replicas`` (their handles),
    ``op.kill(i)``, ``op.partition(i)`` / ``op.heal(i)``, ``op.restart(i)``, ``op.leader()``;
    a context manager that stops them all on exit."""

    CLOSE_ERRORS_HIDDEN = (OperatorError,)

    def __init__(self, runner: str, replicas: list[H]) -> None:
        self.runner = runner
        self.replicas = replicas
        """Each replica's own handle (``logs``, ``traffic``, ``alive``...), in order."""
        self.name = replicas[0].name.rpartition("-")[0]
        self.cluster: Cluster = replicas[0].cluster
        self.events: list[tuple[float, str]] = []
        """What was done to the replicas, as (monotonic time, text): started, killed, partitioned, healed."""
        self.failovers: list[Failover] = []
        """What each ``assert_failover`` measured, in order."""
        self._partitioned: set[int] = set()
        self._led_when_cut: set[int] = set()
        self._killed: set[int] = set()  # their proxies stay cut until restart()

    # ------------------------------------------------------------ lifecycle

    def start(self, *, wait: bool = True) -> Self:
        """Start every replica (all at once), then, with ``wait``, wait until each is ready. If one
        fails, every replica is stopped and the error raised: nothing is left running."""
        try:
            for replica in self.replicas:
                replica.start(wait=False)
            self._note("started")
            if wait:
                for replica in self.replicas:
                    replica.wait_ready()
        except BaseException:
            self._close_quietly()
            raise
        return self

    def wait_ready(self, timeout: float | None = None) -> Self:
        """Block until every replica that runs is ready (``OperatorError`` if one fails first)."""
        for replica in self.replicas:
            if replica.state == "running":
                replica.wait_ready(timeout)
        return self

    def kill(self, index: int) -> None:
        """End replica ``index`` abruptly, like a killed pod: it releases nothing, so its peers wait
        out its lease or peering lifetime. A subprocess gets SIGKILL; an in-process replica's proxy
        is cut first (no farewell of kopf to its peers gets out) and its threads are ended, its
        event loop stopped after ``KILL_GRACE`` s. :meth:`restart` reconnects it."""
        replica = self._replica(index, "kill")
        if replica.proxy is not None and not replica.proxy.partitioned:
            replica.proxy.partition(why="killed")
            self._killed.add(index)
        replica.excused = KILLED.format(index=index)
        try:
            replica.crash(grace=KILL_GRACE)
        finally:
            replica.acknowledge_error()  # what it logged while dying is the kill's, not a failure
            replica.excused = None
        self._note(f"killed {replica.name}")

    def partition(self, index: int) -> None:
        """Cut replica ``index`` off from the API server, as a network partition would: its proxy
        ends its connections (watches too) and forwards nothing until :meth:`heal`. What it does
        meanwhile (log errors, exit because it lost its lease, as controller-runtime does) is the
        expected consequence, not a failure of the test."""
        replica = self._replica(index, "partition")
        if replica.proxy is None:
            raise OperatorError(f"op.partition({index}): replica {replica.name!r} has not been started.")
        if self.leader() == index:
            self._led_when_cut.add(index)
        replica.excused = CUT_OFF.format(index=index)
        self._partitioned.add(index)
        replica.proxy.partition()
        self._note(f"partitioned {replica.name}")

    def heal(self, index: int, *, timeout: float | None = None) -> None:
        """Reconnect replica ``index`` after :meth:`partition`. Errors it had while cut off are
        forgotten; one that exited meanwhile is started again, as the kubelet restarts a pod whose
        container exited.

        A replica cut off while it held the election's Lease, which another replica holds now, has
        given up leading (client-go stops at its renew deadline, before the term ends) and may
        still be on its way out, as controller-runtime exits then: its exit is awaited, for up to
        ``timeout`` s (default: the ``eventually`` timeout), still as the cut's consequence."""
        replica = self._replica(index, "heal")
        if index not in self._partitioned:
            raise OperatorError(
                f"op.heal({index}): replica {replica.name!r} is not partitioned; heal() undoes "
                f"partition({index}). Partitioned now: {self._names(self._partitioned) or 'none'}."
            )
        assert replica.proxy is not None
        replica.proxy.heal()
        self._partitioned.discard(index)
        if index in self._led_when_cut:
            self._led_when_cut.discard(index)
            self._await_deposed_exit(index, timeout)
        replica.acknowledge_error()
        replica.excused = None
        self._note(f"healed {replica.name}")
        if replica.state in ("running", "stopped") and not replica.alive:
            replica.restart()
            self._note(f"restarted {replica.name} (it exited while cut off)")

    def restart(self, index: int, *, wait: bool = True) -> None:
        """Start replica ``index`` again (after :meth:`kill`, say), as a new pod would be."""
        replica = self._replica(index, "restart")
        if index in self._killed and replica.proxy is not None:
            replica.proxy.heal()
            self._killed.discard(index)
        replica.restart(wait=wait)
        self._note(f"restarted {replica.name}")

    def stop(self) -> None:
        """Stop every replica (gracefully: each releases what it holds)."""
        self._each(lambda replica: replica.stop() if replica.state == "running" else None)

    def close(self) -> None:
        """Stop every replica and leave the test run; raise the first error no check reported."""
        for index in sorted(self._partitioned):
            self._end_cut_off(index)
        self._each(lambda replica: replica.close())

    def _await_deposed_exit(self, index: int, timeout: float | None) -> None:
        """Wait while replica ``index``, deposed from the Lease it held when cut off, still runs."""
        from ktest.wait import current_defaults

        state = self.leadership()
        if state.lock is None or state.lock.resource != "leases" or state.leader in (None, index):
            return
        deadline = time.monotonic() + (current_defaults().timeout if timeout is None else timeout)
        replica = self.replicas[index]
        while replica.alive and time.monotonic() < deadline:
            time.sleep(_POLL)

    def _end_cut_off(self, index: int) -> None:
        replica = self.replicas[index]
        replica.crash()  # nothing to judge in a run that was cut off: its errors are the cut's
        replica.acknowledge_error()
        replica.excused = None
        if replica.proxy is not None:
            replica.proxy.heal()
        self._partitioned.discard(index)
        self._led_when_cut.discard(index)

    def _each(self, action: Callable[[H], object]) -> None:
        errors = []
        for replica in self.replicas:
            try:
                action(replica)
            except OperatorError as error:
                errors.append(error)
        if errors:
            raise errors[0]

    def _close_quietly(self) -> None:
        for index in sorted(self._partitioned):
            self._end_cut_off(index)
        for replica in self.replicas:
            with contextlib.suppress(OperatorError):
                replica.close()

    def _is_new(self) -> bool:
        return all(replica.state == "new" for replica in self.replicas)

    # ------------------------------------------------------------ who leads

    def leadership(self) -> Leadership:
        """What the election's lock (Lease, KopfPeering) and the writes say about who leads now."""
        connected = [index not in self._partitioned for index in range(len(self.replicas))]
        return leadership(self.cluster, self.replicas, connected)

    def leader(self) -> int | None:
        """The replica leading now: the holder of the election's lock, alive and connected; None
        while nobody does (no lock yet, the holder killed or cut off and its term not over)."""
        return self.leadership().leader

    def wait_leader(self, timeout: float | None = None) -> int:
        """The leader, once there is one; ``AssertionError`` after ``timeout`` s (default: the
        ``eventually`` timeout) naming what the lock said."""
        from ktest.wait import current_defaults

        timeout = current_defaults().timeout if timeout is None else timeout
        deadline = time.monotonic() + timeout
        while True:
            run_context.check_health()
            state = self.leadership()
            if state.leader is not None:
                return state.leader
            if time.monotonic() >= deadline:
                raise AssertionError(
                    f"no replica of {self.name!r} led within {timeout:g} s: {state.describe(self.names)}."
                )
            time.sleep(_POLL)

    # ------------------------------------------------------------ reading

    @property
    def names(self) -> list[str]:
        return [replica.name for replica in self.replicas]

    @property
    def partitioned(self) -> list[int]:
        """The replicas cut off now."""
        return sorted(self._partitioned)

    @property
    def alive(self) -> list[int]:
        """The replicas running now."""
        return [index for index, replica in enumerate(self.replicas) if replica.alive]

    @property
    def logs(self) -> dict[str, str]:
        """Each replica's log, by name."""
        return {replica.name: replica.logs for replica in self.replicas}

    def __len__(self) -> int:
        return len(self.replicas)

    def __getitem__(self, index: int) -> H:
        return self._replica(index, "op[...]", check_index_only=True)

    def __iter__(self) -> Iterator[H]:
        return iter(self.replicas)

    def __repr__(self) -> str:
        states = ", ".join(f"{replica.name} {replica.state}" for replica in self.replicas)
        return f"<OperatorReplicas {self.name!r}: {states}>"

    # ------------------------------------------------------------ internals

    def _replica(self, index: int, action: str, *, check_index_only: bool = False) -> H:
        count = len(self.replicas)
        if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < count:
            call = action if check_index_only else f"op.{action}({index!r})"
            raise OperatorError(
                f"{call}: there is no replica {index!r}; operator {self.name!r} runs {count} replicas, "
                f"numbered 0 to {count - 1} ({', '.join(self.names)})."
            )
        return self.replicas[index]

    def _names(self, indices: set[int]) -> str:
        return ", ".join(self.replicas[index].name for index in sorted(indices))

    def _note(self, text: str) -> None:
        self.events.append((time.monotonic(), text))
        for replica in self.replicas:
            if replica.proxy is not None:
                replica.proxy.traffic.note(f"replicas: {text}")


def start_replicas(runner: str, make: Callable[[int], H], count: int, wait: bool) -> OperatorReplicas[H]:
    """Make ``count`` replicas with ``make(i)`` and start them (the runners' ``replicas=``)."""
    replicas = [make(index) for index in range(count)]
    without = [replica.name for replica in replicas if not replica.use_proxy]
    if without:
        raise OperatorError(
            f"{runner}(..., replicas={count}) needs ktest's API proxy for every replica (to tell who "
            f"wrote, and to partition one), but it is off ({', '.join(without)}): drop proxy=False "
            "or turn the setting ktest_operator_proxy on."
        )
    return OperatorReplicas(runner, replicas).start(wait=wait)
