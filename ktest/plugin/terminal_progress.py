"""ktest's progress lines (a cold Go or Kubernetes build, a download) on pytest's terminal, even
while pytest captures the test's output: each whole line goes through the terminal reporter with
capturing suspended, so a long first build never sits silent in ``pytest -q``."""

from __future__ import annotations

import contextlib
import sys
import threading

import pytest


class TerminalProgress:
    """A text stream for :class:`ktest.assets.progress.Progress` that writes to pytest's terminal."""

    def __init__(self, config: pytest.Config) -> None:
        self._config = config
        self._pending = ""
        self._lock = threading.Lock()

    def isatty(self) -> bool:
        """Line by line, never rewritten in place: pytest's own output shares the terminal."""
        return False

    def write(self, text: str) -> int:
        with self._lock:
            self._pending += text
            *lines, self._pending = self._pending.split("\n")
            if lines:
                self._show(lines)
        return len(text)

    def flush(self) -> None:
        """Lines are written as they complete."""

    def _show(self, lines: list[str]) -> None:
        plugins = self._config.pluginmanager
        reporter = plugins.get_plugin("terminalreporter")
        if reporter is None:  # e.g. an xdist worker: no terminal of its own
            sys.stderr.write("".join(line + "\n" for line in lines))
            return
        capture = plugins.get_plugin("capturemanager")
        uncaptured = (
            capture.global_and_fixture_disabled() if capture is not None else contextlib.nullcontext()
        )
        with uncaptured:
            for line in lines:
                reporter.write_line(line)
