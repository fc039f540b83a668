"""Run as a script by tests/hardening/test_debug_logging.py: start one in-process operator with
DEBUG logging on, in a process of its own (a hang then ends with the process, not the suite).

    python debug_logging_operators.py KUBECONFIG NAMESPACE CASE

CASE: ``kopf-debug`` (run_kopf at logging.DEBUG, ktest's own loggers at DEBUG too),
``kopf-root-debug`` (run_kopf at INFO, the root logger at DEBUG as ``--log-level=DEBUG`` sets
it), ``callable-debug`` (an async run_callable at DEBUG whose first record, asyncio's, comes
before it has started), ``callable-lock-order`` (a callable logging errors while the test's
thread, holding the handle's lock, logs through ktest's loggers). Prints ``ready`` and exits 0.
"""

from __future__ import annotations

import asyncio
import logging
import sys
import threading
from pathlib import Path

from ktest.cluster import Cluster
from ktest.operators import OperatorContext, run_callable, run_kopf

HANDLERS = Path(__file__).resolve().parents[1] / "proxy" / "kopf_labeller.py"


async def _async_operator(ctx: OperatorContext) -> None:
    logging.getLogger("debug-operator").debug("first record of the operator's own")
    ctx.ready()
    await ctx.stop.wait()  # type: ignore[misc]


def _erring_operator(ctx: OperatorContext) -> None:
    ctx.ready()
    while not ctx.stop.is_set():
        logging.getLogger("erring-operator").error("an error the test lets pass")
        ctx.stop.wait(0.001)  # type: ignore[call-arg]


def main(kubeconfig: str, namespace: str, case: str) -> None:
    logging.basicConfig(level=logging.DEBUG, stream=sys.stderr)  # ktest's own DEBUG records too
    cluster = Cluster(kubeconfig)
    if case == "kopf-debug":
        with run_kopf(HANDLERS, cluster, namespaces=[namespace], log_level=logging.DEBUG):
            print("ready", flush=True)
    elif case == "kopf-root-debug":
        with run_kopf(HANDLERS, cluster, namespaces=[namespace]):
            print("ready", flush=True)
    elif case == "callable-debug":
        with run_callable(_async_operator, cluster, log_level=logging.DEBUG) as op:
            assert "first record of the operator's own" in op.logs, op.logs
            print("ready", flush=True)
    elif case == "callable-lock-order":
        ktest_logger = logging.getLogger("ktest.debug-logging-test")
        with run_callable(_erring_operator, cluster, fail_on_errors=False) as op:
            for _ in range(2000):
                with op._lock:  # what start() and the health checks do: hold it, and log meanwhile
                    ktest_logger.debug("the test's thread logs while it holds the handle's lock")
            print("ready", flush=True)
    else:
        raise SystemExit(f"unknown case {case!r}")
    leftover = [thread.name for thread in threading.enumerate() if thread.name.startswith("ktest-kopf")]
    assert not leftover, leftover
    asyncio.set_event_loop(None)


if __name__ == "__main__":
    main(*sys.argv[1:4])
    sys.exit(0)
