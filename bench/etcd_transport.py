"""Benchmark: what etcd over TLS with client certificates costs the control plane's start.

    python bench/etcd_transport.py [--runs 7] [--baseline-ref 038ff06]

Starts (and stops) a control plane without controllers ``--runs`` times with
this checkout's ktest and with ktest at ``--baseline-ref`` (before etcd spoke
TLS: plain HTTP, no client authentication), alternating the two so both see
the same machine load, on the same binaries. Reports the median time to ready
of each and their ratio. The baseline tree comes from ``git archive``.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
_ONE_START = """
import sys, time
from pathlib import Path
from ktest.controlplane import ControlPlane
began = time.perf_counter()
plane = ControlPlane(assets=Path(sys.argv[1]), controllers="none").start()
ready = time.perf_counter() - began
plane.stop()
print(ready)
"""


def _tree(ref: str, into: Path) -> Path:
    archive = subprocess.run(
        ["git", "-C", str(REPO), "archive", ref, "ktest"], capture_output=True, check=True
    )
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive.stdout, check=True)
    return into


def _start_once(python_path: Path, assets: Path) -> float:
    output = subprocess.run(
        [sys.executable, "-c", _ONE_START, str(assets)],
        env={"PYTHONPATH": str(python_path), "PATH": "/usr/bin:/bin", "HOME": str(Path.home())},
        capture_output=True,
        text=True,
        check=True,
        timeout=300,
    ).stdout
    return float(output.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--baseline-ref", default="038ff06", help="a commit before etcd used TLS")
    options = parser.parse_args()
    from ktest.assets import resolve_assets

    assets = resolve_assets(None, progress=False).directory
    with tempfile.TemporaryDirectory(prefix="ktest-bench-") as scratch:
        baseline = _tree(options.baseline_ref, Path(scratch))
        trees = {"plain HTTP etcd (baseline)": baseline, "TLS + client certificates": REPO}
        for tree in trees.values():
            _start_once(tree, assets)  # warm the page cache and the flag probes
        times: dict[str, list[float]] = {name: [] for name in trees}
        for _ in range(options.runs):
            for name, tree in trees.items():
                times[name].append(_start_once(tree, assets))
    print(f"control plane without controllers, time to ready, median of {options.runs} runs (min-max)")
    for name, values in times.items():
        print(f"  {name:<28}{statistics.median(values):6.2f} s  ({min(values):.2f}-{max(values):.2f})")
    ratio = statistics.median(times["TLS + client certificates"]) / statistics.median(
        times["plain HTTP etcd (baseline)"]
    )
    print(f"  TLS / plain HTTP: {ratio:.2f}x")


if __name__ == "__main__":
    main()
