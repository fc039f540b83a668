"""Progress lines on stderr for the long steps (downloads, Go builds).

stdout stays clean so that ``$(ktest binaries path)`` works in scripts. On a
terminal the current line is rewritten in place; elsewhere (CI logs) a line is
printed at a slow interval so logs stay short but never look stuck.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Protocol, TextIO

from ktest.errors import AssetsError

BUILD_LOCK_TIMEOUT = 3 * 3600.0
"""How long a build waits for another process's build of the same thing (a cold node image takes
tens of minutes on two cores)."""


class TextStream(Protocol):
    """What progress is written to: a text file such as ``sys.stderr``, or pytest's terminal."""

    def write(self, text: str, /) -> int: ...

    def flush(self) -> None: ...

    def isatty(self) -> bool: ...


_shown_on: TextStream | None = None


def show_on(stream: TextStream | None) -> TextStream | None:
    """Where progress goes when no stream is given (None: ``sys.stderr``); returns the one before.
    The pytest plugin points it at the terminal, so a long build is seen while pytest captures
    the test's output."""
    global _shown_on
    before, _shown_on = _shown_on, stream
    return before


def format_duration(seconds: float) -> str:
    """``192.4`` -> ``"3m12s"``; short durations keep one decimal."""
    if seconds < 10:
        return f"{seconds:.1f}s"
    minutes, secs = divmod(round(seconds), 60)
    return f"{minutes}m{secs:02d}s" if minutes else f"{secs}s"


def format_bytes(count: float) -> str:
    """``512`` -> ``"512 B"``, ``1536`` -> ``"1.5 KiB"``; GiB is the largest unit."""
    if count < 1024:
        return f"{count:.0f} B"
    for unit in ("KiB", "MiB"):
        count /= 1024
        if count < 1024:
            return f"{count:.1f} {unit}"
    return f"{count / 1024:.1f} GiB"


class Progress:
    """Writes progress for one resolution; a disabled instance writes nothing."""

    def __init__(
        self,
        enabled: bool = True,
        stream: TextIO | None = None,
        log_interval: float = 30.0,
    ) -> None:
        self.enabled = enabled
        self._stream = stream
        self._log_interval = log_interval
        self._lock = threading.Lock()
        self._last_bytes_report = 0.0

    @property
    def stream(self) -> TextIO | TextStream:
        if self._stream is not None:
            return self._stream
        return _shown_on if _shown_on is not None else sys.stderr

    @property
    def _interactive(self) -> bool:
        isatty = getattr(self.stream, "isatty", None)
        return bool(isatty and isatty())

    def note(self, message: str) -> None:
        """One line of information, e.g. which source is being tried."""
        if self.enabled:
            with self._lock:
                self.stream.write(f"ktest: {message}\n")
                self.stream.flush()

    @contextmanager
    def step(self, message: str) -> Iterator[None]:
        """Show ``message`` with the elapsed time while the body runs."""
        if not self.enabled:
            yield
            return
        started = time.monotonic()
        stop = threading.Event()
        interval = 1.0 if self._interactive else self._log_interval
        self._write_status(f"{message} ...", final=not self._interactive)

        def tick() -> None:
            while not stop.wait(interval):
                elapsed = format_duration(time.monotonic() - started)
                self._write_status(f"{message} ... {elapsed}", final=not self._interactive)

        ticker = threading.Thread(target=tick, name="ktest-progress", daemon=True)
        ticker.start()
        outcome = "failed after"
        try:
            yield
            outcome = "done in"
        finally:
            stop.set()
            ticker.join(interval + 5.0)  # it writes one line at most before it sees stop
            elapsed = format_duration(time.monotonic() - started)
            self._write_status(f"{message} ... {outcome} {elapsed}", final=True)

    def transferred(self, name: str, done: int, total: int | None) -> None:
        """Bytes received so far for ``name``; throttled to a few updates per second."""
        if not self.enabled:
            return
        now = time.monotonic()
        finished = total is not None and done >= total
        interval = 0.25 if self._interactive else self._log_interval
        if not finished and now - self._last_bytes_report < interval:
            return
        self._last_bytes_report = now
        amount = format_bytes(done) + (f" / {format_bytes(total)}" if total else "")
        self._write_status(f"downloading {name}: {amount}", final=finished or not self._interactive)

    def _write_status(self, text: str, *, final: bool) -> None:
        with self._lock:
            if self._interactive:
                self.stream.write(f"\r\x1b[2Kktest: {text}" + ("\n" if final else ""))
            else:
                self.stream.write(f"ktest: {text}\n")
            self.stream.flush()


@contextmanager
def holding_lock(
    path: Path, progress: Progress, holder: str, timeout: float = BUILD_LOCK_TIMEOUT
) -> Iterator[None]:
    """Hold the file lock ``path``; while another process (``holder``: who, in words) holds it, say
    so on ``progress`` and wait, at most ``timeout`` s (then AssetsError naming the lock)."""
    from ktest.base.bounded import file_lock

    def waiting() -> None:
        progress.note(f"{holder}; waiting for it (lock {path})")

    with file_lock(path, timeout=timeout, what=holder, error=AssetsError, on_wait=waiting):
        yield


def as_progress(progress: bool | Progress) -> Progress:
    """Accept ``True``/``False`` or a ready ``Progress`` (tests pass their own stream)."""
    if isinstance(progress, Progress):
        return progress
    return Progress(enabled=bool(progress))
