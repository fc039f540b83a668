"""Helpers shared by the operator tests."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

from ktest.run_context import RunContext, use_context
from ktest.wait import eventually

HERE = Path(__file__).resolve().parent
SAMPLES = HERE / "sample_operators"
GO_MANAGER = HERE.parent.parent / "fixtures" / "go-manager"


def python() -> str:
    return sys.executable


def wait_for(condition: Callable[[], bool], timeout: float = 30.0) -> None:
    """``ktest.wait.eventually`` without the enclosing health checks: it runs those of the
    current run context before every attempt, so it would raise the very operator error a test
    is waiting to inspect. Here it runs in a context of its own, which has none."""
    with use_context(RunContext("wait_for: no health checks")):
        eventually(condition, timeout=timeout)
