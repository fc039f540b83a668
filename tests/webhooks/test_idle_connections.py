"""Idle connections to the webhook front server pin no threads of the test process.

The front server listens where other local users (bare) or Pods (kind) can connect. Each
connection gets a thread; the TLS handshake used to run in it with no timeout, so 300
connections that never said a word held about 285 threads for as long as their client liked.
Now a listener holds at most ``MAX_CONNECTIONS``, each must finish its handshake within
``HANDSHAKE_TIMEOUT``, and at the cap the oldest idle connection makes room for the new one:
the API server still gets through.
"""

from __future__ import annotations

import socket
import threading
from typing import Any

import pytest
from builders import configmap
from connections import closed_by_server
from webhook_handlers import forbidden_key_guard

from ktest.cluster import Cluster
from ktest.errors.api import ApiError
from ktest.wait import eventually
from ktest.webhooks.server import HANDSHAKE_TIMEOUT, MAX_CONNECTIONS

OVER_THE_CAP = 16


def _connect(host: str, port: int) -> socket.socket:
    connection = socket.create_connection((host, port), timeout=5)
    connection.setblocking(False)
    return connection


def test_idle_connections_are_capped_and_timed_out_and_the_api_server_still_gets_through(
    cluster: Cluster, namespace: str, webhooks: Any
) -> None:
    wh = webhooks(handlers=forbidden_key_guard())
    assert wh.server is not None
    cluster.create(configmap("before", namespace))
    baseline = threading.active_count()

    # Another user connects again and again and never starts the TLS handshake.
    idle = [_connect(wh.host, wh.server.port) for _ in range(MAX_CONNECTIONS + OVER_THE_CAP)]
    try:
        # The listener holds no more than its cap: the oldest idle connections are closed.
        def held_within_the_cap() -> None:
            closed = sum(closed_by_server(connection) for connection in idle)
            assert closed >= OVER_THE_CAP, f"{len(idle) - closed} of {len(idle)} idle connections held"

        eventually(held_within_the_cap, timeout=5)
        # one thread per connection held (the API server's kept-alive one was among them, and
        # made room too); the closed ones' threads end at once
        eventually(lambda: threading.active_count() <= baseline + MAX_CONNECTIONS, timeout=5)

        # While they are held, the API server's admission call is served (the handler denies).
        with pytest.raises(ApiError, match=r"data\.forbidden is not allowed"):
            cluster.create(configmap("during", namespace, {"forbidden": "x"}))
        assert any("during" in call.object for call in wh.calls), [call.describe() for call in wh.calls]

        # Within the handshake timeout every idle connection is closed and its thread gone
        # (one more thread at most: the API server's own kept-alive connection).
        eventually(lambda: all(closed_by_server(connection) for connection in idle),
                   timeout=HANDSHAKE_TIMEOUT + 10)
        eventually(lambda: threading.active_count() <= baseline + 1, timeout=5)
    finally:
        for connection in idle:
            connection.close()
    cluster.create(configmap("after", namespace))
