"""How long finding the binaries costs once they are installed (median of several runs).

Run: .venv/bin/python bench/assets_resolve.py [--version 1.37.2] [--runs 7]
Needs the version installed (``ktest binaries install``). Every test session
pays this cost, so it should stay far below a second.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable

from ktest.assets import resolve_assets


def median_seconds(action: Callable[[], object], runs: int) -> float:
    samples = []
    for _ in range(runs):
        started = time.perf_counter()
        action()
        samples.append(time.perf_counter() - started)
    return statistics.median(samples)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--version", default="1.37.2")
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    directory = resolve_assets(args.version, progress=False).directory

    def with_ktest_assets() -> None:
        os.environ["KTEST_ASSETS"] = str(directory)
        try:
            resolve_assets(args.version, progress=False)
        finally:
            del os.environ["KTEST_ASSETS"]

    def cli_path() -> None:
        subprocess.run(
            [sys.executable, "-m", "ktest", "binaries", "path", "--k8s-version", args.version],
            check=True,
            capture_output=True,
        )

    cases: dict[str, Callable[[], object]] = {
        f"resolve_assets({args.version!r}) from the cache": lambda: resolve_assets(
            args.version, progress=False
        ),
        "resolve_assets(None) (latest, listing cached)": lambda: resolve_assets(progress=False),
        "resolve_assets via KTEST_ASSETS (probes kube-apiserver --version)": with_ktest_assets,
        "`python -m ktest binaries path` (process start included)": cli_path,
    }
    for name, action in cases.items():
        print(f"{median_seconds(action, args.runs) * 1000:8.1f} ms  {name}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
