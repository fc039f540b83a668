"""Latency from the write that satisfies a condition to ``eventually`` returning.

Compares watch-driven wake-up with plain polling (``watch=False``) at the same
interval (250 ms, the usual Gomega setting in envtest suites), against a real
embedded control plane.  Each sample waits for a ConfigMap value that another
thread writes at a random moment of the poll cycle, once the check has failed at
least once; latency runs from just before the write request is sent to the
moment ``eventually`` returns.

    .venv/bin/python bench/eventually_latency.py [--samples 30] [--interval 0.25]

Set KTEST_ASSETS to use a directory of binaries instead of resolving them.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import threading
import time
from typing import Any

from ktest.cluster import Cluster
from ktest.controlplane import ControlPlane
from ktest.wait import eventually


def one_sample(cluster: Cluster, ns: str, name: str, *, interval: float, watch: bool,
               rng: random.Random) -> float:
    """Seconds from the start of the satisfying write to eventually() returning."""
    ref = ("v1", "ConfigMap", name, ns)
    cluster.create({"apiVersion": "v1", "kind": "ConfigMap",
                    "metadata": {"name": name, "namespace": ns}, "data": {"v": "0"}})
    failed_once = threading.Event()
    written_at: list[float] = []
    delay = rng.uniform(0, interval)  # a random phase of the poll cycle

    def writer() -> None:
        failed_once.wait(30)
        time.sleep(delay)
        written_at.append(time.perf_counter())
        cluster.patch(ref, {"data": {"v": "1"}})

    thread = threading.Thread(target=writer, daemon=True)
    thread.start()

    def check() -> None:
        value = cluster.get(ref)["data"]["v"]
        failed_once.set()
        assert value == "1"

    eventually(check, timeout=30, interval=interval, watch=None if watch else False)
    returned_at = time.perf_counter()
    thread.join()
    cluster.delete(ref)
    return returned_at - written_at[0]


def summarize(latencies: list[float]) -> dict[str, float]:
    ordered = sorted(latencies)
    return {
        "median_ms": statistics.median(ordered) * 1000,
        "p10_ms": ordered[len(ordered) // 10] * 1000,
        "p90_ms": ordered[(len(ordered) * 9) // 10] * 1000,
        "min_ms": ordered[0] * 1000,
        "max_ms": ordered[-1] * 1000,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--samples", type=int, default=30, help="samples per mode (default 30)")
    parser.add_argument("--interval", type=float, default=0.25, help="poll interval in seconds")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args()
    rng = random.Random(20240605)

    results: dict[str, Any] = {"interval_s": args.interval, "samples": args.samples}
    with ControlPlane(assets=os.environ.get("KTEST_ASSETS") or None, controllers=None) as plane, \
            Cluster(plane.kubeconfig) as cluster:
        ns = cluster.create_namespace("bench-eventually")
        # warm up discovery, connections and the namespace's ConfigMap watch
        one_sample(cluster, ns, "warmup", interval=args.interval, watch=True, rng=rng)
        samples: dict[str, list[float]] = {"watch": [], "poll": []}
        for index in range(args.samples):  # interleave the modes so drift hits both alike
            for mode in ("watch", "poll"):
                samples[mode].append(one_sample(cluster, ns, f"{mode}-{index}",
                                                interval=args.interval, watch=mode == "watch",
                                                rng=rng))
        for mode, latencies in samples.items():
            results[mode] = summarize(latencies)
    results["speedup_median"] = results["poll"]["median_ms"] / results["watch"]["median_ms"]

    if args.json:
        print(json.dumps(results, indent=2))
        return
    print(f"eventually latency, write -> return, {args.samples} samples per mode, "
          f"poll interval {args.interval * 1000:.0f} ms")
    for mode in ("watch", "poll"):
        figures = results[mode]
        print(f"  {mode:>5}: median {figures['median_ms']:7.1f} ms   p10 {figures['p10_ms']:7.1f} ms"
              f"   p90 {figures['p90_ms']:7.1f} ms   max {figures['max_ms']:7.1f} ms")
    print(f"  watch-driven is {results['speedup_median']:.1f}x faster (median)")


if __name__ == "__main__":
    main()
