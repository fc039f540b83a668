"""What failure timelines cost: the demo suite (examples/) with ``ktest_timeline`` always (every
test recorded and its page written) against off, interleaved, medians; and the page of a test that
makes 1,000 API calls: its size, and its render time in headless Chromium (median of --renders
loads, from navigation until its lanes hold their events, measured in the page), against a page of
one event rendered in the same run (the browser's own cost).

Run: .venv/bin/python bench/timeline.py [--rounds 3] [--modes off,always] [--calls 1000] [--renders 7]

The suite's time is the sum of its tests' setup, call and teardown times from the JUnit report
(the control plane's start, the same in both modes, is left out); its CPU seconds (pytest and the
processes it waited for) are shown too, and each mode's ratio to off per round. Rounds alternate
the modes, so a machine that gets busier or quieter during the run weighs on both alike.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ElementTree
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

THOUSAND_CALLS = """
import threading
from ktest.operators import run_callable
from ktest.wait import eventually

CALLS = {calls}


def test_a_thousand_calls(cluster, namespace):
    hot = {{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {{"name": "hot"}}}}
    cluster.create(hot, namespace=namespace)
    go = threading.Event()

    def busy(ctx):
        ctx.ready()
        go.wait()
        for index in range(CALLS):
            change = {{"data": {{"n": str(index), "pad": "x" * 2000}}}}
            ctx.cluster.patch(("v1", "ConfigMap", "hot", namespace), change)
        ctx.stop.wait()

    with run_callable(busy, cluster, name="busy", namespaces=[namespace]) as op:
        go.set()
        eventually(lambda: len(op.traffic.writes(name="hot")) >= CALLS, timeout=300, interval=0.5)
    assert False, "fails on purpose: its timeline is written"
"""


def run_suite(mode: str, artifacts: Path) -> tuple[float, float, float, int]:
    """(sum of the tests' times, wall time, CPU seconds, tests) of one run of the demo suite.

    The CPU seconds are those of pytest and every process it waited for (etcd, kube-apiserver,
    kube-controller-manager, subprocess operators): what the recording adds to the machine's work,
    less swayed than times by a neighbour on a shared machine."""
    junit = artifacts / "junit.xml"
    env = {**os.environ, "KTEST_TIMELINE": mode, "KTEST_ARTIFACTS": str(artifacts)}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.monotonic()
    subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "examples", f"--junitxml={junit}"],
        cwd=ROOT,
        env=env,
        check=False,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    wall = time.monotonic() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    cases = list(ElementTree.parse(junit).iter("testcase"))
    return sum(float(case.get("time") or 0) for case in cases), wall, cpu, len(cases)


def render_milliseconds(pages: list[Path], renders: int) -> list[float]:
    """Median milliseconds to render each page in headless Chromium, loads interleaved."""
    sys.path.insert(0, str(ROOT / "tests" / "timeline" / "browser"))
    from timeline_browser import timeline_page

    samples: list[list[float]] = [[] for _ in pages]
    with timeline_page() as browser:
        for _ in range(renders):
            for index, page in enumerate(pages):
                samples[index].append(browser.open(page))
    return [statistics.median(times) for times in samples]


def one_event_page(page: Path, scratch: Path) -> Path:
    """``page`` with its embedded data cut to its first event: the baseline of a render."""
    import json
    import re

    text = page.read_text()
    found = re.search(r'(id="ktest-timeline-data">)(.*?)(</script>)', text, re.S)
    assert found, f"{page} embeds no timeline data"
    data = json.loads(found.group(2))
    data["events"] = data["events"][:1]
    small = json.dumps(data).replace("</", "<\\/")
    baseline = scratch / "one-event.html"
    baseline.write_text(text[: found.start(2)] + small + text[found.end(2) :])
    return baseline


def thousand_calls(calls: int, scratch: Path) -> tuple[int, int, Path]:
    """(page bytes, request events, page) of the timeline of a test making ``calls`` writes."""
    import json
    import re

    project = scratch / "thousand"
    project.mkdir()
    (project / "test_thousand.py").write_text(THOUSAND_CALLS.format(calls=calls))
    artifacts = project / "artifacts"
    env = {**os.environ, "KTEST_TIMELINE": "on-failure", "KTEST_ARTIFACTS": str(artifacts)}
    subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "test_thousand.py"],
        cwd=project,
        env=env,
        check=False,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    (page,) = (artifacts / "timelines").glob("*.html")
    found = re.search(r'id="ktest-timeline-data">(.*?)</script>', page.read_text(), re.S)
    data = json.loads(found.group(1)) if found else {"events": []}
    requests = sum(1 for event in data["events"] if event["kind"] == "request" and event["lane"] != "test")
    return page.stat().st_size, requests, page


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--modes", default="off,always")
    parser.add_argument("--calls", type=int, default=1000)
    parser.add_argument("--renders", type=int, default=7)
    args = parser.parse_args()
    modes = args.modes.split(",")
    times: dict[str, list[float]] = {mode: [] for mode in modes}
    cpus: dict[str, list[float]] = {mode: [] for mode in modes}
    with tempfile.TemporaryDirectory(prefix="ktest-bench-timeline-") as scratch:
        for round_number in range(args.rounds):
            order = modes if round_number % 2 == 0 else list(reversed(modes))
            for mode in order:
                artifacts = Path(scratch) / f"{mode}-{round_number}"
                tests, wall, cpu, count = run_suite(mode, artifacts)
                pages = (
                    len(list((artifacts / "timelines").glob("*.html")))
                    if (artifacts / "timelines").exists()
                    else 0
                )
                times[mode].append(tests)
                cpus[mode].append(cpu)
                print(
                    f"round {round_number + 1} {mode:>10}: tests {tests:6.1f} s (wall {wall:5.1f} s, "
                    f"CPU {cpu:6.1f} s, {count} tests, {pages} pages)",
                    flush=True,
                )
        medians = {mode: statistics.median(samples) for mode, samples in times.items() if samples}
        for mode, median in medians.items():
            print(f"median {mode:>10}: {median:6.1f} s")
        if "off" in medians:
            for mode, median in medians.items():
                if mode == "off":
                    continue
                paired = [100 * (mine / off - 1) for mine, off in zip(times[mode], times["off"], strict=True)]
                cpu = 100 * (statistics.median(cpus[mode]) / statistics.median(cpus["off"]) - 1)
                print(
                    f"{mode} against off: {100 * (median / medians['off'] - 1):+.1f} % (medians); "
                    f"per round {', '.join(f'{ratio:+.1f}' for ratio in paired)} %, their median "
                    f"{statistics.median(paired):+.1f} %; CPU seconds {cpu:+.1f} % (medians)"
                )
        if args.calls:
            size, requests, page = thousand_calls(args.calls, Path(scratch))
            print(
                f"a test of {args.calls} writes: page {size / 1024 / 1024:.2f} MiB, "
                f"{requests} operator requests"
            )
            if args.renders:
                pages = [page, one_event_page(page, Path(scratch))]
                full, baseline = render_milliseconds(pages, args.renders)
                print(
                    f"render in headless Chromium, median of {args.renders}: {full:.0f} ms "
                    f"(a page of one event: {baseline:.0f} ms; ratio {full / baseline:.2f})"
                )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
