"""Free TCP ports on 127.0.0.1 for the control-plane components.

Ports are drawn at random *below* the kernel's ephemeral range, so they never
collide with the local ports the kernel hands to outgoing connections (the API
server opens many to etcd), and each candidate is checked by binding it. A port
can still be taken between the check and the component's own bind; callers
detect that from the component's log (:func:`is_address_in_use`) and retry
with new ports.
"""

from __future__ import annotations

import random
import re
import socket
import threading
import time
from pathlib import Path

_FALLBACK_EPHEMERAL_START = 32768
_LOWEST_PORT = 10000
_RECENT_SECONDS = 60.0

_lock = threading.Lock()
# Ports handed out recently by this process, so two control planes started at
# the same time in one process never get the same port before either binds it.
_recently_handed_out: dict[int, float] = {}


def _ephemeral_start() -> int:
    try:
        text = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text()
        return int(text.split()[0])
    except (OSError, ValueError, IndexError):
        return _FALLBACK_EPHEMERAL_START


def is_free(port: int, host: str = "127.0.0.1") -> bool:
    """True when a Go server (etcd, kube-apiserver) could listen on ``port`` right now.

    Go listeners set SO_REUSEADDR, so connections of a stopped server still in
    TIME_WAIT do not block them; the probe does the same.
    """
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError:
            return False
    return True


def free_ports(count: int, *, prefer: tuple[int, ...] = ()) -> list[int]:
    """``count`` distinct free loopback ports; ``prefer[i]`` is kept for slot i if still free."""
    low, high = _LOWEST_PORT, max(_LOWEST_PORT + 1000, _ephemeral_start() - 1)
    now = time.monotonic()
    chosen: list[int] = []
    with _lock:
        for port, when in list(_recently_handed_out.items()):
            if now - when > _RECENT_SECONDS:
                del _recently_handed_out[port]
        for index in range(count):
            wanted = prefer[index] if index < len(prefer) else 0
            if wanted and wanted not in chosen and is_free(wanted):
                chosen.append(wanted)
                continue
            for _attempt in range(1000):
                candidate = random.randint(low, high)
                if candidate not in chosen and candidate not in _recently_handed_out and is_free(candidate):
                    chosen.append(candidate)
                    break
            else:
                raise OSError(f"no free TCP port found on 127.0.0.1 between {low} and {high}")
        for port in chosen:
            _recently_handed_out[port] = now
    return chosen


_IN_USE = re.compile(r"address already in use|bind: address|failed to listen", re.IGNORECASE)


def is_address_in_use(log_text: str) -> bool:
    """True when a component's log says it could not bind its port."""
    return bool(_IN_USE.search(log_text))
