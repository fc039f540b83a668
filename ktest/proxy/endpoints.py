"""Which local addresses are operator proxies, and for which API server: the in-process conflict
injector (``ktest.assertions.conflict_injection``) recognises an operator's writes by where they
go, which behind a proxy is the proxy. Entries live exactly as long as their proxy listens.
"""

from __future__ import annotations

import threading

Address = tuple[str, int]

_lock = threading.Lock()
_upstreams: dict[Address, Address] = {}


def register(proxy: Address, upstream: Address) -> None:
    with _lock:
        _upstreams[proxy] = upstream


def unregister(proxy: Address) -> None:
    with _lock:
        _upstreams.pop(proxy, None)


def upstream_of(host: str, port: int | None) -> Address | None:
    """The API server a proxy listening on ``host:port`` forwards to, or None."""
    if port is None:
        return None
    with _lock:
        return _upstreams.get((host, port))
