"""Time a warm ``ktest kind build-image`` (the image exists, labels match): median over runs.

Run: .venv/bin/python bench/kind_image.py [--version 1.37] [--runs 5]
Each run is the real command in a fresh process (what ``make kind-images`` pays per
version). Baseline, measured in the same run: ``ktest kind images`` in a fresh
process (interpreter start, imports, one engine connection and an image list),
so the ratio shows what the up-to-date check adds on top of talking to Docker at all.
The image must have been built once before (``ktest kind build-image``).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

KTEST = Path(sys.executable).with_name("ktest")


def _timed(args: list[str]) -> float:
    started = time.monotonic()
    subprocess.run([str(KTEST), *args], check=True, capture_output=True, stdin=subprocess.DEVNULL)
    return time.monotonic() - started


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--version", default="1.37")
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    _timed(["kind", "build-image", "--k8s-version", args.version])  # must already be a no-op
    builds, baselines = [], []
    for run in range(args.runs):
        baselines.append(_timed(["kind", "images"]))
        builds.append(_timed(["kind", "build-image", "--k8s-version", args.version]))
        print(f"run {run + 1}: build-image {builds[-1]:.2f}s, images {baselines[-1]:.2f}s", flush=True)
    build, baseline = statistics.median(builds), statistics.median(baselines)
    command = f"ktest kind build-image --k8s-version {args.version}"
    print(f"{build:8.2f} s  warm `{command}` (median of {args.runs})")
    print(f"{baseline:8.2f} s  baseline `ktest kind images` (median of {args.runs})")
    print(f"{build / baseline:8.2f} x  ratio")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
