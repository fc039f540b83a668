"""How often ``assert_survives_concurrent_writes`` catches an operator that crashes on 409 Conflict.

Two operators with the same bug (a read-modify-write PUT; the first 409 ends it),
one with a 200 ms pause between its read and its update, one with none; each is
run ``--runs`` times against a timing-only concurrent writer (``conflicts=0``,
the behaviour before deterministic conflicts) and with the operator's own next
updates made to conflict (``conflicts=3``, the default), on one real control plane.

    .venv/bin/python bench/conflict_detection.py [--runs 20] [--duration 1]

Prints the detection counts and a JSON line. Set KTEST_ASSETS to use a directory
of binaries instead of resolving them.
"""

from __future__ import annotations

import argparse
import json
import secrets
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests" / "assertions"))

from assertion_controllers import Controller, widget  # noqa: E402
from test_assert_conflicts import (  # noqa: E402
    fast_labeler,
    labelled_as,
    resize,
    slow_labeler,
    wait_until_labelled,
)

from ktest.assertions import assert_survives_concurrent_writes  # noqa: E402
from ktest.cluster import Cluster  # noqa: E402
from ktest.controlplane import ControlPlane  # noqa: E402
from ktest.run_context import add_health_check, run_context  # noqa: E402
from ktest.wait import use_defaults  # noqa: E402

CRDS = HERE.parent / "tests" / "assertions" / "crds"
BUGS = {"read-pause-200ms": slow_labeler, "no-read-pause": fast_labeler}


def caught(cluster: Cluster, labeler_name: str, conflicts: int, duration: float) -> bool:
    """One run: whether the assertion failed (the bug was caught)."""
    ns = f"bench-{secrets.token_hex(4)}"
    cluster.create_namespace(ns)
    try:
        with run_context(ns, test=True), use_defaults(timeout=5):
            controller = Controller(cluster, ns, BUGS[labeler_name](cluster), crash_on_error=True)
            with controller:
                forget = add_health_check(controller.health)
                created = cluster.create(widget("w1", ns, size=3))
                wait_until_labelled(cluster, created, 3)
                try:
                    assert_survives_concurrent_writes(
                        cluster,
                        created,
                        labelled_as(cluster, created, 4),
                        duration=duration,
                        conflicts=conflicts,
                        trigger=resize(cluster, created, 4),
                        allow_no_conflict=True,  # caught means the crash, not an unmet conflict
                    )
                    return False
                except AssertionError:
                    return True
                finally:
                    forget()
    finally:
        cluster.delete(("v1", "Namespace", ns), missing_ok=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--duration", type=float, default=1.0)
    args = parser.parse_args()
    results: dict[str, dict[str, int]] = {}
    started = time.monotonic()
    with ControlPlane() as plane:
        with Cluster(plane.kubeconfig, name="installer") as installer:
            installer.install_crds(CRDS)
        with Cluster(plane.kubeconfig, controllers=plane.controllers) as cluster:
            for bug in BUGS:
                for label, conflicts in (("timing-only", 0), ("deterministic", 3)):
                    hits = sum(caught(cluster, bug, conflicts, args.duration) for _ in range(args.runs))
                    results.setdefault(bug, {})[label] = hits
                    print(f"{bug:18} {label:14} caught {hits}/{args.runs}", flush=True)
    print(json.dumps({"runs": args.runs, "duration": args.duration, "caught": results,
                      "seconds": round(time.monotonic() - started)}))


if __name__ == "__main__":
    main()
