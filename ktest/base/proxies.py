"""Environment proxies (``HTTPS_PROXY``, ``HTTP_PROXY``, ``ALL_PROXY``, ``NO_PROXY``) and
ktest's own loopback traffic.

Corporate and CI machines often set ``HTTPS_PROXY`` without ``NO_PROXY``. The
``kubernetes`` Python client (which reads them from release 34.1 on) and
Python's ``urllib`` then send every request to the proxy,
``https://127.0.0.1:<port>`` included: a proxy elsewhere cannot reach this
machine's loopback, so every test failed with a 477-line proxy error. ktest's
control planes, ``ktest up`` planes, operator proxies, webhook servers and
operators' ready endpoints all listen on loopback, so ktest's clients of them
never use an environment proxy, and the operators ktest starts as subprocesses
get loopback added to ``NO_PROXY`` (Go's clients, client-go and kubectl among
them, never proxy loopback addresses; Python's do unless ``NO_PROXY`` says
otherwise). A proxy named in a kubeconfig (``proxy-url``) is always honoured.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1")
"""What ktest adds to ``NO_PROXY``: its servers listen on 127.0.0.1."""

PROXY_VARIABLES = ("HTTPS_PROXY", "HTTP_PROXY", "ALL_PROXY")
NO_PROXY_VARIABLES = ("NO_PROXY", "no_proxy")


def is_loopback(url_or_host: str) -> bool:
    """Whether ``url_or_host`` (``https://127.0.0.1:6443``, ``localhost``, ``[::1]``) is this machine's
    loopback."""
    host = urlsplit(url_or_host).hostname if "://" in url_or_host else url_or_host.strip("[]")
    if not host:
        return False
    if host.lower() == "localhost" or host.lower().endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def environment_proxies(env: Mapping[str, str]) -> dict[str, str]:
    """The proxy variables set (non-empty) in ``env``, by their name as spelt there."""
    wanted = {name.lower() for name in PROXY_VARIABLES}
    return {name: value for name, value in env.items() if name.lower() in wanted and value.strip()}


def without_proxy_for_loopback(env: Mapping[str, str]) -> dict[str, str]:
    """``env`` with this machine's loopback added to ``NO_PROXY`` and ``no_proxy`` when a proxy
    variable is set (otherwise unchanged): for the processes ktest starts against its own
    loopback servers. Entries already there are kept; both spellings end up equal, since
    clients differ in which one they read."""
    result = dict(env)
    if not environment_proxies(env):
        return result
    entries: list[str] = []
    for name in NO_PROXY_VARIABLES:
        for entry in env.get(name, "").split(","):
            if entry.strip() and entry.strip() not in entries:
                entries.append(entry.strip())
    entries += [host for host in LOOPBACK_HOSTS if host not in entries]
    for name in NO_PROXY_VARIABLES:
        result[name] = ",".join(entries)
    return result


def proxy_advice(server: str, proxy: str) -> str:
    """What to tell a user whose request to ``server`` failed at the environment proxy ``proxy``."""
    host = urlsplit(server).hostname or server
    return (
        f"the request went to the proxy {proxy} from the environment (HTTPS_PROXY/HTTP_PROXY/"
        f"ALL_PROXY), which could not reach {server}. If {host} is reachable directly, add it "
        f"to NO_PROXY (export NO_PROXY={host}; also no_proxy); otherwise fix the proxy setting"
    )


def direct_to_loopback(configuration: Any, loader: Any = None) -> None:
    """Make a ``kubernetes.client.Configuration`` for a loopback server ignore the environment's
    proxy (before an ``ApiClient`` is made from it: its connection pool is chosen then). A proxy
    the kubeconfig names (``proxy-url``; the ``loader`` that filled ``configuration`` holds it)
    is kept."""
    named = loader is not None and "proxy" in vars(loader)
    if not named and configuration.proxy and is_loopback(str(configuration.host)):
        configuration.proxy = None
