"""Failure timelines of real failing operator tests, opened with file:// in a headless Chromium
that has no network: lanes, a changed field's diff after a click, the failing assertion and its
message, one lane per operator, a 1,000-call page rendered in under a second.

The timelines come from ``failing_suite/`` (seeded bugs of the demo's operators), run once per
session with ``--ktest-timeline on-failure``. The DOM contract the page keeps is documented in
``ktest/timeline/``'s module docstring.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from playwright.sync_api import Locator
from timeline_browser import TimelinePage
from timeline_runs import InnerRun

pytestmark = pytest.mark.xdist_group("browser")

STATUS_LOOP = "test_status_update_loop"
CONFLICT_STORM = "test_conflict_storm"
TWO_OPERATORS = "test_finalizer_removed_before_cleanup_with_two_operators"
THOUSAND_CALLS = "test_a_thousand_calls_then_a_failure"
MAX_PAGE_BYTES = 2 * 1024 * 1024
TIMESTAMP = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?Z")


def assert_clean(browser: TimelinePage) -> None:
    """The page asked for nothing outside itself and logged no error."""
    assert browser.requests == [], f"the timeline asked for the network: {browser.requests}"
    assert browser.console_errors == [], f"console errors: {browser.console_errors}"


def select(event: Locator) -> None:
    """Click an event as the page's own handler receives it. Not a mouse click at its position:
    events a few milliseconds apart overlap on the axis, so the mouse would hit a neighbour."""
    event.dispatch_event("click")


def embedded_data(browser: TimelinePage) -> dict:
    text = browser.page.eval_on_selector(
        "script#ktest-timeline-data[type='application/json']", "node => node.textContent"
    )
    return json.loads(text)


def test_the_lanes_of_a_status_update_loop(browser: TimelinePage, failing_timelines: InnerRun) -> None:
    browser.open(failing_timelines.timeline(STATUS_LOOP))

    lanes = browser.lanes()
    for lane in ("test", "operator:webapp", "apiserver"):
        assert lane in lanes, f"no lane {lane!r} in {lanes}"
    operator_requests = browser.events("[data-kind='request']")
    writes = [event for event in operator_requests if event["lane"] == "operator:webapp"]
    assert len(writes) >= 10, f"the loop's writes are not on the operator's lane: {operator_requests[:20]}"
    watch_events = browser.events("[data-kind='watch-event']")
    watch_events = [event for event in watch_events if event["lane"] == "apiserver"]
    assert len(watch_events) >= 10, "the API server's lane does not show the loop's MODIFIED events"
    times = [float(event["time"]) for event in browser.events()]
    assert all(time >= 0 for time in times) and max(times) > 0, "events are not placed on one time axis"
    assert_clean(browser)


def test_a_changed_fields_diff_is_shown_after_a_click(
    browser: TimelinePage, failing_timelines: InnerRun
) -> None:
    browser.open(failing_timelines.timeline(STATUS_LOOP))
    assert browser.page.locator("#details .diff-row").count() == 0, "a diff is shown before any click"

    candidates = browser.page.locator("[data-lane='apiserver'] .event[data-kind='watch-event']")
    rows = browser.page.locator("#details .diff-row[data-path]")
    seen: list[list[dict[str, str]]] = []
    for index in range(min(candidates.count(), 60)):
        select(candidates.nth(index))
        shown = rows.evaluate_all(
            """nodes => nodes.map(node => ({path: node.dataset.path,
                old: node.querySelector('.old').textContent, new: node.querySelector('.new').textContent}))"""
        )
        seen.append(shown)
        rewritten = [
            row for row in shown if "lastTransitionTime" in row["path"] and TIMESTAMP.search(row["old"])
        ]
        if rewritten:
            break
    else:
        pytest.fail(f"no watch event of the status loop shows lastTransitionTime rewritten: {seen[:5]}")

    row = rewritten[0]
    assert row["path"].startswith("status.conditions"), row
    old, new = TIMESTAMP.search(row["old"]), TIMESTAMP.search(row["new"])
    assert old and new and old.group() < new.group(), f"the row does not show the old and new time: {row}"
    assert browser.page.locator("#details").is_visible()
    assert_clean(browser)


def test_the_failing_assertion_is_marked_and_its_message_shown(
    browser: TimelinePage, failing_timelines: InnerRun
) -> None:
    browser.open(failing_timelines.timeline(CONFLICT_STORM))

    failures = browser.events("[data-kind='assertion-failure']")
    assert [event["lane"] for event in failures] == ["test"], f"the failure marker: {failures}"
    # The page opens on the whole test: the operator's first calls and the failure, no scrolling.
    assert browser.events_out_of_view() == [], f"the first view of the real failure scrolls: {browser.view()}"
    failure = browser.page.locator("#failure")
    assert failure.is_visible(), "#failure is not shown"
    assert "did not recover from conflict" in failure.inner_text()
    assert "gave up on webapps" in failure.inner_text()
    faults = browser.events("[data-kind='fault']")
    assert faults and {event["lane"] for event in faults} == {"faults"}, f"the conflict storm: {faults}"
    last_time = max(float(event["time"]) for event in browser.events())
    assert float(failures[0]["time"]) >= max(float(event["time"]) for event in faults)
    assert float(failures[0]["time"]) <= last_time

    select(browser.page.locator(".event[data-kind='assertion-failure']"))
    assert "did not recover from conflict" in browser.page.locator("#details").inner_text()
    assert_clean(browser)


def test_a_conflicted_request_shows_its_response_code(
    browser: TimelinePage, failing_timelines: InnerRun
) -> None:
    browser.open(failing_timelines.timeline(CONFLICT_STORM))

    requests = browser.page.locator("[data-lane='operator:webapp'] .event[data-kind='request']")
    details = browser.page.locator("#details")
    for index in range(requests.count()):
        select(requests.nth(index))
        if re.search(r"\b409\b", details.inner_text()):
            break
    else:
        pytest.fail("no request of the webapp operator shows the 409 Conflict the storm answered with")
    text = details.inner_text()
    assert re.search(r"\bPATCH\b|\bPUT\b", text, re.IGNORECASE), text
    assert "webapps" in text and "status" in text, text
    assert_clean(browser)


def test_several_operators_get_several_lanes(browser: TimelinePage, failing_timelines: InnerRun) -> None:
    browser.open(failing_timelines.timeline(TWO_OPERATORS))

    operator_lanes = [lane for lane in browser.lanes() if lane.startswith("operator:")]
    assert sorted(operator_lanes) == ["operator:bucketclaim", "operator:webapp"]
    for lane in operator_lanes:
        assert [event for event in browser.events() if event["lane"] == lane], f"lane {lane} is empty"
    assert "was not blocked by finalizer" in browser.page.locator("#failure").inner_text()
    assert_clean(browser)


def test_a_thousand_call_timeline_is_small_and_shows_every_request(
    browser: TimelinePage, failing_timelines: InnerRun
) -> None:
    path = failing_timelines.timeline(THOUSAND_CALLS)
    assert path.stat().st_size <= MAX_PAGE_BYTES, f"{path} is {path.stat().st_size} bytes"

    # Its render time is measured in bench/timeline.py (a benchmark, not a timed test).
    browser.open(path)

    requests = [event for event in embedded_data(browser)["events"] if event.get("kind") == "request"]
    assert len(requests) >= 1000, f"the page holds {len(requests)} of the operator's 1,000 requests"
    assert browser.page.locator(".event[data-kind='request']").count() == len(requests)
    assert_clean(browser)


@pytest.mark.parametrize("test", [STATUS_LOOP, CONFLICT_STORM, TWO_OPERATORS, THOUSAND_CALLS])
def test_the_page_is_self_contained_and_carries_its_data(
    browser: TimelinePage, failing_timelines: InnerRun, test: str
) -> None:
    path: Path = failing_timelines.timeline(test)
    browser.open(path)

    external = browser.page.eval_on_selector_all(
        "[src], link[href]", "nodes => nodes.map(n => n.getAttribute('src') || n.getAttribute('href'))"
    )
    assert external == [], f"the page loads outside files: {external}"
    data = embedded_data(browser)
    assert data["schema"] == 1
    assert data["test"].endswith(f"::{test}") and data["outcome"] == "failed"
    cut = browser.page.locator("#truncated")
    assert not cut.is_visible(), f"a complete recording is marked as cut: {cut.inner_text()}"
    assert_clean(browser)
