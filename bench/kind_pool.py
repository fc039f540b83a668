"""kind warm pool: time to attach to a spare against creating a cluster, same run, same image.

Each warm run waits until the pool holds a ready spare (a filler started by the previous
open, or by the bench itself), then times the kind backend's open with ``ktest_kind_pool``
on, which claims it (orphan sweep, image choice, fingerprint, claim, one round of readiness
checks; the next filler is started before it returns), and closes the backend (the claimed
cluster is deleted). Cold runs (``--cold-runs``, default 1) time the same open with the pool
off: a cluster created for the run. ``--pytest`` times whole pytest runs with
``--ktest-kind-pool`` instead of the backend's open (interpreter start to the first test, in
a subprocess, as a user meets it). Medians; the machine's load beside them. Every cluster
made is deleted at the end, and a filler still running is stopped.

    .venv/bin/python bench/kind_pool.py [--runs 5] [--cold-runs 1] [--k8s-version 1.37] [--pytest]

Last line: ``kind attach from spare: X.XX s``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from kind_cluster import ATTACH_TEST, kind_pytest  # noqa: E402  (bench/ is the script's directory)

from ktest.backends.kind.backend import open_kind  # noqa: E402
from ktest.backends.kind.binary import resolve_kind  # noqa: E402
from ktest.config import Settings  # noqa: E402
from ktest.kind import pool  # noqa: E402

FILL_TIMEOUT = 900.0


def wait_for_spare() -> float:
    """Seconds until the filler started by the last warm open has finished and left a spare."""
    started = time.monotonic()
    while time.monotonic() - started < FILL_TIMEOUT:
        filling = pool.running_filler() is not None
        if not filling and pool.ready_spares():
            return time.monotonic() - started
        if not filling and time.monotonic() - started > 10:
            raise SystemExit(f"no filler runs and no spare is ready; see {pool.log_path()}")
        time.sleep(0.5)
    raise SystemExit(f"no spare after {FILL_TIMEOUT:.0f}s; see {pool.log_path()}")


def timed_open(settings: Settings) -> tuple[float, list[str]]:
    notes: list[str] = []
    started = time.monotonic()
    backend = open_kind(settings, notes)
    elapsed = time.monotonic() - started
    backend.close()
    return elapsed, notes


def timed_pytest(settings: Settings) -> tuple[float, list[str]]:
    """Seconds from starting ``pytest`` to its first test; the session header's notes."""
    with tempfile.TemporaryDirectory() as directory:
        (Path(directory) / "test_first.py").write_text(ATTACH_TEST)
        command = kind_pytest("test_first.py")
        command += ["--ktest-kind-pool"] if settings.kind_pool else []
        command += ["--ktest-k8s-version", settings.k8s_version] if settings.k8s_version else []
        started = time.time()
        finished = subprocess.run(command, cwd=directory, capture_output=True, text=True, check=False)
    first = [line for line in finished.stdout.splitlines() if line.startswith("FIRST-TEST")]
    if finished.returncode != 0 or not first:
        raise SystemExit(f"pytest run failed:\n{finished.stdout[-3000:]}\n{finished.stderr[-3000:]}")
    notes = [line for line in finished.stdout.splitlines() if line.startswith("note:")]
    return float(first[0].split()[1]) - started, notes


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--cold-runs", type=int, default=1)
    parser.add_argument("--k8s-version", default=None)
    parser.add_argument("--pytest", action="store_true", help="time pytest runs to their first test")
    args = parser.parse_args()
    timed = timed_pytest if args.pytest else timed_open
    what = "pytest start to first test" if args.pytest else "the backend's open"
    warm = Settings(backend="kind", k8s_version=args.k8s_version).with_values(kind_pool=True)
    cold = Settings(backend="kind", k8s_version=args.k8s_version)
    kind = resolve_kind()
    print(
        f"{args.runs} warm, {args.cold_runs} cold runs of {what}; load average {os.getloadavg()[0]:.2f} "
        f"on {os.cpu_count()} cores",
        flush=True,
    )
    attach: list[float] = []
    created: list[float] = []
    loads: list[float] = []
    try:
        timed(warm)  # the first open of an empty pool creates, then starts the first filler
        for index in range(max(args.runs, args.cold_runs)):
            filled = wait_for_spare()  # the cold run too: never beside a filler
            if index < args.cold_runs:
                elapsed, _ = timed(cold)
                created.append(elapsed)
                print(f"  cold {index + 1}: created in {elapsed:.2f}s", flush=True)
            if index < args.runs:
                loads.append(os.getloadavg()[0])
                elapsed, notes = timed(warm)
                attach.append(elapsed)
                claimed = any("claimed spare" in note for note in notes)
                print(
                    f"  warm {index + 1}: attached in {elapsed:.2f}s (spare ready after {filled:.0f}s; "
                    f"load {loads[-1]:.2f}){'' if claimed else ' NOT FROM A SPARE: ' + '; '.join(notes)}",
                    flush=True,
                )
    finally:
        for line in pool.drain(kind):
            print(f"  {line}")
    if created:
        cold_median = statistics.median(created)
        print(
            f"cold create (median of {len(created)}): {cold_median:.2f}s; attach/create = "
            f"{statistics.median(attach) / cold_median:.3f}"
        )
    print(
        f"load average at each warm open: median {statistics.median(loads):.2f}, max {max(loads):.2f} "
        f"on {os.cpu_count()} cores"
    )
    print(f"kind attach from spare: {statistics.median(attach):.2f} s (median of {len(attach)}, {what})")


if __name__ == "__main__":
    main()
