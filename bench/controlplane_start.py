"""Benchmark the embedded control plane: time to ready, time to stop, memory.

    python bench/controlplane_start.py [--runs 5] [--no-template]

Binaries come from KTEST_ASSETS (a directory) when set, else resolve_assets().
Reports the median of ``--runs`` starts with the default controllers
(garbage collector + namespace, waiting until the garbage collector has synced)
and without kube-controller-manager, the time stop() takes, and each
component's resident memory (VmRSS) right after start. ``--no-template``: every start
bootstraps from empty etcd data (``etcd_template=False``), as a start with ``apiserver_flags``
does.

Baseline, measured in the same run on the same binaries: controller-runtime's
Go envtest (etcd + kube-apiserver, no controllers), built from
bench/envtest-baseline when ``go`` is available. The ratio compares it with
ktest without controllers (the same components).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import time
from pathlib import Path

from ktest.assets.bundle import Assets
from ktest.controlplane import ControlPlane


def bench_assets() -> Assets:
    """The binaries to measure: KTEST_ASSETS (a directory) when set, else resolve_assets()."""
    directory = os.environ.get("KTEST_ASSETS")
    if directory:
        return Assets(directory=Path(directory), version="", origin="path")
    from ktest.assets import resolve_assets

    return resolve_assets(None)


def rss_mib(pid: int) -> float:
    """Resident memory of process ``pid`` in MiB (NaN when /proc does not say)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def _measure(assets: Assets, controllers: str, runs: int, template: bool) -> dict[str, list[float]]:
    results: dict[str, list[float]] = {"ready": [], "stop": []}
    for _ in range(runs):
        began = time.perf_counter()
        plane = ControlPlane(assets=assets, controllers=controllers, etcd_template=template)
        plane.start()
        results["ready"].append(time.perf_counter() - began)
        for name, process in plane.processes().items():
            if process.pid:
                results.setdefault(f"rss {name}", []).append(rss_mib(process.pid))
        began = time.perf_counter()
        plane.stop()
        results["stop"].append(time.perf_counter() - began)
    return results


def _envtest_baseline(assets: Assets, runs: int) -> dict[str, list[float]] | None:
    """Go envtest's start/stop times on the same binaries, or None without Go."""
    if shutil.which("go") is None:
        return None
    from ktest.operators.go_operator import build_go_binary

    binary = build_go_binary(Path(__file__).parent / "envtest-baseline")
    directory = assets.directory
    output = subprocess.run(
        [str(binary), "-runs", str(runs)],
        env={**os.environ, "KUBEBUILDER_ASSETS": str(directory)},
        capture_output=True,
        text=True,
        check=True,
        timeout=600,
    ).stdout
    pairs = [line.split() for line in output.splitlines() if line.strip()]
    return {"ready": [float(p[0]) for p in pairs], "stop": [float(p[1]) for p in pairs]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--no-template", dest="template", action="store_false")
    options = parser.parse_args()
    assets = bench_assets()
    # One unmeasured start warms the page cache and the --help probe cache.
    ControlPlane(assets=assets).start().stop()
    scenarios = {
        "with controllers": _measure(assets, "garbagecollector,namespace", options.runs, options.template),
        "without controllers": _measure(assets, "none", options.runs, options.template),
    }
    baseline = _envtest_baseline(assets, options.runs)
    if baseline is not None:
        scenarios["Go envtest (baseline)"] = baseline
    data = "etcd template" if options.template else "no etcd template"
    print(f"median of {options.runs} runs (min-max), {data}, load {os.getloadavg()[0]:.2f}")
    print(f"{'scenario':<22}{'metric':<32}{'median':>10}  range")
    for scenario, results in scenarios.items():
        for metric, values in results.items():
            unit = "MiB" if metric.startswith("rss") else "s"
            print(
                f"{scenario:<22}{metric:<32}{statistics.median(values):>9.2f}{unit[0]}  "
                f"{min(values):.2f}-{max(values):.2f} {unit}"
            )

    if baseline is not None:
        ours = statistics.median(scenarios["without controllers"]["ready"])
        theirs = statistics.median(baseline["ready"])
        print(f"ready, ktest without controllers / Go envtest: {ours / theirs:.2f}x")
        with_controllers = statistics.median(scenarios["with controllers"]["ready"])
        print(f"ready, ktest with GC + namespace controllers / Go envtest: {with_controllers / theirs:.2f}x")


if __name__ == "__main__":
    main()
