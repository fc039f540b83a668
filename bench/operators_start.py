"""Time from "start the operator" to "ready" for each kind, and the cached Go build lookup (medians).

Run: .venv/bin/python bench/operators_start.py [--runs 5]
One control plane serves every run. Kinds: a sync callable (ready after its
first LIST), a kopf operator (startup handlers done, watch streams running),
the Go controller-runtime manager of fixtures/go-manager as a subprocess
(/readyz 200 once its informer synced), plus stop() of each (the sample callable
watches in 1 s slices, so its stop takes up to 1 s by design) and
build_go_binary() on unchanged sources (the hash of the sources).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

from ktest.cluster import Cluster
from ktest.controlplane import ControlPlane
from ktest.operators import build_go_binary, run_callable, run_kopf, run_subprocess

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = ROOT / "tests" / "operators" / "sample_operators"
GO_MANAGER = ROOT / "fixtures" / "go-manager"


def timed(fn: Callable[[], object]) -> tuple[float, object]:
    started = time.monotonic()
    result = fn()
    return time.monotonic() - started, result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    sys.path.insert(0, str(SAMPLES.parent))
    from sample_operators.mirror import sync_operator

    binary = build_go_binary(GO_MANAGER)
    samples: dict[str, list[float]] = {}
    with ControlPlane() as plane, Cluster(plane.kubeconfig, controllers=plane.controllers) as cluster:
        starters: dict[str, Callable[[], object]] = {
            "callable (thread)": lambda: run_callable(sync_operator, cluster),
            "kopf (in-process)": lambda: run_kopf(SAMPLES / "kopf_mirror.py", cluster, cluster_wide=True),
            "go manager (subprocess, /readyz)": lambda: run_subprocess(
                [binary], cluster, args=["--health-probe-bind-address=127.0.0.1:{port}"],
                ready_http="http://127.0.0.1:{port}/readyz",
            ),
        }
        for _ in range(args.runs):
            for kind, start in starters.items():
                seconds, handle = timed(start)
                samples.setdefault(f"{kind}: ready", []).append(seconds)
                seconds, _ = timed(handle.close)  # type: ignore[attr-defined]
                samples.setdefault(f"{kind}: stop", []).append(seconds)
            seconds, _ = timed(lambda: build_go_binary(GO_MANAGER))
            samples.setdefault("build_go_binary, cached", []).append(seconds)
    for name, values in samples.items():
        print(f"{statistics.median(values) * 1000:9.1f} ms  {name}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
