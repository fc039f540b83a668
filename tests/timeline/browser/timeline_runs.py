"""The inner run of ``failing_suite/`` (fixture ``failing_timelines``): its environment and what
its JUnit report says (each test's outcome and ``ktest_timeline`` property)."""

from __future__ import annotations

import os
import xml.etree.ElementTree as ElementTree
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]


@dataclass(frozen=True)
class InnerRun:
    """What the inner session left: each failing test's timeline file, its output and results."""

    timelines: dict[str, Path]
    outcomes: dict[str, str]
    output: str

    def timeline(self, test: str) -> Path:
        assert self.outcomes.get(test) == "failed", (
            f"the inner test {test} should fail (outcome {self.outcomes.get(test)!r}):\n{self.output[-6000:]}"
        )
        assert test in self.timelines, (
            f"the failing inner test {test} has no `ktest_timeline` JUnit property (timelines: "
            f"{sorted(self.timelines)}); output:\n{self.output[-6000:]}"
        )
        path = self.timelines[test]
        assert path.is_file(), f"{test}'s timeline {path} (JUnit property ktest_timeline) does not exist"
        return path


def inner_environment(state: Path, binary_cache: Path) -> dict[str, str]:
    """The environment of the inner run (as tests/conftest.py's ``inner_env``): the real binary
    cache, a private state directory, none of the outer run's other KTEST_* settings."""
    environment = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith(("KTEST_", "PYTEST_")) or name in ("KTEST_CACHE_DIR", "KTEST_ASSETS")
    }
    environment.update(
        KTEST_CACHE_DIR=os.environ.get("KTEST_CACHE_DIR") or str(binary_cache),
        XDG_STATE_HOME=str(state),
        PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
    )
    return environment


def read_junit(path: Path) -> tuple[dict[str, str], dict[str, Path]]:
    """Outcome per test name, and the ``ktest_timeline`` property of each test that has one."""
    outcomes: dict[str, str] = {}
    timelines: dict[str, Path] = {}
    for case in ElementTree.parse(path).getroot().iter("testcase"):
        name = case.get("name", "")
        tags = {child.tag for child in case}
        outcome = "failed" if "failure" in tags else "error" if "error" in tags else "passed"
        if outcomes.get(name, "passed") == "passed":
            outcomes[name] = outcome
        for prop in case.iter("property"):
            if prop.get("name") == "ktest_timeline":
                timelines[name] = Path(prop.get("value", ""))
    return outcomes, timelines
