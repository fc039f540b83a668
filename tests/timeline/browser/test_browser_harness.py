"""The browser harness itself: Debian's Chromium through Playwright, offline, with the page's
network requests and console errors recorded (what the timeline tests rely on)."""

from __future__ import annotations

from pathlib import Path

import pytest
from timeline_browser import BrowserMissing, TimelinePage, timeline_page

pytestmark = pytest.mark.xdist_group("browser")


def test_a_local_page_renders_and_its_network_requests_are_caught(
    browser: TimelinePage, tmp_path: Path
) -> None:
    page = tmp_path / "page.html"
    page.write_text(
        "<!doctype html><div data-lane='test'>"
        "<span class='event' data-kind='log' data-time='0'>hi</span></div>"
        "<img src='https://example.invalid/pixel.png'>"
        "<script>fetch('http://127.0.0.1:9/api').catch(() => {});</script>"
    )

    milliseconds = browser.open(page)

    assert browser.lanes() == ["test"]
    assert browser.events() == [{"kind": "log", "time": "0", "lane": "test", "text": "hi"}]
    assert 0 < milliseconds < 10_000
    assert sorted(browser.requests) == ["http://127.0.0.1:9/api", "https://example.invalid/pixel.png"]


def test_console_errors_and_uncaught_exceptions_are_recorded(browser: TimelinePage, tmp_path: Path) -> None:
    page = tmp_path / "page.html"
    page.write_text(
        "<!doctype html><div data-lane='test'><span class='event' data-kind='log' data-time='0'></span></div>"
        "<script>console.error('drawing failed'); console.log('fine'); null.lanes;</script>"
    )

    browser.open(page)

    assert browser.console_errors[0] == "drawing failed"
    assert len(browser.console_errors) == 2 and browser.console_errors[1].startswith("uncaught: ")
    assert browser.requests == []


def test_a_missing_chromium_is_an_error_that_names_make_browser(tmp_path: Path) -> None:
    with pytest.raises(BrowserMissing) as missing, timeline_page(tmp_path / "chromium"):
        pass

    assert f"Chromium is not installed at {tmp_path / 'chromium'}" in str(missing.value)
    assert "make browser" in str(missing.value)


def test_ktest_chromium_names_another_browser(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("KTEST_CHROMIUM", str(tmp_path / "google-chrome"))

    with pytest.raises(BrowserMissing, match=r"not installed at .*google-chrome"), timeline_page():
        pass
