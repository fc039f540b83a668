"""Helpers shared by the operator tests."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from pathlib import Path

HERE = Path(__file__).resolve().parent
SAMPLES = HERE / "sample_operators"
GO_MANAGER = HERE.parent.parent / "fixtures" / "go-manager"


def python() -> str:
    return sys.executable


def wait_for(condition: Callable[[], bool], timeout: float = 30.0) -> None:
    """Poll ``condition`` without running health checks: ``ktest.wait.eventually`` always runs
    them (it has no option to skip them), so it would raise the very operator error a test is
    waiting to inspect."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"condition not met within {timeout} s"
        time.sleep(0.02)
