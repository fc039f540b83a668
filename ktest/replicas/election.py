"""Who leads a replicated operator: the lock its own leader election keeps (a coordination.k8s.io
Lease, as controller-runtime and client-go keep it; kopf's KopfPeering or ClusterKopfPeering),
found in the replicas' traffic and read from the API server, and who writes.

Nothing here changes how the operator elects: ktest reads what it wrote. A Lease names its holder
by an identity of the operator's choosing (controller-runtime: ``<hostname>_<uuid>``), so the
holder is the replica that last renewed it (only the holder writes a Lease it holds); kopf's
peers are named by identity, which ktest sets to the replica's name.
"""

from __future__ import annotations

import datetime
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ktest.cluster import Cluster
    from ktest.operators import OperatorHandle
    from ktest.proxy import Call
    from ktest.proxy.api_request import ApiRequest

LOCK_KINDS = {
    "leases": ("coordination.k8s.io/v1", "Lease"),
    "kopfpeerings": ("kopf.dev/v1", "KopfPeering"),
    "clusterkopfpeerings": ("kopf.dev/v1", "ClusterKopfPeering"),
}
"""The resources leader election keeps its lock in -> (apiVersion, kind)."""


@dataclass(frozen=True)
class Lock:
    """The object a replicated operator elects its leader in."""

    resource: str
    namespace: str | None
    name: str

    @property
    def kind(self) -> str:
        return LOCK_KINDS[self.resource][1]

    def ref(self) -> tuple[str, ...]:
        api_version, kind = LOCK_KINDS[self.resource]
        if self.namespace:
            return (api_version, kind, self.name, self.namespace)
        return (api_version, kind, self.name)

    def describe(self) -> str:
        where = f"{self.namespace}/{self.name}" if self.namespace else self.name
        return f"{self.kind} {where}"


@dataclass(frozen=True)
class Leadership:
    """What the lock and the writes say about who leads, now."""

    lock: Lock | None
    """The election's lock, None while no replica has touched one (no leader election)."""
    holder: str | None
    """The holder as the lock names it (a Lease's ``holderIdentity``; kopf's leading peer)."""
    leader: int | None
    """The replica that holds the lock, alive and connected; None: nobody leads now."""
    expired: bool
    """The lock names a holder whose term has run out (lease duration, peering lifetime)."""
    term: float | None
    """Seconds a holder's term lasts after its last renewal: ``leaseDurationSeconds``, kopf's lifetime."""
    last_writer: int | None
    """The replica that last wrote an object other than the lock (who works, whatever the lock says)."""

    def describe(self, names: Sequence[str]) -> str:
        if self.lock is None:
            return "no replica has touched a Lease or KopfPeering yet (does it run leader election?)"
        holder = repr(self.holder) if self.holder else "nobody"
        term = f", term {self.term:g} s after each renewal" if self.term is not None else ""
        state = " (expired)" if self.expired else ""
        leader = names[self.leader] if self.leader is not None else "no live replica"
        return f"{self.lock.describe()} names {holder}{state}{term}: {leader} leads"


def absolute(replica: OperatorHandle, call: Call) -> float:
    """When ``call`` was made, on the monotonic clock (each proxy's record counts from its own start)."""
    return replica.traffic.started + call.at


def find_lock(replicas: Sequence[OperatorHandle]) -> Lock | None:
    """The lock the replicas elect in: the Lease or KopfPeering they read or wrote by name."""
    seen: dict[Lock, float] = {}
    for replica in replicas:
        if replica.proxy is None:
            continue
        for call in replica.traffic.calls():
            request = call.request
            if request.resource in LOCK_KINDS and request.name and not request.is_watch:
                lock = Lock(request.resource, request.namespace, request.name)
                seen[lock] = max(seen.get(lock, 0.0), absolute(replica, call))
    if not seen:
        return None
    return max(seen, key=lambda lock: seen[lock])  # the most recently used


def succeeded(call: Call) -> bool:
    return call.status is not None and 200 <= call.status < 300 and not call.answered_by_fault


def last_write(replica: OperatorHandle, *, lock: Lock | None, of_lock: bool) -> float | None:
    """When ``replica`` last wrote the lock (``of_lock``) or anything else, successfully."""
    if replica.proxy is None:
        return None
    latest = None
    for call in replica.traffic.calls():
        if not call.is_write or not succeeded(call):
            continue
        request = call.request
        is_lock = request.resource in LOCK_KINDS
        if of_lock and not (lock is not None and is_lock and _names_lock(request, lock)):
            continue
        if not of_lock and is_lock:
            continue
        latest = absolute(replica, call)
    return latest


def _names_lock(request: ApiRequest, lock: Lock) -> bool:
    """Whether a write is of ``lock``: by name, or a create in its namespace whose (protobuf) body
    the proxy could not read the name from, as client-go creates a Lease."""
    if request.resource != lock.resource or request.namespace != lock.namespace:
        return False
    return request.name == lock.name or (request.verb == "create" and request.name is None)


def leadership(cluster: Cluster, replicas: Sequence[OperatorHandle], connected: Sequence[bool]) -> Leadership:
    """Who leads now, by the lock (read from ``cluster``) and by the writes."""
    lock = find_lock(replicas)
    writes = [last_write(replica, lock=lock, of_lock=False) for replica in replicas]
    last_writer = _latest(writes)
    if lock is None:
        return Leadership(None, None, None, False, None, last_writer)
    body = cluster.get_or_none(lock.ref())
    if body is None:
        return Leadership(lock, None, None, False, None, last_writer)
    if lock.resource == "leases":
        holder, expired, term, index = _lease_holder(body, replicas, lock)
    else:
        holder, expired, term, index = _peering_leader(body, replicas)
    serving = index is not None and not expired and _serving(replicas[index], connected[index])
    leader = index if serving else None
    return Leadership(lock, holder, leader, expired, term, last_writer)


def _serving(replica: OperatorHandle, connected: bool) -> bool:
    return connected and replica.alive


def _latest(times: Sequence[float | None]) -> int | None:
    known = [(time, index) for index, time in enumerate(times) if time is not None]
    return max(known)[1] if known else None


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.timezone.utc)


def _parse_time(text: Any) -> datetime.datetime | None:
    if not isinstance(text, str) or not text:
        return None
    try:
        return datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None


def _lease_holder(
    body: dict[str, Any], replicas: Sequence[OperatorHandle], lock: Lock
) -> tuple[str | None, bool, float | None, int | None]:
    spec = body.get("spec") or {}
    holder = spec.get("holderIdentity") or None
    term = spec.get("leaseDurationSeconds")
    renewed = _parse_time(spec.get("renewTime")) or _parse_time(spec.get("acquireTime"))
    expired = bool(
        holder and term is not None and renewed is not None
        and renewed + datetime.timedelta(seconds=float(term)) < _now()
    )
    if not holder:
        return None, False, float(term) if term is not None else None, None
    # Only the holder writes a Lease it holds: the last replica to write it is the holder.
    index = _latest([last_write(replica, lock=lock, of_lock=True) for replica in replicas])
    return holder, expired, float(term) if term is not None else None, index


def _peering_leader(
    body: dict[str, Any], replicas: Sequence[OperatorHandle]
) -> tuple[str | None, bool, float | None, int | None]:
    names = [replica.name for replica in replicas]
    peers = []
    for identity, info in (body.get("status") or {}).items():
        if not isinstance(info, dict):
            continue
        seen = _parse_time(info.get("lastseen"))
        lifetime = float(info.get("lifetime", 60))
        alive = seen is not None and seen + datetime.timedelta(seconds=lifetime) > _now()
        peers.append((int(info.get("priority", 0)), alive, lifetime, identity))
    if not peers:
        return None, False, None, None
    _, alive, lifetime, identity = max(peers, key=lambda peer: (peer[1], peer[0]))
    index = names.index(identity) if identity in names else None
    return identity, not alive, lifetime, index
