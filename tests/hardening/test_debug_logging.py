"""Operators started with DEBUG logging on start, and ktest's waits end (issue 50.1).

``run_kopf(..., log_level=logging.DEBUG)`` used to hang for good: the kopf thread's first
record (asyncio's "Using selector" line, logged before the run counted as started) went through
ktest's routing handler to the operator handle's lock, which the test's thread held while it
waited, without a timeout, for the run to start. Each case runs in a process of its own, so that
the old behaviour fails the test (the process is killed after ``BOUND`` s) instead of hanging
the suite.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from ktest.cluster import Cluster

SCRIPT = Path(__file__).with_name("debug_logging_operators.py")
BOUND = 120.0
"""Seconds a case may take: starting one operator takes a few; a hang never ends."""


@pytest.mark.parametrize(
    "case", ["kopf-debug", "kopf-root-debug", "callable-debug", "callable-lock-order"]
)
def test_an_operator_started_with_debug_logging_gets_ready(
    cluster: Cluster, namespace: str, case: str
) -> None:
    try:
        done = subprocess.run(
            [sys.executable, str(SCRIPT), str(cluster.kubeconfig), namespace, case],
            capture_output=True, text=True, timeout=BOUND,
        )
    except subprocess.TimeoutExpired as expired:
        stderr = expired.stderr or b""
        text = stderr.decode(errors="replace") if isinstance(stderr, bytes) else stderr
        pytest.fail(f"{case}: the operator did not start within {BOUND:g} s (a deadlock); its last "
                    f"output:\n{text[-3000:]}")
    assert done.returncode == 0 and "ready" in done.stdout, (
        done.returncode, done.stdout, done.stderr[-3000:]
    )
