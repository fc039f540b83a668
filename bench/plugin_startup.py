"""Benchmark of the pytest plugin: session start-up, namespace fixture cost, xdist speed-up.

    python bench/plugin_startup.py [--runs 5] [--suite tests/plugin] [--skip-suite]
    python bench/plugin_startup.py --overhead [--runs 15]

``--overhead``: what the installed plugin costs a pytest run that uses no ktest
fixture: wall time (launch to exit) and peak RSS of ``pytest`` on one trivial
test, with ktest loaded vs ``-p no:ktest``, runs interleaved, medians; also with a
``KTEST_K8S_VERSION`` set.  The other Kubernetes plugins (pytest-kind,
pytest-kubernetes) are disabled in both, so the difference is ktest's alone.

Otherwise measures (medians of ``--runs``):
* start-up to the first test body: from launching ``python -m pytest`` to the
  first line of a test using ``cluster``; cold (backend bare starts a control
  plane) and with reuse (attached to a ``ktest up`` control plane); plus pytest
  alone on the same file (``-p no:ktest``, test not using ktest) as the floor;
* the ``namespace`` fixture per test: create + real deletion waited for
  (library calls the fixture makes, on one control plane);
* wall time of a test suite with ``-n 0`` and ``-n 2`` (once each; slow).
"""

from __future__ import annotations

import argparse
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FIRST_TEST = """
import os, time

def test_first(cluster):
    with open(os.environ["BENCH_MARK_FILE"], "w") as out:
        out.write(repr(time.time()))
"""
PLAIN_TEST = FIRST_TEST.replace("def test_first(cluster):", "def test_first():")


def _ktest(*args: str, env: dict[str, str]) -> None:
    command = [sys.executable, "-c", "from ktest.cli.main import main; raise SystemExit(main())", *args]
    subprocess.run(command, env=env, check=True, capture_output=True, timeout=900)


def startup(directory: Path, extra: list[str], env: dict[str, str], plain: bool = False) -> float:
    """Seconds from launching pytest to the first test body."""
    test_file = directory / ("test_plain.py" if plain else "test_first.py")
    test_file.write_text(PLAIN_TEST if plain else FIRST_TEST)
    mark = directory / "mark"
    mark.unlink(missing_ok=True)
    run_env = dict(env, BENCH_MARK_FILE=str(mark))
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(test_file), *extra]
    launched = time.time()
    subprocess.run(command, env=run_env, cwd=directory, check=True, capture_output=True, timeout=600)
    return float(mark.read_text()) - launched


def namespace_cost(runs: int) -> list[float]:
    """Seconds per create + waited deletion of a namespace, the namespace fixture's work."""
    from ktest.cluster import Cluster
    from ktest.cluster.namespaces import delete_namespace, unique_name
    from ktest.controlplane import ControlPlane

    costs = []
    with ControlPlane() as plane, Cluster(plane.kubeconfig, controllers=plane.controllers) as cluster:
        for index in range(runs + 1):
            started = time.monotonic()
            name = cluster.create_namespace(unique_name(f"bench-{index}"))
            delete_namespace(cluster, name)
            if index:  # the first one warms discovery caches
                costs.append(time.monotonic() - started)
    return costs


@dataclass
class SuiteRun:
    seconds: float
    outcome: str
    """pytest's closing line (it must say the tests passed)."""
    cores_busy: float
    """CPU time of the whole machine during the run divided by its wall time: how many
    cores were busy on average.  ``cpu_count / cores_busy`` of the ``-n 0`` run bounds
    what any number of workers can gain."""


def _cpu_ticks() -> tuple[int, int]:
    """(busy, total) jiffies of all CPUs since boot, from /proc/stat."""
    fields = [int(value) for value in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    idle = fields[3] + fields[4]  # idle + iowait
    total = sum(fields[:8])  # guest time is already counted in user
    return total - idle, total


def suite(arguments: str, workers: str, env: dict[str, str]) -> SuiteRun:
    """Run pytest on ``arguments`` (paths and options, shell-split) with ``-n workers``."""
    busy_before, total_before = _cpu_ticks()
    started = time.monotonic()
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", workers]
    result = subprocess.run(
        [*command, *shlex.split(arguments)],
        cwd=ROOT, env=env, check=False, capture_output=True, text=True, timeout=3600,
    )
    seconds = time.monotonic() - started
    busy_after, total_after = _cpu_ticks()
    cores = (os.cpu_count() or 1) * (busy_after - busy_before) / max(1, total_after - total_before)
    lines = result.stdout.strip().splitlines()
    return SuiteRun(seconds, lines[-1] if lines else f"exit status {result.returncode}", cores)


def run_once(directory: Path, extra: list[str], env: dict[str, str]) -> tuple[float, float, float]:
    """Seconds from launch to exit, CPU seconds (user + system) and peak RSS (MiB) of one
    pytest run of a trivial test."""
    test_file = directory / "test_trivial.py"
    test_file.write_text("def test_trivial():\n    assert 1 + 1 == 2\n")
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:pytest-kind",
               "-p", "no:pytest-kubernetes", str(test_file), *extra]
    started = time.perf_counter()
    process = subprocess.Popen(command, env=env, cwd=directory, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(process.pid, 0)
    elapsed = time.perf_counter() - started
    process.returncode = os.waitstatus_to_exitcode(status)
    if process.returncode != 0:
        raise SystemExit(f"pytest {' '.join(extra)} failed with status {process.returncode}")
    return elapsed, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024


def overhead(runs: int, env: dict[str, str]) -> None:
    """ktest loaded vs not, on a run that uses no ktest fixture (interleaved runs, medians)."""
    variants = {
        "-p no:ktest (baseline)": (["-p", "no:ktest"], env),
        "ktest loaded": ([], env),
        "ktest loaded, KTEST_K8S_VERSION=1.37": ([], dict(env, KTEST_K8S_VERSION="1.37")),
    }
    results: dict[str, list[tuple[float, float, float]]] = {name: [] for name in variants}
    with tempfile.TemporaryDirectory(prefix="ktest-bench-") as raw:
        for extra, run_env in variants.values():  # warm the OS caches once
            run_once(Path(raw), extra, run_env)
        for _ in range(runs):
            for name, (extra, run_env) in variants.items():
                results[name].append(run_once(Path(raw), extra, run_env))
    medians = {name: [statistics.median(run[column] for run in values) for column in range(3)]
               for name, values in results.items()}
    base = medians["-p no:ktest (baseline)"]
    print(f"{'one trivial test, no ktest fixture':<38} {'wall':>9} {'vs base':>9} {'CPU':>9} {'vs base':>9} "
          f"{'peak RSS':>10} {'vs base':>9}")
    for name, (seconds, cpu, rss) in medians.items():
        print(f"{name:<38} {seconds:7.3f} s {seconds - base[0]:+7.3f} s {cpu:7.3f} s {cpu - base[1]:+7.3f} s "
              f"{rss:6.1f} MiB {rss - base[2]:+5.1f} MiB")
    print(f"({runs} interleaved runs each; load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores)")


def _row(label: str, values: list[float]) -> str:
    spread = f"min {min(values):.2f} max {max(values):.2f}" if len(values) > 1 else ""
    return f"{label:<46} median {statistics.median(values):7.2f} s  ({len(values)} runs; {spread})"


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--suite", default="tests/plugin")
    parser.add_argument("--skip-suite", action="store_true")
    parser.add_argument("--overhead", action="store_true",
                        help="only the plugin's cost to a run that uses no ktest fixture")
    args = parser.parse_args()

    env = {k: v for k, v in os.environ.items() if not k.startswith("KTEST_") or k == "KTEST_CACHE_DIR"}
    if args.overhead:
        overhead(args.runs, env)
        return 0
    with tempfile.TemporaryDirectory(prefix="ktest-bench-") as raw:
        directory = Path(raw)
        env["XDG_STATE_HOME"] = str(directory / "state")
        print(f"load average before: {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores", flush=True)
        floor = [startup(directory, ["-p", "no:ktest"], env, plain=True) for _ in range(args.runs)]
        print(_row("pytest alone to first test body", floor), flush=True)
        cold = [startup(directory, [], env) for _ in range(args.runs)]
        print(_row("start-up to first test body, cold (bare)", cold), flush=True)
        _ktest("up", env=env)
        try:
            warm = [startup(directory, ["--ktest-reuse"], env) for _ in range(args.runs)]
        finally:
            _ktest("down", env=env)
        print(_row("start-up to first test body, reuse (ktest up)", warm), flush=True)
    print(_row("namespace fixture: create + waited deletion", namespace_cost(args.runs)), flush=True)
    if not args.skip_suite:
        for workers in ("0", "2"):
            run = suite(args.suite, workers, env)
            label = f"suite {args.suite} with -n {workers}"
            print(f"{label:<46} {run.seconds:7.1f} s, {run.cores_busy:.2f} cores busy ({run.outcome})",
                  flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
