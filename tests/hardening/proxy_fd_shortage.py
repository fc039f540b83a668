"""Run as a script by tests/hardening/test_proxy_connection_flood.py: an operator proxy in a
process that is short of file descriptors.

    python proxy_fd_shortage.py KUBECONFIG SPARE

Starts an ``OperatorProxy`` for KUBECONFIG, then lowers this process's soft ``RLIMIT_NOFILE`` to
the descriptors it has open plus SPARE, and prints ``<port> <the proxy's kubeconfig> <limit>``.
Each ``errors`` line on stdin makes it print (JSON) the ``accept()`` errors the proxy went on
after; ``exit`` (or the end of stdin) makes it exit.
"""

from __future__ import annotations

import json
import os
import resource
import sys

from ktest.cluster import Cluster
from ktest.proxy import OperatorProxy


def main(kubeconfig: str, spare: str) -> None:
    proxy = OperatorProxy(Cluster(kubeconfig), "fd-shortage").start()
    try:
        open_now = len(os.listdir("/proc/self/fd"))
        _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        limit = open_now + int(spare)
        resource.setrlimit(resource.RLIMIT_NOFILE, (limit, hard))
        print(proxy.port, proxy.kubeconfig, limit, flush=True)
        assert proxy._server is not None
        while sys.stdin.readline().strip() == "errors":
            print(json.dumps(getattr(proxy._server, "accept_errors", [])), flush=True)
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
        proxy.close()


if __name__ == "__main__":
    main(*sys.argv[1:3])
