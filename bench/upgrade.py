"""Benchmark the in-place upgrade step against a cold start of the same minor, in one run.

    python bench/upgrade.py [--runs 5] [--to 1.37]

The upgrade step is what ``ControlPlane.upgrade`` times (``UpgradeReport.duration``): stop
kube-apiserver and kube-controller-manager, start the next minor's on the same etcd data,
ready with its controllers (garbage collector and namespace, as by default). Each run starts a
fresh control plane at the minor before ``--to`` (not timed), upgrades it, and stops it. The
baseline is a cold start of ``--to`` (etcd, kube-apiserver and the controllers, ready; from the
etcd template, as ``ControlPlane`` starts by default), measured in the same run on the same
binaries. Medians of ``--runs`` runs of each, interleaved, so that a busy moment of the machine
weighs on both.
"""

from __future__ import annotations

import argparse
import statistics
import time

from ktest.assets import resolve_assets
from ktest.assets.minors import DEFAULT_MINOR
from ktest.assets.selectors import KubeVersion
from ktest.controlplane import ControlPlane

GOAL_SECONDS = 3.0


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--to", default=DEFAULT_MINOR, help="the minor to upgrade to (default %(default)s)")
    options = parser.parse_args(argv)
    target = resolve_assets(options.to)
    wanted = KubeVersion.parse(target.version)
    older = resolve_assets(f"{wanted.major}.{wanted.minor - 1}")
    # warm both etcd templates and the binaries' page cache: the first start of each is not a sample
    for assets in (older, target):
        with ControlPlane(assets=assets):
            pass
    upgrades: list[float] = []
    cold: list[float] = []
    for run in range(1, options.runs + 1):
        with ControlPlane(assets=older) as plane:
            report = plane.upgrade(target.version)
        upgrades.append(report.duration)
        began = time.perf_counter()
        with ControlPlane(assets=target):
            cold.append(time.perf_counter() - began)
        print(f"run {run}: upgrade {report.duration:.2f} s, cold start {cold[-1]:.2f} s", flush=True)
    upgrade, start = statistics.median(upgrades), statistics.median(cold)
    print()
    print(f"{'step (median of ' + str(options.runs) + ')':<44} {'seconds':>8}")
    print(f"{'upgrade ' + older.version + ' -> ' + target.version + ' in place':<44} {upgrade:>8.2f}")
    print(f"{'cold start of ' + target.version:<44} {start:>8.2f}")
    print(f"{'ratio upgrade / cold start':<44} {upgrade / start:>8.2f}")
    verdict = "meets" if upgrade <= GOAL_SECONDS else "misses"
    print(f"the upgrade step {verdict} the {GOAL_SECONDS:g} s goal")


if __name__ == "__main__":
    main()
