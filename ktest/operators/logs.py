"""Where an operator's output goes: one log file per handle, readable while it grows.

In-process operators (threads, asyncio, kopf) write through the standard
``logging`` module. A single routing handler on the root logger sends each
record to the log of the operator whose code emitted it, found through a
``ContextVar`` that the operator's thread sets before running anything:
asyncio tasks inherit it, and kopf copies it into the threads that run sync
handlers. Records from other code (the test itself, other operators) are not
routed. The handler is installed while at least one in-process operator runs.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import tempfile
import threading
import weakref
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from pathlib import Path

TAIL_LINES = 40
_FORMAT = "%(asctime)s.%(msecs)03d %(levelname)-7s %(name)s: %(message)s"
_DATE_FORMAT = "%H:%M:%S"


class OperatorLog:
    """The output of one operator handle (all its runs): a file, then text in memory once closed.

    Offsets ("marks") are byte positions in the file, so a caller can read
    what was written since a given moment (a test start, a restart).
    """

    def __init__(self, name: str, directory: Path | None = None) -> None:
        self._own_directory = directory is None
        base = Path(tempfile.mkdtemp(prefix="ktest-operator-")) if directory is None else Path(directory)
        base.mkdir(parents=True, exist_ok=True)
        self.path = base / f"{_safe(name)}.log"
        self.path.touch()
        if self._own_directory:  # a handle nobody closed still leaves no files behind
            self._remove = weakref.finalize(self, shutil.rmtree, base, True)
        self._lock = threading.Lock()
        self._frozen: bytes | None = None

    def write(self, text: str) -> None:
        """Append text (in-process operators); a newline is added when missing."""
        if not text.endswith("\n"):
            text += "\n"
        with self._lock:
            if self._frozen is not None:
                self._frozen += text.encode()
                return
            with self.path.open("ab") as file:
                file.write(text.encode("utf-8", "replace"))

    def mark(self) -> int:
        """The current end of the log, for :meth:`since`."""
        with self._lock:
            if self._frozen is not None:
                return len(self._frozen)
            try:
                return self.path.stat().st_size
            except OSError:
                return 0

    def read(self, start: int = 0) -> bytes:
        with self._lock:
            if self._frozen is not None:
                return self._frozen[start:]
            try:
                with self.path.open("rb") as file:
                    file.seek(start)
                    return file.read()
            except OSError:
                return b""

    def since(self, mark: int = 0) -> str:
        return self.read(mark).decode("utf-8", "replace")

    def tail(self, lines: int = TAIL_LINES, start: int = 0) -> str:
        return "\n".join(self.since(start).splitlines()[-lines:])

    def close(self) -> None:
        """Keep the text in memory and remove the temporary file (a given directory is kept)."""
        with self._lock:
            if self._frozen is not None:
                return
            try:
                self._frozen = self.path.read_bytes()
            except OSError:
                self._frozen = b""
        if self._own_directory:
            self._remove()


def _safe(name: str) -> str:
    return "".join(ch if ch.isalnum() or ch in "-_." else "-" for ch in name) or "operator"


# ------------------------------------------------------------ in-process routing

RecordSink = Callable[[logging.LogRecord, str], None]
"""Receives each record emitted by one in-process operator, with its formatted text."""

_sink: ContextVar[RecordSink | None] = ContextVar("ktest_operator_log_sink", default=None)


class _RoutingHandler(logging.Handler):
    def __init__(self) -> None:
        super().__init__(level=logging.NOTSET)
        self.setFormatter(logging.Formatter(_FORMAT, _DATE_FORMAT))

    def emit(self, record: logging.LogRecord) -> None:
        sink = _sink.get()
        if sink is None:
            return
        try:
            text = self.format(record)
        except Exception:
            text = f"{record.levelname} {record.name}: {record.msg!r} (unformattable: {record.args!r})"
        ref = getattr(record, "k8s_ref", None)  # kopf's per-object records name their object this way
        if isinstance(ref, dict) and ref.get("name"):
            where = f"{ref['namespace']}/{ref['name']}" if ref.get("namespace") else str(ref["name"])
            text = text.replace(f"{record.name}: ", f"{record.name}: [{where}] ", 1)
        sink(record, text)


class _Router:
    """The root-logger handler and the logger levels it needs, held while operators run."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.users = 0
        self.handler: _RoutingHandler | None = None
        self.saved_levels: dict[str, int] = {}

    def acquire(self, level: int) -> None:
        with self.lock:
            self.users += 1
            if self.handler is None:
                self.handler = _RoutingHandler()
                logging.getLogger().addHandler(self.handler)
            # A record below a logger's effective level never reaches any handler, so
            # lower the root (and kopf, which pytest's log_level does not reset) while needed.
            for logger_name in ("", "kopf"):
                logger = logging.getLogger(logger_name)
                if (logger.level == logging.NOTSET and logger_name) or logger.level > level:
                    self.saved_levels.setdefault(logger_name, logger.level)
                    logger.setLevel(level)

    def release(self) -> None:
        with self.lock:
            self.users -= 1
            if self.users > 0:
                return
            if self.handler is not None:
                logging.getLogger().removeHandler(self.handler)
                self.handler = None
            for logger_name, level in self.saved_levels.items():
                logging.getLogger(logger_name).setLevel(level)
            self.saved_levels.clear()


_router_guard = threading.Lock()
_routers: dict[int, _Router] = {}


def _router() -> _Router:
    with _router_guard:  # keyed by pid: a forked child starts without operators
        return _routers.setdefault(os.getpid(), _Router())


def acquire_routing(level: int = logging.INFO) -> None:
    """Install the routing handler (and let ``level`` records through) until the matching release."""
    _router().acquire(level)


def release_routing() -> None:
    _router().release()


@contextlib.contextmanager
def routing(level: int = logging.INFO) -> Iterator[None]:
    """Keep the routing handler installed for the block."""
    acquire_routing(level)
    try:
        yield
    finally:
        release_routing()


def bind_sink(sink: RecordSink) -> None:
    """Send the records of the calling thread/context (and tasks it creates) to ``sink``.

    Called first thing in an operator's own thread; that thread's context is
    discarded with it, so there is nothing to reset.
    """
    _sink.set(sink)


def format_exception(error: BaseException) -> str:
    """A traceback as the logging module formats it."""
    return logging.Formatter().formatException((type(error), error, error.__traceback__))
