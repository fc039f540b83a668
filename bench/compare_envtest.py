"""ktest against Go envtest and its own goals, side by side in one run (issue 15).

    python bench/compare_envtest.py [--runs 7] [--suite tests/plugin] [--cold-build]

One round measures, in this order, each of:
* Go envtest cold start (``bench/envtest-baseline``, built here if needed; one
  start/stop per round, timed inside the Go program);
* ktest cold start without controllers (etcd + kube-apiserver, what envtest runs);
* ktest cold start: a bare ``ControlPlane`` with the garbage-collector and
  namespace controllers, until it is ready for tests (API server ready, the
  ``default`` namespace exists, both controllers running), and the RSS of
  etcd + kube-apiserver + kube-controller-manager right after it;
* attach to a warm ``ktest up`` control plane: launching ``pytest --ktest-reuse``
  to the first line of a test using ``cluster``;
* the plugin's cost to a pytest run that uses no ktest fixture: wall time and peak
  RSS of one trivial test with ktest loaded vs ``-p no:ktest``.
Rounds interleave the scenarios, so a change of machine load hits all of them;
medians are printed with ratios and the goals of issue 15, and the load average.

``--suite ARGS`` also times ``pytest -n 0`` and ``-n 2`` on ARGS (paths and options) once
each (slow), and how many cores the machine kept busy in each: the ``-n 0`` figure caps
the speed-up any worker count can reach.  ``--suite-only`` measures just that.
``--cold-build`` also times a build of one version's binaries into a throwaway
ktest cache and an empty GOCACHE (many minutes; the real caches are untouched).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))

import plugin_startup  # noqa: E402  (a sibling script)
from controlplane_start import bench_assets, rss_mib  # noqa: E402  (a sibling script)

from ktest.assets.bundle import Assets  # noqa: E402
from ktest.controlplane import ControlPlane  # noqa: E402

COMPONENTS = ("etcd", "kube-apiserver", "kube-controller-manager")


@dataclass
class Samples:
    values: dict[str, list[float]] = field(default_factory=dict)

    def add(self, name: str, value: float) -> None:
        self.values.setdefault(name, []).append(value)

    def median(self, name: str) -> float:
        return statistics.median(self.values[name])

    def spread(self, name: str) -> str:
        found = self.values[name]
        return f"{min(found):.3f}-{max(found):.3f}"


def _allocated_mib(directory: Path) -> float:
    """What the files under ``directory`` occupy (on tmpfs: memory), sparse parts excluded."""
    return sum(path.stat().st_blocks * 512 for path in directory.rglob("*") if path.is_file()) / 2**20


def ktest_cold_start(assets: Assets, samples: Samples, *, template: bool = True) -> None:
    began = time.perf_counter()
    plane = ControlPlane(assets=assets, etcd_template=template)
    plane.start()
    if not template:
        samples.add("ktest ready, no etcd template", time.perf_counter() - began)
        samples.add("etcd data, no etcd template", _allocated_mib(plane.directory / "etcd"))
        plane.stop()
        return
    samples.add("ktest ready", time.perf_counter() - began)
    samples.add("etcd data", _allocated_mib(plane.directory / "etcd"))
    try:
        total = 0.0
        for name, process in plane.processes().items():
            if process.pid:
                rss = rss_mib(process.pid)
                samples.add(f"rss {name}", rss)
                total += rss
        samples.add("rss total", total)
    finally:
        plane.stop()


def ktest_deferred_controllers(assets: Assets, samples: Samples) -> None:
    """The pytest plugin's way: ``start()`` returns once the API server is ready and
    kube-controller-manager is launched; the session's fixtures (CRDs, operators) run while
    it comes up, and the first test body waits for it."""
    began = time.perf_counter()
    plane = ControlPlane(assets=assets, wait_for_controllers=False)
    plane.start()
    samples.add("ktest usable, controllers starting", time.perf_counter() - began)
    try:
        plane.wait_until_controllers_ready()
        samples.add("ktest deferred, controllers running", time.perf_counter() - began)
    finally:
        plane.stop()


def ktest_cold_start_without_controllers(assets: Assets, samples: Samples) -> None:
    """etcd + kube-apiserver alone, as Go envtest runs them: ready for tests (from the etcd
    template: /readyz without the bootstrap hooks, every bootstrap object served)."""
    began = time.perf_counter()
    plane = ControlPlane(assets=assets, controllers="none")
    plane.start()
    samples.add("ktest ready, no controllers", time.perf_counter() - began)
    plane.stop()


def envtest_baseline_binary() -> Path:
    from ktest.operators.go_operator import build_go_binary

    return build_go_binary(BENCH / "envtest-baseline")


def envtest_cold_start(binary: Path, assets: Assets, samples: Samples) -> None:
    output = subprocess.run(
        [str(binary), "-runs", "1"],
        env={**os.environ, "KUBEBUILDER_ASSETS": str(assets.directory)},
        capture_output=True,
        text=True,
        check=True,
        timeout=300,
    ).stdout
    ready, _stop = output.split()
    samples.add("envtest ready", float(ready))


def attach_to_warm(directory: Path, env: dict[str, str], samples: Samples) -> None:
    samples.add("attach", plugin_startup.startup(directory, ["--ktest-reuse"], env))
    samples.add("pytest alone", plugin_startup.startup(directory, ["-p", "no:ktest"], env, plain=True))


def plugin_cost(directory: Path, env: dict[str, str], samples: Samples) -> None:
    for label, extra in (("plain", ["-p", "no:ktest"]), ("plugin", [])):
        wall, cpu, rss = plugin_startup.run_once(directory, extra, env)
        samples.add(f"{label} wall", wall)
        samples.add(f"{label} cpu", cpu)
        samples.add(f"{label} rss", rss)


def cold_build(version: str | None) -> float:
    """Seconds to build one version's binaries with a throwaway ktest cache and GOCACHE."""
    with tempfile.TemporaryDirectory(prefix="ktest-cold-build-") as scratch:
        env = dict(os.environ, KTEST_CACHE_DIR=f"{scratch}/ktest", GOCACHE=f"{scratch}/gocache")
        command = [sys.executable, "-m", "ktest", "binaries", "install", "--source", "build"]
        if version:
            command += ["--k8s-version", version]
        began = time.monotonic()
        subprocess.run(command, env=env, check=True)
        seconds = time.monotonic() - began
        subprocess.run(["go", "clean", "-cache"], env=env, check=False, capture_output=True)
        return seconds


@dataclass(frozen=True)
class Row:
    measure: str
    ours: str
    baseline: str
    ratio: str
    goal: str
    met: bool | None


def _table(rows: list[Row]) -> str:
    header = Row("measure", "ktest", "baseline", "ratio / delta", "goal", None)
    cells = [[r.measure, r.ours, r.baseline, r.ratio, r.goal, "" if r.met is None else
              ("met" if r.met else "NOT met")] for r in [header, *rows]]
    widths = [max(len(line[column]) for line in cells) for column in range(len(cells[0]))]
    return "\n".join("  ".join(text.ljust(width) for text, width in zip(line, widths, strict=True)).rstrip()
                     for line in cells)


def suite_rows(arguments: str, env: dict[str, str]) -> list[Row]:
    """``-n 2`` against ``-n 0`` on one suite, and the ceiling the serial run's CPU use sets:
    with ``cores_busy`` of the machine's cores already busy at ``-n 0``, no number of
    workers can be more than ``cpu_count / cores_busy`` times faster."""
    serial = plugin_startup.suite(arguments, "0", env)
    parallel = plugin_startup.suite(arguments, "2", env)
    cores = os.cpu_count() or 1
    print(f"-n 0: {serial.outcome}\n-n 2: {parallel.outcome}")
    speed_up = serial.seconds / parallel.seconds
    return [
        Row(f"{arguments}: -n 2 vs -n 0 (speed-up)", f"{parallel.seconds:.0f} s", f"{serial.seconds:.0f} s",
            f"{speed_up:.2f}x", ">= 1.7x", speed_up >= 1.7),
        Row("  cores busy on average (machine-wide)", f"{parallel.cores_busy:.2f} at -n 2",
            f"{serial.cores_busy:.2f} at -n 0", f"ceiling {cores / serial.cores_busy:.2f}x", "", None),
    ]


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--suite", help="also time pytest -n 0 and -n 2 on these paths and options "
                        "(shell-split, e.g. 'tests --ignore=tests/kind_machinery'; slow)")
    parser.add_argument("--suite-only", action="store_true", help="measure only --suite, not the rounds")
    parser.add_argument("--cold-build", action="store_true", help="also time a cold build (many minutes)")
    parser.add_argument("--k8s-version", help="the version for --cold-build (default: the latest)")
    args = parser.parse_args()

    assets = bench_assets()
    print(f"binaries: {assets.directory}; load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores",
          flush=True)
    # Python runs as users run it: byte code cached (PYTHONDONTWRITEBYTECODE would make every
    # pytest run compile ktest and pytest's assertion rewriting again: +0.3-0.5 s).
    env = {k: v for k, v in os.environ.items()
           if (not k.startswith("KTEST_") or k == "KTEST_CACHE_DIR") and k != "PYTHONDONTWRITEBYTECODE"}
    if args.suite_only:
        if not args.suite:
            parser.error("--suite-only needs --suite")
        print(_table(suite_rows(args.suite, env)))
        return 0
    baseline = envtest_baseline_binary()
    samples = Samples()
    loads = []
    with tempfile.TemporaryDirectory(prefix="ktest-bench-") as raw:
        directory = Path(raw)
        env["XDG_STATE_HOME"] = str(directory / "state")
        up = [sys.executable, "-m", "ktest", "up"]
        subprocess.run(up, env=env, check=True, capture_output=True, timeout=600)
        try:
            rounds: list[Callable[[], None]] = [
                lambda: envtest_cold_start(baseline, assets, samples),
                lambda: ktest_cold_start(assets, samples),
                lambda: ktest_cold_start(assets, samples, template=False),
                lambda: ktest_cold_start_without_controllers(assets, samples),
                lambda: ktest_deferred_controllers(assets, samples),
                lambda: attach_to_warm(directory, env, samples),
                lambda: plugin_cost(directory, env, samples),
            ]
            warm_up = Samples()  # page cache, --help probes, .pyc files: measured, then discarded
            envtest_cold_start(baseline, assets, warm_up)
            ktest_cold_start(assets, warm_up)  # also builds the etcd template if there is none
            attach_to_warm(directory, env, warm_up)
            plugin_cost(directory, env, warm_up)
            for index in range(args.runs):
                for measure in rounds:
                    measure()
                loads.append(os.getloadavg()[0])
                print(f"round {index + 1}/{args.runs}: ktest {samples.values['ktest ready'][-1]:.2f} s, "
                      f"envtest {samples.values['envtest ready'][-1]:.2f} s, "
                      f"attach {samples.values['attach'][-1]:.2f} s, load {loads[-1]:.2f}", flush=True)
        finally:
            subprocess.run([sys.executable, "-m", "ktest", "down"], env=env, check=False,
                           capture_output=True, timeout=120)

    ours, theirs = samples.median("ktest ready"), samples.median("envtest ready")
    plugin_delta = samples.median("plugin wall") - samples.median("plain wall")
    rss_delta = samples.median("plugin rss") - samples.median("plain rss")
    cpu_delta = samples.median("plugin cpu") - samples.median("plain cpu")
    rss = samples.median("rss total")
    rows = [
        Row("cold start to ready (ktest: GC + namespace controllers)", f"{ours:.2f} s",
            f"envtest {theirs:.2f} s", f"{ours / theirs:.2f}x", "<= 0.6x", ours / theirs <= 0.6),
        Row("cold start, ktest without controllers (etcd + apiserver, as envtest)",
            f"{samples.median('ktest ready, no controllers'):.2f} s", f"envtest {theirs:.2f} s",
            f"{samples.median('ktest ready, no controllers') / theirs:.2f}x", "", None),
        Row("usable while the controllers start (the plugin: session fixtures run meanwhile)",
            f"{samples.median('ktest usable, controllers starting'):.2f} s", f"envtest {theirs:.2f} s",
            f"{samples.median('ktest usable, controllers starting') / theirs:.2f}x", "", None),
        Row("same, until the controllers run (what the first test body waits for)",
            f"{samples.median('ktest deferred, controllers running'):.2f} s", f"envtest {theirs:.2f} s",
            f"{samples.median('ktest deferred, controllers running') / theirs:.2f}x", "", None),
        Row("cold start, ktest without the etcd template",
            f"{samples.median('ktest ready, no etcd template'):.2f} s", f"envtest {theirs:.2f} s",
            f"{samples.median('ktest ready, no etcd template') / theirs:.2f}x", "", None),
        Row("attach to a warm `ktest up`, launch to first test", f"{samples.median('attach'):.2f} s",
            f"pytest alone {samples.median('pytest alone'):.2f} s",
            f"+{samples.median('attach') - samples.median('pytest alone'):.2f} s", "< 0.5 s",
            samples.median("attach") < 0.5),
        Row("plugin cost, run using no ktest fixture", f"{samples.median('plugin wall'):.3f} s",
            f"-p no:ktest {samples.median('plain wall'):.3f} s",
            f"{plugin_delta * 1000:+.0f} ms ({cpu_delta * 1000:+.0f} ms CPU), {rss_delta:+.1f} MiB",
            "< +50 ms", plugin_delta < 0.05),
        Row("control-plane RSS (etcd + apiserver + kcm)", f"{rss:.0f} MiB",
            " + ".join(f"{samples.median(f'rss {name}'):.0f}" for name in COMPONENTS
                       if f"rss {name}" in samples.values), "", "<= 300 MiB", rss <= 300),
        Row("etcd data directory (tmpfs: memory too, not in RSS)", f"{samples.median('etcd data'):.0f} MiB",
            f"no etcd template {samples.median('etcd data, no etcd template'):.0f} MiB", "", "", None),
    ]
    if args.suite:
        rows.extend(suite_rows(args.suite, env))
    if args.cold_build:
        seconds = cold_build(args.k8s_version)
        rows.append(Row("cold build of one version (empty caches)", f"{seconds / 60:.1f} min", "", "",
                        "<= 7 min", seconds <= 420))
    print(f"\nmedians of {args.runs} interleaved rounds (spread: ktest {samples.spread('ktest ready')} s, "
          f"envtest {samples.spread('envtest ready')} s, attach {samples.spread('attach')} s)")
    print(_table(rows))
    print(f"load average during the rounds: median {statistics.median(loads):.2f}, max {max(loads):.2f} "
          f"on {os.cpu_count()} cores")
    print(f"ready without controllers: {samples.median('ktest ready, no controllers') / theirs:.2f}x envtest")
    usable = samples.median("ktest usable, controllers starting")
    print(f"usable with controllers starting: {usable / theirs:.2f}x envtest")
    print(f"ready with controllers: {ours / theirs:.2f}x envtest")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
