"""Time the Go-module build of one Kubernetes version, per binary (median over runs).

Run: .venv/bin/python bench/assets_build.py [--version 1.37.2] [--runs 3]
Each run builds into a fresh temporary ktest cache (KTEST_CACHE_DIR), so the
real cache is untouched; the Go build cache (GOCACHE) is shared, so after the
first build of a version this measures the re-link cost, which is what a
second machine with a warm GOCACHE or a wiped ktest cache pays. Point GOCACHE
at an empty directory to measure a cold build (many minutes on 2 cores).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from pathlib import Path

from ktest.assets import resolve_assets
from ktest.assets.store import METADATA_FILE


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--version", default="1.37.2")
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    per_step: dict[str, list[float]] = {}
    totals: list[float] = []
    for run in range(args.runs):
        with tempfile.TemporaryDirectory(prefix="ktest-bench-build-") as scratch:
            os.environ["KTEST_CACHE_DIR"] = scratch
            started = time.monotonic()
            assets = resolve_assets(args.version, source="build", progress=False)
            totals.append(time.monotonic() - started)
            metadata = json.loads((Path(assets.directory) / METADATA_FILE).read_text())
            for step, seconds in metadata["build_seconds"].items():
                per_step.setdefault(step, []).append(seconds)
            print(f"run {run + 1}: {totals[-1]:.1f}s", flush=True)
    for step, samples in per_step.items():
        print(f"{statistics.median(samples):8.1f} s  {step}")
    print(f"{statistics.median(totals):8.1f} s  total (resolve_assets, incl. verification)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
