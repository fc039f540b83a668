"""Run the demo suite against the correct operators and against every seeded bug.

    python scripts/detection_matrix.py [--bug NAME ...] [--no-reuse] [--report FILE] [-- PYTEST_ARGS]

For each variant (first the correct operators, then each bug of
``fixtures/operators/seeded_bugs.py``) it runs ``pytest examples`` with
``KTEST_SEEDED_BUG`` set, reads the JUnit XML report, and prints:

- a matrix of which tests failed under which bug;
- for each bug, whether it was caught and the failure message of each test that
  caught it (the symptom: what a user of ktest would read), with the failure timeline
  that test wrote (``--ktest-timeline on-failure``: one HTML page per failing test,
  under the run's own artifacts directory).

Exit status 0 only if the correct operators pass every test and every bug makes
at least one test fail. One warm control plane (``ktest up``) is shared by all
runs unless ``--no-reuse``; the script stops it at the end if it started it.
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ElementTree
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from fixtures.operators.seeded_bugs import BUGS, ENV_VAR, SeededBug  # noqa: E402

WARM_PLANE = "detection-matrix"
CLEAN = "(none)"
PASSED, FAILED, ERROR, SKIPPED = "passed", "failed", "error", "skipped"
JUNIT_STATUS = {"failure": FAILED, "error": ERROR, "skipped": SKIPPED}


@dataclass
class Outcome:
    status: str
    message: str = ""
    timeline: str = ""  # the page --ktest-timeline wrote for a failing test (JUnit property ktest_timeline)


@dataclass
class Run:
    variant: str
    outcomes: dict[str, Outcome] = field(default_factory=dict)
    seconds: float = 0.0
    exit_code: int = 0
    log: Path | None = None

    @property
    def failing(self) -> list[str]:
        return [test for test, outcome in self.outcomes.items() if outcome.status in (FAILED, ERROR)]


def main(argv: list[str] | None = None) -> int:
    options = parse_arguments(argv)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(128 + signal.SIGTERM))  # run the cleanup below
    bugs = [SeededBug(name) for name in options.bug] if options.bug else list(SeededBug)
    workdir = Path(tempfile.mkdtemp(prefix="ktest-detection-matrix-"))
    started_plane = False
    pytest_args = list(options.pytest_args)
    if not options.no_reuse:
        started_plane = warm_up()
        pytest_args.append("--ktest-reuse")
    runs: list[Run] = []
    try:
        for variant in [CLEAN, *(bug.value for bug in bugs)]:
            run = run_suite(variant, pytest_args, workdir)
            runs.append(run)
            print(
                f"{variant:<34} {len(run.outcomes):>3} tests, {len(run.failing):>2} failed, "
                f"{run.seconds:6.1f}s   log: {run.log}",
                flush=True,
            )
    finally:
        if started_plane:
            subprocess.run([sys.executable, "-m", "ktest", "down", "--name", WARM_PLANE], check=False)
    report, ok = render(runs)
    print(report)
    if options.report:
        Path(options.report).write_text(report + "\n")
    return 0 if ok else 1


def parse_arguments(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--bug",
        action="append",
        choices=[bug.value for bug in SeededBug],
        help="run only this bug (repeatable; default: every bug)",
    )
    parser.add_argument("--no-reuse", action="store_true", help="let every run start its own control plane")
    parser.add_argument("--report", metavar="FILE", help="also write the report to FILE")
    parser.add_argument("pytest_args", nargs="*", help="extra pytest arguments (after --)")
    return parser.parse_args(argv)


def warm_up() -> bool:
    """Start (or find) the shared warm control plane; True if this script started it."""
    status = subprocess.run(
        [sys.executable, "-m", "ktest", "status"], capture_output=True, text=True, check=False, cwd=ROOT
    )
    already = f"running: {WARM_PLANE}:" in status.stdout
    # The demo suite asks for simulated nodes (pyproject.toml's ktest_nodes): so does its warm plane.
    subprocess.run(
        [sys.executable, "-m", "ktest", "up", "--name", WARM_PLANE, "--nodes", "3"], check=True, cwd=ROOT
    )
    return not already


def run_suite(variant: str, pytest_args: list[str], workdir: Path) -> Run:
    slug = "correct" if variant == CLEAN else variant
    junit = workdir / f"{slug}.xml"
    log = workdir / f"{slug}.log"
    env = dict(os.environ)
    env[ENV_VAR] = "" if variant == CLEAN else variant
    command = [
        sys.executable,
        "-m",
        "pytest",
        "examples",
        "-q",
        "-p",
        "no:cacheprovider",
        f"--junitxml={junit}",
        "--ktest-timeline",
        "on-failure",
        "--ktest-artifacts",
        str(workdir / slug),
        *pytest_args,
    ]
    started = time.monotonic()
    with log.open("w") as output:
        completed = subprocess.run(command, cwd=ROOT, env=env, stdout=output, stderr=subprocess.STDOUT)
    run = Run(variant, seconds=time.monotonic() - started, exit_code=completed.returncode, log=log)
    if junit.exists():
        run.outcomes = read_junit(junit)
    else:
        run.outcomes = {
            "(pytest did not run: see log)": Outcome(ERROR, f"exit status {completed.returncode}")
        }
    return run


def read_junit(path: Path) -> dict[str, Outcome]:
    outcomes: dict[str, Outcome] = {}
    for case in ElementTree.parse(path).getroot().iter("testcase"):
        module = case.get("classname", "").rpartition(".")[2]
        test = f"{module}::{case.get('name')}"
        status, message = PASSED, ""
        for child in case:
            if child.tag in JUNIT_STATUS:
                status = JUNIT_STATUS[child.tag]
                message = symptom(child.get("message") or child.text or "")
                break
        timelines = [p.get("value", "") for p in case.iter("property") if p.get("name") == "ktest_timeline"]
        # a test can pass its call and error in teardown: keep the worst
        if test in outcomes and outcomes[test].status != PASSED and status == PASSED:
            continue
        outcomes[test] = Outcome(status, message, timelines[0] if timelines else "")
    return outcomes


_NOISE = (
    "Last failure",
    "Values the check saw",
    "[+",
    "assert ",
    "+ ",
    "Rule:",
    "Observed:",
    "kopf ",
    "Traceback",
)
_END = ("Values the check saw", "Rule:")  # what follows is context, not the symptom
_PREFIXES = (
    "AssertionError: ",
    "ktest.errors.OperatorError: ",
    "E   ",
    "failed on setup with ",
    "failed on teardown with ",
)
_LOG_LINE = re.compile(r"^\d\d:\d\d:\d\d\.\d+ (ERROR|WARNING|INFO)\s+[\w.]+: (\[[^]]*\] )?")


def symptom(message: str, lines: int = 3) -> str:
    """The first meaningful lines of a failure message (headline, then the innermost failure)."""
    found: list[str] = []
    for raw in message.splitlines():
        text = raw.strip().strip('"')
        for prefix in _PREFIXES:
            text = text.removeprefix(prefix).strip().strip('"')
        text = _LOG_LINE.sub("", text)
        if text.startswith(_END) and found:
            break
        if not text or text == "AssertionError" or text.startswith(_NOISE):
            continue
        found.append(text if len(text) <= 400 else text[:397] + "...")
        if len(found) == lines:
            break
    return "\n".join(found) or message.strip()


def render(runs: list[Run]) -> tuple[str, bool]:
    clean, bug_runs = runs[0], runs[1:]
    tests = sorted({test for run in runs for test in run.outcomes})
    numbers = {run.variant: str(index + 1) for index, run in enumerate(bug_runs)}
    lines = ["", "Seeded bugs:"]
    for run in bug_runs:
        info = BUGS[SeededBug(run.variant)]
        lines.append(
            f"  {numbers[run.variant]:>2}. {run.variant} ({', '.join(info.operators)}): {info.description}"
        )

    width = max(len(test) for test in tests)
    header = " ".join(f"{numbers[run.variant]:>2}" for run in bug_runs)
    lines += [
        "",
        "Detection matrix (X: the test failed with that bug; column ok: the correct operators):",
        "",
    ]
    lines.append(f"{'test':<{width}}  ok  {header}")
    for test in tests:
        cells = []
        for run in bug_runs:
            outcome = run.outcomes.get(test)
            cells.append(" X" if outcome and outcome.status in (FAILED, ERROR) else " .")
        clean_outcome = clean.outcomes.get(test)
        clean_cell = {PASSED: "ok", SKIPPED: "sk"}.get(clean_outcome.status if clean_outcome else "", "!!")
        lines.append(f"{test:<{width}}  {clean_cell}  {' '.join(cells)}")

    ok = True
    lines += ["", "Per bug:"]
    for run in bug_runs:
        caught = bool(run.failing)
        ok = ok and caught
        verdict = f"CAUGHT by {len(run.failing)} test(s)" if caught else "NOT CAUGHT"
        lines.append(f"  {numbers[run.variant]:>2}. {run.variant}: {verdict} ({run.seconds:.0f}s)")
        for test in run.failing:
            lines.append(f"      {test}")
            lines += [f"        | {line}" for line in run.outcomes[test].message.splitlines()]
            lines.append(f"        timeline: {run.outcomes[test].timeline or '(none written)'}")
    if clean.failing or clean.exit_code != 0:
        ok = False
        lines += ["", f"The correct operators FAILED {len(clean.failing)} test(s) (see {clean.log}):"]
        lines += [f"  {test}: {clean.outcomes[test].message}" for test in clean.failing]
    else:
        lines += ["", f"Correct operators: all {len(clean.outcomes)} tests passed in {clean.seconds:.0f}s."]
    total = sum(run.seconds for run in runs)
    lines.append(f"Total: {len(runs)} runs in {total:.0f}s. {'OK' if ok else 'FAILED'}.")
    return "\n".join(lines), ok


if __name__ == "__main__":
    raise SystemExit(main())
