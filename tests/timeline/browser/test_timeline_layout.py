"""The page's layout in a headless Chromium, on pages built from timeline data directly: no event
hides under the sticky lane titles, and an upgrade and a gap in the API server's view are drawn as
wide as they lasted, with their details a click away."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from timeline_browser import TimelinePage

from ktest.timeline.model import Event, TimelineData
from ktest.timeline.rendering import write_page

pytestmark = pytest.mark.xdist_group("browser")


def page_of(tmp_path: Path, events: list[Event]) -> Path:
    timeline = TimelineData("tests/test_x.py::test_y", time.time(), duration=4.0, outcome="failed")
    timeline.events = events
    return write_page(timeline, tmp_path / "timeline.html")


def test_an_event_at_the_start_is_not_under_its_lanes_title(browser: TimelinePage, tmp_path: Path) -> None:
    first = Event("test", "request", 0.0, "create configmaps -> 201", {"code": 201})
    browser.open(page_of(tmp_path, [first]))

    event = browser.page.locator(".event[data-kind=request]")
    title = browser.page.locator("[data-lane=test] .lane-title")
    event_box, title_box = event.bounding_box(), title.bounding_box()
    assert event_box is not None and title_box is not None
    assert event_box["x"] >= title_box["x"] + title_box["width"], (
        f"the event at +0s starts at x={event_box['x']}, under the lane title ending at "
        f"x={title_box['x'] + title_box['width']}"
    )
    middle = (event_box["x"] + event_box["width"] / 2, event_box["y"] + event_box["height"] / 2)
    on_top = browser.page.evaluate("([x, y]) => document.elementFromPoint(x, y).className", list(middle))
    assert "event" in on_top.split(), f"at the event's middle the page shows {on_top!r}, not the event"


def test_an_upgrade_and_the_gap_it_leaves_are_as_wide_as_they_lasted(
    browser: TimelinePage, tmp_path: Path
) -> None:
    upgrade = Event(
        "controllers",
        "upgrade",
        1.0,
        "control plane upgrade 1.36.3 -> 1.37.2 (2.00 s)",
        {"from": "1.36.3", "to": "1.37.2", "until": 3.0, "seconds": 2.0, "no_longer_served": []},
    )
    gap = Event(
        "apiserver",
        "gap",
        1.2,
        "no view of the API server for 1.60 s: the control plane was being upgraded (1.36.3 -> 1.37.2)",
        {"until": 2.8, "seconds": 1.6, "why": "the control plane was being upgraded", "missing": []},
    )
    browser.open(page_of(tmp_path, [upgrade, gap]))

    drawn = browser.page.locator("[data-lane=controllers] .event[data-kind=upgrade]")
    box = drawn.bounding_box()
    scale = browser.view()["scale"]  # pixels per second
    assert box is not None and abs(box["width"] - 2.0 * scale) < 2, f"the upgrade is {box} wide, not 2 s"
    gap_box = browser.page.locator("[data-lane=apiserver] .event[data-kind=gap]").bounding_box()
    assert gap_box is not None and abs(gap_box["width"] - 1.6 * scale) < 2
    drawn.dispatch_event("click")
    details = browser.page.locator("#details").inner_text()
    assert "control plane upgrade 1.36.3 -> 1.37.2" in details and "until" in details
    assert browser.console_errors == [] and browser.requests == []
