"""A flood of connections to the webhook front server fails no admission call (issue 50.4).

At its cap (``MAX_CONNECTIONS``) the front server closed its oldest connection not serving a
call, and the API server's kept-alive connection, idle between two calls, was often that one:
under a flood of new connections 2 to 3 % of admission calls failed and more were delayed. Now a
connection that passed the client-certificate check (the embedded control plane's API server
presents one) or carried the path secret is never closed to make room, and the listener queues
128 connections (socketserver's default: 5).
"""

from __future__ import annotations

import contextlib
import os
import socket
import threading
from collections import deque
from typing import Any

import pytest
from builders import configmap
from processes import tcp_sockets
from webhook_handlers import forbidden_key_guard

from ktest.cluster import Cluster
from ktest.webhooks import server as front_server

CALLS = 150
HELD_BY_THE_FLOOD = 400


class Flood:
    """Another local user: connects to ``port`` again and again and never says a word; holds
    up to ``HELD_BY_THE_FLOOD`` connections (closing its oldest), far beyond the server's cap."""

    def __init__(self, host: str, port: int) -> None:
        self.address = (host, port)
        self.connections = 0
        self._held: deque[socket.socket] = deque()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="flood", daemon=True)

    def __enter__(self) -> Flood:
        self._thread.start()
        return self

    def __exit__(self, *_: Any) -> None:
        self._stop.set()
        self._thread.join(30)
        while self._held:
            self._held.popleft().close()

    def _run(self) -> None:
        while not self._stop.is_set():
            with contextlib.suppress(OSError):
                self._held.append(socket.create_connection(self.address, timeout=1))
                self.connections += 1
            while len(self._held) > HELD_BY_THE_FLOOD:
                self._held.popleft().close()


def _clients_of(port: int) -> set[str]:
    """The peers (``HEXADDR:HEXPORT``) of the established connections this process accepted on
    ``port``."""
    return {
        remote for _, local, remote, state in tcp_sockets(os.getpid())
        if state == "01" and int(local.rsplit(":", 1)[1], 16) == port
    }


@pytest.mark.slow
def test_admission_calls_all_pass_through_a_flood_of_new_connections(
    cluster: Cluster, namespace: str, webhooks: Any
) -> None:
    wh = webhooks(handlers=forbidden_key_guard())
    assert wh.server is not None
    cluster.create(configmap("before", namespace))  # the API server's connection, kept alive
    api_server = _clients_of(wh.server.port)
    assert api_server, "the API server keeps no connection to the front server"
    with Flood(wh.host, wh.server.port) as flood:
        failures = []
        for number in range(CALLS):
            try:
                cluster.create(configmap(f"during-{number}", namespace))
            except Exception as error:  # every failure counts, whatever it is
                failures.append(f"during-{number}: {error}")
        flooded = flood.connections
        # never closed to make room: the API server's connection served every call
        kept = api_server & _clients_of(wh.server.port)
    assert failures == [], f"{len(failures)} of {CALLS} admission calls failed:\n" + "\n".join(failures[:5])
    assert kept == api_server, f"the API server's connections {sorted(api_server)}: only {sorted(kept)} kept"
    assert flooded >= 2 * front_server.MAX_CONNECTIONS, f"the flood made only {flooded} connections"
    served = [call for call in wh.calls if call.object.startswith("ConfigMap") and "during-" in call.object]
    assert len(served) == CALLS and all(not call.error for call in served), [c.describe() for c in served]
