"""The stage table `make test` ends with, read from the JUnit XML each pytest stage writes."""

from __future__ import annotations

import xml.etree.ElementTree as ElementTree
from dataclasses import dataclass, field
from pathlib import Path

SLOWEST = 10


@dataclass
class TestCounts:
    passed: int = 0
    failed: int = 0
    skipped: int = 0
    slowest: list[tuple[float, str]] = field(default_factory=list)

    @property
    def total(self) -> int:
        return self.passed + self.failed + self.skipped


@dataclass
class StageResult:
    name: str
    status: int
    started: float
    wall: float
    skips_allowed: int = 0
    tests: TestCounts | None = None
    cpu: float | None = None
    """CPU seconds of the job's process tree (None: not measured)."""

    @property
    def over_allowance(self) -> bool:
        return self.tests is not None and self.tests.skipped > self.skips_allowed

    @property
    def passed(self) -> bool:
        return self.status == 0 and not self.over_allowance

    def verdict(self) -> str:
        if self.status == 5:
            return "failed: no tests collected (pytest's exit status 5)"
        if self.status != 0:
            return f"failed with status {self.status}"
        if self.over_allowance:
            assert self.tests is not None
            return (f"failed: {self.tests.skipped} tests skipped, {self.skips_allowed} allowed "
                    "(a skip hides what is not tested: make it run, or raise the stage's allowance "
                    "in scripts/stages/stage_plan.py saying why)")
        return "passed"


def read_junit(path: Path) -> TestCounts | None:
    """Outcome counts and the slowest tests from pytest's JUnit XML (None if it wrote none)."""
    if not path.exists():
        return None
    counts = TestCounts()
    times: list[tuple[float, str]] = []
    for case in ElementTree.parse(path).getroot().iter("testcase"):
        outcomes = {child.tag for child in case}
        if outcomes & {"failure", "error"}:
            counts.failed += 1
        elif "skipped" in outcomes:
            counts.skipped += 1
        else:
            counts.passed += 1
        name = f"{case.get('classname', '')}::{case.get('name', '')}"
        times.append((float(case.get("time") or 0), name))
    counts.slowest = sorted(times, reverse=True)[:SLOWEST]
    return counts


def minutes(seconds: float) -> str:
    return f"{int(seconds // 60)}:{int(seconds % 60):02d}"


def render_table(results: list[StageResult]) -> str:
    """Markdown: one row per job, the CPU of all of them, then each pytest stage's slowest tests."""
    lines = [
        "## make test: stages",
        "",
        "| stage | started | wall | CPU | result | passed | failed | skipped (allowed) |",
        "| --- | ---: | ---: | ---: | --- | ---: | ---: | ---: |",
    ]
    for result in results:
        tests = result.tests
        counts = (
            f"{tests.passed} | {tests.failed} | {tests.skipped} ({result.skips_allowed})"
            if tests is not None
            else " | | "
        )
        cpu = minutes(result.cpu) if result.cpu is not None else ""
        lines.append(
            f"| {result.name} | {minutes(result.started)} | {minutes(result.wall)} | {cpu} | "
            f"{'passed' if result.passed else 'FAILED'} | {counts} |"
        )
    measured = [result for result in results if result.cpu is not None]
    if measured:
        cpu = sum(result.cpu or 0.0 for result in measured)
        span = max(result.started + result.wall for result in results) - min(r.started for r in results)
        cores = cpu / span if span > 0 else 0.0
        lines += ["", f"CPU of all stages: {minutes(cpu)} in {minutes(span)}, {cores:.2f} cores on "
                      "average (kind's containers not counted)."]
    for result in results:
        if result.tests is None or not result.tests.slowest:
            continue
        lines += ["", f"### {result.name}: the {len(result.tests.slowest)} slowest tests", ""]
        lines += [f"- {seconds:6.1f} s {name}" for seconds, name in result.tests.slowest]
    return "\n".join(lines) + "\n"
