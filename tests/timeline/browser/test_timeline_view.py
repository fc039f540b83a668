"""The timeline's first view and its keys, in a headless Chromium: the page opens on the whole
test (from the operator's first write to the failing assertion, no scrolling), ``+``/``-`` zoom
around the middle of the view, the arrows pan, ``0`` fits the whole test again."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from timeline_browser import TimelinePage

from ktest.timeline.model import Event, TimelineData
from ktest.timeline.rendering import write_page

pytestmark = pytest.mark.xdist_group("browser")
DURATION = 30.0


def middle_of(view: dict[str, float]) -> float:
    """The time at the middle of the view's tracks (right of the 190 px titles, after the 12 px gutter)."""
    return (view["scrollLeft"] + (view["clientWidth"] - 190) / 2 - 12) / view["scale"]


def long_test_page(tmp_path: Path) -> Path:
    """A 30 s test: the operator writes in its first 0.4 s, the assertion fails at the end."""
    timeline = TimelineData("tests/test_x.py::test_hi", time.time(), duration=DURATION, outcome="failed")
    timeline.operators = ["greeter"]
    timeline.events = [
        Event("operator:greeter", "request", 0.05, "create configmaps -> 201", {"code": 201}),
        Event("operator:greeter", "request", 0.4, "patch configmaps/hi -> 200", {"code": 200}),
        Event("test", "attempt", 15.0, "attempt 60", {"verdict": "failed"}),
        Event("test", "assertion-failure", DURATION - 0.01, "AssertionError", {}),
    ]
    timeline.failure = (DURATION - 0.01, "AssertionError: greeting")
    return write_page(timeline, tmp_path / "timeline.html")


def test_the_page_opens_on_the_whole_test(browser: TimelinePage, tmp_path: Path) -> None:
    browser.open(long_test_page(tmp_path))

    view = browser.view()
    assert view["scrollWidth"] <= view["clientWidth"], f"the first view scrolls: {view}"
    assert browser.events_out_of_view() == [], "events a reader must scroll to see at first"
    failure = browser.events("[data-kind='assertion-failure']")
    assert [event["lane"] for event in failure] == ["test"], failure
    writes = browser.page.locator("[data-lane='operator:greeter'] .event[data-kind=request]")
    first, second = writes.nth(0).bounding_box(), writes.nth(1).bounding_box()
    assert first is not None and second is not None and first["x"] < second["x"], (first, second)
    assert browser.console_errors == [] and browser.requests == []


def test_keys_zoom_pan_and_fit_the_whole_test_again(browser: TimelinePage, tmp_path: Path) -> None:
    browser.open(long_test_page(tmp_path))
    fitted = browser.view()

    browser.page.keyboard.press("+")
    browser.page.keyboard.press("+")
    zoomed = browser.view()
    assert zoomed["scale"] == pytest.approx(4 * fitted["scale"])
    assert zoomed["scrollWidth"] > zoomed["clientWidth"]
    assert middle_of(zoomed) == pytest.approx(middle_of(fitted), abs=0.2), "zooming keeps the middle"

    browser.page.keyboard.press("ArrowRight")
    assert browser.view()["scrollLeft"] > zoomed["scrollLeft"]
    title = browser.page.locator("[data-lane=test] .lane-title").bounding_box()
    board = browser.page.locator("#board").bounding_box()
    assert title is not None and board is not None and title["x"] == board["x"], (
        f"scrolled, the lane titles stay at the left: title at {title}, board at {board}"
    )
    browser.page.keyboard.press("ArrowLeft")
    browser.page.keyboard.press("ArrowLeft")
    assert browser.view()["scrollLeft"] < zoomed["scrollLeft"]

    browser.page.keyboard.press("-")
    assert browser.view()["scale"] == pytest.approx(2 * fitted["scale"])
    browser.page.keyboard.press("0")
    assert browser.view() == fitted
    assert browser.events_out_of_view() == []
    browser.page.keyboard.press("-")
    assert browser.view()["scale"] == pytest.approx(fitted["scale"]), "zooming out stops at the whole test"
    assert browser.console_errors == []
