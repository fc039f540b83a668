"""Where an operator's output goes: one log file per handle, readable while it grows.

In-process operators write through ``logging`` or ``print()``. While one runs, a routing handler
on the root logger (and a wrapped ``print``) sends each record to the log of the operator whose
code emitted it: found through a ``ContextVar`` its thread sets first (asyncio tasks inherit it,
kopf copies it into the threads of sync handlers), or else through the thread's run (``threads``).
Output of other code (the test itself) is left alone.
"""

from __future__ import annotations

import builtins
import contextlib
import functools
import io
import logging
import os
import re
import shutil
import sys
import tempfile
import threading
import traceback
import weakref
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from pathlib import Path
from typing import Any

from ktest.operators.threads import RecordSink, current_run

TAIL_LINES = 40
_FORMAT = "%(asctime)s.%(msecs)03d %(levelname)-7s %(name)s: %(message)s"
_DATE_FORMAT = "%H:%M:%S"


class OperatorLog:
    """The output of one operator handle (all its runs): a file, then text in memory once closed.

    Offsets ("marks") are byte positions in the file, so a caller can read
    what was written since a given moment (a test start, a restart).
    """

    live: weakref.WeakSet[OperatorLog] = weakref.WeakSet()
    """Every log still in use (a timeline recording reads the operators running meanwhile)."""

    def __init__(self, name: str, directory: Path | None = None) -> None:
        self.name = name
        self._own_directory = directory is None
        base = Path(tempfile.mkdtemp(prefix="ktest-operator-")) if directory is None else Path(directory)
        base.mkdir(parents=True, exist_ok=True)
        if self._own_directory:  # holder recorded: swept by the next start if this process is killed
            from ktest.base.holders import write_holder

            write_holder(base)
        self.path = base / f"{_safe(name)}.log"
        self.path.touch(mode=0o600)  # only this user reads what the operator logs
        if self._own_directory:  # a handle nobody closed still leaves no files behind
            self._remove = weakref.finalize(self, shutil.rmtree, base, True)
        self._lock = threading.Lock()
        self._frozen: bytes | None = None
        OperatorLog.live.add(self)

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

    def complete_lines(self, start: int) -> tuple[str, int]:
        """The whole lines written from ``start`` on, and the offset after them (a partial last
        line is read again next time)."""
        new = self.read(start)
        complete = new[: new.rfind(b"\n") + 1]
        return complete.decode("utf-8", "replace"), start + len(complete)

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

_sink: ContextVar[RecordSink | None] = ContextVar("ktest_operator_log_sink", default=None)


class _RoutingHandler(logging.Handler):
    def __init__(self) -> None:
        super().__init__(level=logging.NOTSET)
        self.setFormatter(_ReadableFormatter(_FORMAT, _DATE_FORMAT))

    def handle(self, record: logging.LogRecord) -> bool:
        """Emit without the handler's lock: a sink may wait for its operator handle's lock,
        whose holder (the test's thread) may itself be logging through this handler."""
        if self.filter(record):
            self.emit(record)
        return True

    def emit(self, record: logging.LogRecord) -> None:
        sink = current_sink()
        if sink is None:
            return
        try:
            text = readable_api_dumps(self.format(record))
        except Exception:
            text = f"{record.levelname} {record.name}: {record.msg!r} (unformattable: {record.args!r})"
        ref = getattr(record, "k8s_ref", None)  # kopf's per-object records name their object this way
        if isinstance(ref, dict) and ref.get("name"):
            where = f"{ref['namespace']}/{ref['name']}" if ref.get("namespace") else str(ref["name"])
            text = text.replace(f"{record.name}: ", f"{record.name}: [{where}] ", 1)
        sink(record, text)


def current_sink() -> RecordSink | None:
    """Where the calling code's output goes: its operator's log, or None (not operator code)."""
    sink = _sink.get()
    if sink is not None:
        return sink
    run = current_run()
    return run.sink if run is not None else None


def _routed_print(original: Callable[..., None]) -> Callable[..., None]:
    """``print`` that sends an operator's output to its log and leaves other callers alone.

    It wraps the original (``__wrapped__``), so code that inspects callables, like the
    check rule of ``eventually``, still sees the builtin ``print``, not a function."""

    @functools.wraps(original)
    def print(
        *values: Any, sep: str | None = " ", end: str | None = "\n", file: Any = None, flush: bool = False
    ) -> None:
        sink = current_sink()
        streams = {
            sys.stdout: "stdout",
            sys.stderr: "stderr",
            sys.__stdout__: "stdout",
            sys.__stderr__: "stderr",
        }
        stream = "stdout" if file is None else streams.get(file)
        if sink is None or stream is None:
            original(*values, sep=sep, end=end, file=file, flush=flush)
            return
        buffer = io.StringIO()
        original(*values, sep=sep, end=end, file=buffer)
        text = buffer.getvalue().rstrip("\n")
        record = logging.LogRecord(f"print({stream})", logging.INFO, "", 0, "%s", (text,), None)
        sink(record, _PRINT_FORMATTER.format(record))

    return print


_PRINT_FORMATTER = logging.Formatter(_FORMAT, _DATE_FORMAT)


class _Router:
    """The root-logger handler, ``print`` and the logger levels they need, held while operators run."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.users = 0
        self.handler: _RoutingHandler | None = None
        self.saved_levels: dict[str, int] = {}
        self.saved_print: Callable[..., None] | None = None

    def acquire(self, level: int) -> None:
        with self.lock:
            self.users += 1
            if self.handler is None:
                self.handler = _RoutingHandler()
                logging.getLogger().addHandler(self.handler)
            if self.saved_print is None:
                self.saved_print = builtins.print
                builtins.print = _routed_print(builtins.print)
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
            if self.saved_print is not None:
                builtins.print = self.saved_print
                self.saved_print = None
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
    """A traceback as the logging module formats it, API errors of the official client made
    readable (status, reason and the server's message instead of HTTP headers and body)."""
    described = traceback.TracebackException.from_exception(error)
    seen: set[int] = set()
    part: traceback.TracebackException | None = described
    raised: BaseException | None = error
    while part is not None and raised is not None and id(raised) not in seen:
        seen.add(id(raised))
        readable = api_error_text(raised)
        if readable is not None and hasattr(part, "_str"):
            part._str = readable
        if part.__cause__ is not None:
            part, raised = part.__cause__, raised.__cause__
        else:
            part, raised = part.__context__, raised.__context__
    return "".join(described.format()).rstrip("\n")


def exception_text(error: BaseException) -> str:
    """``Type: message`` of an exception, API errors made readable."""
    return f"{type(error).__name__}: {api_error_text(error) or error}"


def api_error_text(error: BaseException | None) -> str | None:
    """``409 Conflict: <the server's message>`` for a ``kubernetes`` ApiException (whose own text
    dumps HTTP headers and body), else None. ktest's ApiError reads well already."""
    classes = {(cls.__module__, cls.__name__) for cls in type(error).__mro__}
    if error is None or not any(name == "ApiException" for _, name in classes):
        return None
    if ("ktest.errors.api", "ApiError") in classes:
        return None
    return _status_line(
        getattr(error, "status", None), getattr(error, "reason", None), getattr(error, "body", None)
    )


def _status_line(status: object, reason: object, body: str | bytes | None) -> str:
    """``409 Conflict: <the message of the Status body>`` (without ``: ...`` when it has none)."""
    from ktest.errors.status_message import server_message

    message = server_message(body or "")
    return f"{status} {reason}" + (f": {message}" if message else "")


_API_DUMP = re.compile(
    r"\((?P<status>\d{3})\)\n"
    r"Reason: (?P<reason>[^\n]*)\n?"
    r"(?:HTTP response headers: [^\n]*\n?)?"
    r"(?:HTTP response body: (?P<body>[^\n]*)\n?)?"
)


def readable_api_dumps(text: str) -> str:
    """``text`` with every official-client ApiException dump in it (``(409)``, ``Reason:``,
    ``HTTP response headers:``, ``HTTP response body:``) replaced by ``409 Conflict: <the
    server's message>``: operators put ``str(error)`` into log messages, kopf too."""
    if "\nReason: " not in text:
        return text
    def readable(match: re.Match[str]) -> str:
        return _status_line(match.group("status"), match.group("reason"), match.group("body")) + "\n"

    return _API_DUMP.sub(readable, text).rstrip("\n") + ("\n" if text.endswith("\n") else "")


class _ReadableFormatter(logging.Formatter):
    def formatException(self, ei: Any) -> str:
        error = ei[1] if ei and ei[1] is not None else None
        return format_exception(error) if error is not None else super().formatException(ei)
