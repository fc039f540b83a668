"""ktest's internal waits end, with an error naming what they waited for (issue 50.1).

A wait without a bound turns a stuck helper, or another process holding a lock, into a session
that hangs without a word. Each case makes the awaited thing never come: a build lock held by
another process, a namespace-deletion thread that never ends. The call under test runs in a
thread joined within a bound, so that the unbounded wait of the code before the fix fails the
test instead of hanging it.
"""

from __future__ import annotations

import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from ktest.assets import gotool
from ktest.cluster.namespaces import NamespaceReaper
from ktest.errors import AssetsError, ClusterError

BOUND = 30.0
"""Seconds the call under test gets; its own bound is far shorter."""

HOLD_LOCK = """
import sys, filelock
lock = filelock.FileLock(sys.argv[1])
lock.acquire()
print("held", flush=True)
sys.stdin.readline()
"""


def _outcome(call: Callable[[], object]) -> BaseException | None:
    """What ``call`` raised, run in a thread joined within BOUND; fails the test if it is still waiting."""
    outcome: list[BaseException | None] = []

    def run() -> None:
        try:
            call()
            outcome.append(None)
        except BaseException as error:
            outcome.append(error)

    thread = threading.Thread(target=run, name="bounded-wait-under-test", daemon=True)
    thread.start()
    thread.join(BOUND)
    if thread.is_alive():
        pytest.fail(f"the call still waits after {BOUND:g} s: the wait has no bound")
    return outcome[0]


def test_a_build_lock_held_by_another_process_ends_in_an_error_naming_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(gotool, "BUILD_LOCK_TIMEOUT", 0.5, raising=False)
    destination = tmp_path / "bin" / "operator"
    lock = destination.with_name("operator.lock")
    lock.parent.mkdir()
    holder = subprocess.Popen([sys.executable, "-c", HOLD_LOCK, str(lock)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"

        def never_called(scratch: Path, log: Path) -> Path:
            raise AssertionError("built although another process held the lock")

        error = _outcome(lambda: gotool.build_atomically(destination, never_called))
    finally:
        holder.communicate("release\n", timeout=10)
    assert isinstance(error, AssetsError), error
    assert str(lock) in str(error) and "another process holds it" in str(error), error
    assert f"the build of {destination}" in str(error)


def test_a_namespace_deletion_that_never_ends_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    reaper = NamespaceReaper(cluster=None, timeout=0.2)  # type: ignore[arg-type]
    stop = threading.Event()
    stuck = threading.Thread(target=stop.wait, name="ktest-reap-stuck", daemon=True)
    monkeypatch.setattr("ktest.cluster.namespaces._REAPER_GRACE", 0.3, raising=False)
    stuck.start()
    reaper._threads[stuck] = "stuck-namespace"
    try:
        error = _outcome(reaper.join)
    finally:
        stop.set()
    assert isinstance(error, ClusterError), error
    assert "the background deletion of namespace stuck-namespace" in str(error), error
