"""The front server's routing table: which webhook a request path belongs to, and who answers it.

Rewritten client configs point at ``https://<host>:<port>/<secret>/hook/<index>`` (the front
server strips the secret first); the index names one webhook and its target: a Python handler of
ktest's, or a path on the operator's own webhook server.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ktest.webhooks.handlers import Registration

HOOK_PREFIX = "/hook/"
PROBE_PREFIX = "/ktest-probe/"


@dataclass(frozen=True)
class Route:
    """One webhook as ktest serves it."""

    index: int
    webhook: str  # the webhook's name, or the CRD's name for conversion
    kind: str  # "validating", "mutating" or "conversion"
    failure_policy: str  # "Fail", "Ignore", or "-" for conversion
    timeout_seconds: float
    target_path: str  # the path on the operator's server, e.g. /validate-group-v1-kind
    origin: str  # where the configuration came from (file and document, or "python handler f")
    handler: Registration | None = None  # a Python handler; None: forwarded to the operator

    @property
    def path(self) -> str:
        return f"{HOOK_PREFIX}{self.index}"


class RouteTable:
    """Routes by front path (thread-safe: handlers may be added while the server runs)."""

    def __init__(self) -> None:
        self._routes: dict[int, Route] = {}
        self._lock = threading.Lock()

    def add(self, **fields: Any) -> Route:
        with self._lock:
            route = Route(index=len(self._routes), **fields)
            self._routes[route.index] = route
            return route

    def find(self, path: str) -> Route | None:
        if not path.startswith(HOOK_PREFIX):
            return None
        try:
            index = int(path[len(HOOK_PREFIX) :].split("/", 1)[0])
        except ValueError:
            return None
        with self._lock:
            return self._routes.get(index)

    def __iter__(self) -> Iterator[Route]:
        with self._lock:
            return iter(list(self._routes.values()))
