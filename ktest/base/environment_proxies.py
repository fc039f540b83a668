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
import os
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
    given = (entry.strip() for name in NO_PROXY_VARIABLES for entry in env.get(name, "").split(","))
    entries = ",".join(dict.fromkeys(entry for entry in (*given, *LOOPBACK_HOSTS) if entry))
    for name in NO_PROXY_VARIABLES:
        result[name] = entries
    return result


def proxy_advice(server: str, proxy: str) -> str:
    """What to tell a user whose request to ``server`` failed going through ``proxy``."""
    host = urlsplit(server).hostname or server
    return (
        f"the request went through the proxy {proxy} (the kubeconfig's proxy-url, or HTTPS_PROXY, "
        f"HTTP_PROXY or ALL_PROXY in the environment), which did not get it to {server}. If {host} "
        f"is reachable directly, add it to NO_PROXY (export NO_PROXY={host} no_proxy={host}); "
        "otherwise check that proxy"
    )


def choose_proxy(configuration: Any, loader: Any = None, env: Mapping[str, str] | None = None) -> None:
    """Set the proxy of a ``kubernetes.client.Configuration`` the way kubectl (client-go) does,
    whatever the client's release (releases before 34.1 ignore the environment, later ones also
    proxy loopback): the kubeconfig's ``proxy-url`` if it names one (the ``loader`` that filled
    ``configuration`` holds it); none for a loopback server; otherwise ``HTTPS_PROXY`` (or
    ``HTTP_PROXY`` for http, or ``ALL_PROXY``) unless ``NO_PROXY`` covers the server. Call it
    before an ``ApiClient`` is made: its connection pool is chosen then."""
    if loader is not None and "proxy" in vars(loader):
        return
    server = str(configuration.host)
    configuration.proxy = None if is_loopback(server) else environment_proxy_for(server, env)


def environment_proxy_for(server: str, env: Mapping[str, str] | None = None) -> str | None:
    """The proxy the environment names for ``server`` (a URL), or None (none set, or ``NO_PROXY``
    covers it: ``*``, a host or domain suffix, an IP or CIDR range, optionally with the port)."""
    values = {name.lower(): value.strip() for name, value in (os.environ if env is None else env).items()}
    url = urlsplit(server)
    proxy = values.get(f"{url.scheme}_proxy") or values.get("all_proxy")
    if not proxy or _bypassed(url.hostname or "", url.port, values.get("no_proxy", "")):
        return None
    return proxy


def _bypassed(host: str, port: int | None, no_proxy: str) -> bool:
    host = host.lower().strip("[]")
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        address = None
    for raw in no_proxy.split(","):
        entry = raw.strip().lower()
        if not entry:
            continue
        if entry == "*":
            return True
        name, _, entry_port = entry.rpartition(":") if entry.count(":") == 1 else (entry, "", "")
        if entry_port and (not entry_port.isdigit() or int(entry_port) != port):
            continue
        if address is not None:
            try:
                if address in ipaddress.ip_network(name.strip("[]"), strict=False):
                    return True
            except ValueError:
                pass
        name = name.lstrip(".")
        if name and (host == name or host.endswith("." + name)):
            return True
    return False


def loopback_proxy_note(env: Mapping[str, str] | None = None) -> str | None:
    """A line for the session's header when the environment names a proxy that ``NO_PROXY`` does
    not lift for loopback: ktest goes direct, but a client a test builds itself would not."""
    env = os.environ if env is None else env
    proxies = environment_proxies(env)
    if not proxies or environment_proxy_for("https://127.0.0.1:6443", env) is None:
        return None
    return (
        f"{', '.join(sorted(proxies))} set and NO_PROXY does not name 127.0.0.1: ktest's clients and "
        "operators go direct to its loopback servers, but a kubernetes client your tests build from "
        "its kubeconfig would use the proxy (export NO_PROXY=127.0.0.1,localhost no_proxy=127.0.0.1,"
        "localhost, or use cluster.api_client)"
    )
