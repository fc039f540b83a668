"""Regenerate the screenshots of docs/guides/timeline.md from real timelines of the demo suite.

    python scripts/timeline_screenshot.py [--out docs/images]

Runs two demo tests against operators with a seeded bug (fixtures/operators/seeded_bugs.py), each
in its own pytest session with ``--ktest-timeline on-failure``: the status-update loop
(``test_nothing_is_written_once_converged``) and the conflict storm
(``test_webapp_converges_after_a_conflict_storm``). Each failing test's timeline is opened with
file:// in headless Chromium (offline, as tests/timeline/browser does), the event that shows the
bug is selected, and the window is saved as a PNG. Needs `make browser` and the binaries.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ElementTree
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "timeline" / "browser"))

from timeline_browser import TimelinePage, timeline_page  # noqa: E402

VIEWPORT = {"width": 1400, "height": 860}


def fit_to_window(page: TimelinePage, most: int = 4) -> None:
    """Zoom out (the page's own button) until the whole time axis fits the window, or ``most`` times."""
    for _ in range(most):
        if page.page.eval_on_selector("#board", "board => board.scrollWidth <= board.clientWidth"):
            return
        page.page.click("#zoom-out")


def select_status_rewrite(page: TimelinePage) -> None:
    """The status loop: a MODIFIED event whose diff shows lastTransitionTime rewritten."""
    events = page.page.locator("[data-lane='apiserver'] .event[data-kind='watch-event']")
    for index in range(min(events.count(), 80)):
        events.nth(index).dispatch_event("click")
        old = page.page.locator("#details .diff-row[data-path*='lastTransitionTime'] .old")
        if old.count() and "(absent)" not in old.first.inner_text():
            return
    raise SystemExit("no watch event shows the status loop's rewrite of lastTransitionTime")


def select_conflict(page: TimelinePage) -> None:
    """The conflict storm: the operator's last status write refused with 409."""
    requests = page.page.locator("[data-lane^='operator:'] .event[data-kind='request'].error")
    for index in reversed(range(requests.count())):
        requests.nth(index).dispatch_event("click")
        if re.search(r"\b409\b", page.page.locator("#details").inner_text()):
            return
    raise SystemExit("no request of the operator shows the 409 Conflict of the storm")


@dataclass(frozen=True)
class Shot:
    bug: str
    test: str
    image: str
    select: Callable[[TimelinePage], None]


SHOTS = (
    Shot("status-update-loop", "examples/test_webapp.py::test_nothing_is_written_once_converged",
         "timeline-status-update-loop.png", select_status_rewrite),
    Shot("gives-up-on-conflict", "examples/test_faults.py::test_webapp_converges_after_a_conflict_storm",
         "timeline-conflict-storm.png", select_conflict),
)


def failing_timeline(shot: Shot, workdir: Path) -> Path:
    """Run the demo test with the seeded bug; the timeline its failure wrote."""
    junit = workdir / f"{shot.bug}.xml"
    command = [
        sys.executable, "-m", "pytest", shot.test, "-q", "-p", "no:cacheprovider", f"--junitxml={junit}",
        "--ktest-timeline", "on-failure", "--ktest-artifacts", str(workdir / shot.bug),
    ]
    completed = subprocess.run(
        command, cwd=ROOT, env={**os.environ, "KTEST_SEEDED_BUG": shot.bug}, capture_output=True, text=True,
        check=False,
    )
    for prop in ElementTree.parse(junit).getroot().iter("property") if junit.exists() else ():
        if prop.get("name") == "ktest_timeline":
            return Path(prop.get("value", ""))
    raise SystemExit(
        f"{shot.test} with the seeded bug {shot.bug} wrote no timeline (exit {completed.returncode}):\n"
        f"{completed.stdout[-4000:]}{completed.stderr[-2000:]}"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "images", help="where the PNGs go")
    options = parser.parse_args(argv)
    options.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="ktest-timeline-screenshots-") as temporary:
        for shot in SHOTS:
            timeline = failing_timeline(shot, Path(temporary))
            with timeline_page() as page:
                page.page.set_viewport_size(VIEWPORT)
                page.open(timeline)
                fit_to_window(page)
                shot.select(page)
                page.page.eval_on_selector(".event.selected", "e => e.scrollIntoView({inline: 'center'})")
                if page.requests or page.console_errors:
                    raise SystemExit(f"{timeline}: network {page.requests}, errors {page.console_errors}")
                page.page.screenshot(path=str(options.out / shot.image))
            print(f"{options.out / shot.image}: {shot.bug} ({shot.test})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
