"""Benchmark what a running but idle control plane costs, and what etcd's heartbeat tick adds.

    python bench/idle_plane.py [--runs 5] [--seconds 20]

A suite holds several planes at once (one per xdist worker, more for tests that need other
settings), and most of the time they wait. This measures, per component, the CPU an idle plane
without controllers uses (percent of one core, over ``--seconds`` after a 3 s settle), and the
time to ready, for etcd's heartbeat at ktest's setting and, as the baseline measured in the same
run, at the 10 ms tick ktest used before (election timeout 5 ticks in both). Starts alternate
between the two settings; medians of ``--runs``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import ktest.controlplane.etcd as etcd_settings
from ktest.controlplane import ControlPlane

BASELINE_TICK_MS = 10
COMPONENTS = ("etcd", "kube-apiserver")


def _cpu_ticks(pid: int) -> int:
    stat = Path(f"/proc/{pid}/stat").read_text()
    fields = stat[stat.rindex(")") + 2:].split()
    return int(fields[11]) + int(fields[12])


def _child_named(name: str) -> int:
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            executable = Path(f"/proc/{entry}/cmdline").read_text().split("\0")[0]
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        if executable.endswith("/" + name) and int(stat[stat.rindex(")") + 2:].split()[1]) == os.getpid():
            return int(entry)
    raise RuntimeError(f"no {name} child of this process")


@contextmanager
def _tick(heartbeat_ms: int) -> Iterator[None]:
    saved = etcd_settings.HEARTBEAT_MS, etcd_settings.ELECTION_TIMEOUT_MS
    etcd_settings.HEARTBEAT_MS, etcd_settings.ELECTION_TIMEOUT_MS = heartbeat_ms, 5 * heartbeat_ms
    try:
        yield
    finally:
        etcd_settings.HEARTBEAT_MS, etcd_settings.ELECTION_TIMEOUT_MS = saved


def measure(heartbeat_ms: int, seconds: float) -> tuple[float, dict[str, float]]:
    """(seconds to ready, {component: percent of a core while idle})."""
    with _tick(heartbeat_ms):
        started = time.monotonic()
        with ControlPlane(controllers="none"):
            ready = time.monotonic() - started
            time.sleep(3)
            pids = {name: _child_named(name) for name in COMPONENTS}
            before = {name: _cpu_ticks(pid) for name, pid in pids.items()}
            time.sleep(seconds)
            hertz = os.sysconf("SC_CLK_TCK")
            return ready, {
                name: (_cpu_ticks(pid) - before[name]) / hertz / seconds * 100 for name, pid in pids.items()
            }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=20.0)
    args = parser.parse_args()
    settings = {"ktest": etcd_settings.HEARTBEAT_MS, "baseline": BASELINE_TICK_MS}
    results: dict[str, list[tuple[float, dict[str, float]]]] = {label: [] for label in settings}
    for _ in range(args.runs):
        for label, heartbeat in settings.items():
            results[label].append(measure(heartbeat, args.seconds))
    summary = {}
    for label, runs in results.items():
        ready = statistics.median(r for r, _ in runs)
        idle = {name: statistics.median(c[name] for _, c in runs) for name in COMPONENTS}
        summary[label] = (ready, idle)
        parts = ", ".join(f"{name} {value:.1f}%" for name, value in idle.items())
        print(f"{label:9s} heartbeat {settings[label]:3d} ms: ready {ready:.2f} s; idle {parts} of a core")
    ours, base = summary["ktest"], summary["baseline"]
    print(f"ratio ktest/baseline: ready {ours[0] / base[0]:.2f}x, idle etcd "
          f"{ours[1]['etcd'] / max(base[1]['etcd'], 0.01):.2f}x, idle plane "
          f"{sum(ours[1].values()) / max(sum(base[1].values()), 0.01):.2f}x")


if __name__ == "__main__":
    main()
