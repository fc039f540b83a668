"""What the operator proxy costs: per-request latency added, and the demo suite's time.

Per request: one ConfigMap GET at a time over a kept-alive TLS connection,
straight to the API server and through an ``OperatorProxy`` (no rule active),
interleaved (direct, proxied, proxied, direct, ...) so both see the same load;
reported per run and as medians over runs: p50 and p99 of each, and the overhead
(proxied minus direct) at p50 and p99. ``--http2``: both connections speak HTTP/2
(urllib3's h2 support), the proxy with ``http2=True`` (it forwards over HTTP/1.1).

Suite (``--suite``): ``pytest examples -n 0`` with ``KTEST_OPERATOR_PROXY=off``
and ``=on``, alternated, ``--suite-runs`` times each; medians and their ratio.
``examples/test_faults.py`` is left out of both: it needs the proxy (with it off,
its tests fail at once, which would flatter the "off" runs).

    .venv/bin/python bench/proxy_overhead.py [--requests 1000] [--runs 3] [--http2] [--suite] [--suite-runs 2]

Set KTEST_ASSETS to use a directory of binaries instead of resolving them.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import urllib3

from ktest.cluster import Cluster
from ktest.controlplane import ControlPlane
from ktest.proxy import OperatorProxy

ROOT = Path(__file__).resolve().parent.parent


def pool_for(cluster: Cluster) -> urllib3.HTTPSConnectionPool:
    """A one-connection pool with the cluster's credentials (what a client library keeps open)."""
    configuration = cluster.api_client.configuration
    url = urllib3.util.parse_url(configuration.host)
    return urllib3.HTTPSConnectionPool(
        url.host, url.port, maxsize=1, ca_certs=configuration.ssl_ca_cert, cert_file=configuration.cert_file,
        key_file=configuration.key_file, assert_hostname=False, retries=False,
    )


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * fraction))]


def one_run(direct: urllib3.HTTPSConnectionPool, proxied: urllib3.HTTPSConnectionPool, path: str,
            requests: int) -> dict[str, float]:
    times: dict[str, list[float]] = {"direct": [], "proxied": []}
    for pool in (direct, proxied):  # warm: connections open, caches filled
        for _ in range(20):
            pool.request("GET", path).data  # noqa: B018 - read the body
    for index in range(requests):
        order = ("direct", "proxied") if index % 2 == 0 else ("proxied", "direct")
        for which in order:
            pool = direct if which == "direct" else proxied
            started = time.perf_counter()
            answer = pool.request("GET", path)
            answer.data  # noqa: B018 - read the whole body, as a client does
            times[which].append(time.perf_counter() - started)
            assert answer.status == 200, answer.status
    figures = {}
    for which, values in times.items():
        figures[f"{which}_p50_ms"] = percentile(values, 0.50) * 1000
        figures[f"{which}_p99_ms"] = percentile(values, 0.99) * 1000
    figures["overhead_p50_ms"] = figures["proxied_p50_ms"] - figures["direct_p50_ms"]
    figures["overhead_p99_ms"] = figures["proxied_p99_ms"] - figures["direct_p99_ms"]
    return figures


def per_request(requests: int, runs: int, http2: bool = False) -> None:
    if http2:
        import urllib3.http2

        urllib3.http2.inject_into_urllib3()  # HTTPS connections negotiate h2 when offered
    with ControlPlane() as plane, Cluster(plane.kubeconfig) as cluster:
        cluster.create({"apiVersion": "v1", "kind": "ConfigMap",
                        "metadata": {"name": "bench", "namespace": "default"}, "data": {"k": "v"}})
        proxy = OperatorProxy(cluster, "bench", http2=http2).start()
        try:
            direct, proxied = pool_for(cluster), pool_for(proxy.cluster)
            path = "/api/v1/namespaces/default/configmaps/bench"
            results = []
            for run in range(runs):
                figures = one_run(direct, proxied, path, requests)
                results.append(figures)
                print(f"run {run + 1}: " + ", ".join(f"{key} {value:.2f}" for key, value in figures.items()),
                      flush=True)
            print(f"median of {runs} runs ({requests} requests each way per run):")
            for key in results[0]:
                print(f"  {key:<18} {statistics.median(r[key] for r in results):7.3f}")
            print(f"  load average       {os.getloadavg()[0]:.1f}")
            protocols = sorted({call.protocol for call in proxy.traffic.calls(resource="configmaps")})
            print(f"  proxied protocol   {', '.join(protocols)}")
            direct.close()
            proxied.close()
        finally:
            proxy.close()


def suite(runs: int) -> None:
    seconds: dict[str, list[float]] = {"off": [], "on": []}
    for _ in range(runs):
        for mode in ("off", "on"):
            env = dict(os.environ, KTEST_OPERATOR_PROXY=mode)
            started = time.monotonic()
            result = subprocess.run(
                [sys.executable, "-m", "pytest", "examples", "-n", "0", "-q", "-p", "no:cacheprovider",
                 "--ignore=examples/test_faults.py"],
                cwd=ROOT, env=env, capture_output=True, text=True, check=False,
            )
            elapsed = time.monotonic() - started
            seconds[mode].append(elapsed)
            last = result.stdout.strip().splitlines()[-1] if result.stdout.strip() else result.stderr[-200:]
            print(f"proxy {mode:<3}: {elapsed:6.1f}s  {last}", flush=True)
    off, on = statistics.median(seconds["off"]), statistics.median(seconds["on"])
    print(f"demo suite, median of {runs}: proxy off {off:.1f}s, on {on:.1f}s, ratio on/off {on / off:.3f} "
          f"(load average {os.getloadavg()[0]:.1f})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=1000, help="requests each way per run")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--http2", action="store_true", help="clients and proxy speak HTTP/2")
    parser.add_argument("--suite", action="store_true", help="also time the demo suite with the proxy off/on")
    parser.add_argument("--suite-runs", type=int, default=2)
    args = parser.parse_args()
    if args.runs:
        per_request(args.requests, args.runs, args.http2)
    if args.suite:
        suite(args.suite_runs)


if __name__ == "__main__":
    main()
