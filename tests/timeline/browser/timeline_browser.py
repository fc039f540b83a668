"""A headless Chromium for the timeline's browser tests: Debian's chromium driven by Playwright.

Playwright's own browser builds are never downloaded: the browser is ``/usr/bin/chromium`` from
Debian's packages (``make browser``). Every page runs offline: the context has no network, and
every request that is not ``file://`` or ``data:`` is aborted and recorded, so a test can assert
that the page asked for nothing. Console errors and uncaught exceptions are recorded too.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from playwright.sync_api import Page, Route

CHROMIUM = Path("/usr/bin/chromium")
"""Debian's chromium (``make browser``); ``KTEST_CHROMIUM`` names another Chromium-family browser."""
LOCAL_SCHEMES = ("file:", "data:", "about:")
# A page that does not load or answer within this long is a failure, not a wait.
PAGE_TIMEOUT_MS = 15_000


class BrowserMissing(Exception):
    """The browser tests cannot run: what is missing and how to get it."""


def chromium_missing_message(path: Path) -> str:
    return (
        f"Chromium is not installed at {path}: the timeline's browser tests drive Debian's chromium "
        "package headless through Playwright (its own browser downloads are not used). Install it "
        "with `make browser` (scripts/browser, as root), which `make test` runs first, or set "
        "KTEST_CHROMIUM to an installed Chromium-family browser."
    )


def chromium_path() -> Path:
    return Path(os.environ.get("KTEST_CHROMIUM") or CHROMIUM)


def missing_browser(chromium: Path) -> str | None:
    """What keeps the browser tests from running (Chromium or Playwright missing), or None."""
    if not chromium.is_file() or not os.access(chromium, os.X_OK):
        return chromium_missing_message(chromium)
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError as error:
        return f"Playwright is not installed ({error}): it is in ktest's dev extra; run `make venv`"
    return None


@dataclass
class TimelinePage:
    """One browser page and what it did: network requests it attempted, console errors."""

    page: Page
    requests: list[str] = field(default_factory=list)
    console_errors: list[str] = field(default_factory=list)

    def open(self, path: Path) -> float:
        """Open ``path`` with file:// and wait for its events; milliseconds from navigation start
        until the lanes and their events are in the DOM (measured in the page: performance.now())."""
        self.page.goto(path.resolve().as_uri(), wait_until="load")
        self.page.wait_for_selector("[data-lane] .event", state="attached")
        return float(self.page.evaluate("performance.now()"))

    def events(self, selector: str = "") -> list[dict[str, str]]:
        """The events on the page (``.event`` plus ``selector``): kind, time, lane, text."""
        return list(
            self.page.eval_on_selector_all(
                f".event{selector}",
                """nodes => nodes.map(node => ({
                    kind: node.dataset.kind || '',
                    time: node.dataset.time || '',
                    lane: (node.closest('[data-lane]') || {dataset: {}}).dataset.lane || '',
                    text: node.textContent || '',
                }))""",
            )
        )

    def view(self) -> dict[str, float]:
        """The board's view: its scale (pixels per second), visible and scrollable width, scroll."""
        return dict(
            self.page.eval_on_selector(
                "#board",
                """board => ({scale: Number(board.dataset.scale), clientWidth: board.clientWidth,
                    scrollWidth: board.scrollWidth, scrollLeft: board.scrollLeft})""",
            )
        )

    def events_out_of_view(self) -> list[str]:
        """The events (``kind@time``) not wholly inside the board's visible part, right of the
        sticky lane titles: what a reader would have to scroll to see."""
        return list(
            self.page.evaluate(
                """() => {
                    const board = document.querySelector('#board').getBoundingClientRect();
                    const title = document.querySelector('[data-lane] .lane-title').getBoundingClientRect();
                    return [...document.querySelectorAll('.event')].filter(node => {
                        const box = node.getBoundingClientRect();
                        return box.left < title.right || box.right > board.right;
                    }).map(node => node.dataset.kind + '@' + node.dataset.time);
                }"""
            )
        )

    def lanes(self) -> list[str]:
        return list(self.page.eval_on_selector_all("[data-lane]", "nodes => nodes.map(n => n.dataset.lane)"))


@contextmanager
def timeline_page(chromium: Path | None = None) -> Iterator[TimelinePage]:
    """A fresh headless browser with one offline page; closed (browser and all) on exit.

    Raises :class:`BrowserMissing` naming ``make browser`` when Chromium or Playwright is missing.
    """
    chromium = chromium or chromium_path()
    problem = missing_browser(chromium)
    if problem is not None:
        raise BrowserMissing(problem)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        # Chromium's sandbox needs an unprivileged user; CI and this machine run tests as root.
        arguments = ["--no-sandbox"] if os.geteuid() == 0 else []
        browser = playwright.chromium.launch(executable_path=str(chromium), headless=True, args=arguments)
        try:
            context = browser.new_context(offline=True)
            try:
                page = context.new_page()
                page.set_default_timeout(PAGE_TIMEOUT_MS)
                recorded = TimelinePage(page)

                def only_local(route: Route) -> None:
                    url = route.request.url
                    if url.startswith(LOCAL_SCHEMES):
                        route.continue_()
                    else:
                        recorded.requests.append(url)
                        route.abort()

                context.route("**/*", only_local)
                page.on("websocket", lambda socket: recorded.requests.append(socket.url))
                page.on(
                    "console",
                    lambda message: (
                        recorded.console_errors.append(message.text) if message.type == "error" else None
                    ),
                )
                page.on("pageerror", lambda error: recorded.console_errors.append(f"uncaught: {error}"))
                yield recorded
            finally:
                context.close()
        finally:
            browser.close()
