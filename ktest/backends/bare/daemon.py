"""The background process behind ``ktest up`` (backend bare): runs one ControlPlane until SIGTERM.

Run as ``python -m ktest.backends.bare.daemon --record PATH --name NAME ...``. The
control plane's processes are bound to this daemon (parent-death signal,
janitor), so they outlive the ``ktest up`` that started it and die with it.
The record is written once the control plane is ready and removed on exit.
It serves the plane as a :class:`BareBackend`, so it stands with the bare backend;
the records and attaching (:mod:`ktest.backends.bare.reuse`) name it by module only.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import signal
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from types import FrameType

from ktest.backends.bare.backend import BareBackend
from ktest.backends.bare.reuse import UpRecord, read_record, write_record
from ktest.base.procfs import process_start_time
from ktest.controlplane import ControlPlane
from ktest.errors import KtestError
from ktest.sessions.shared import ClusterServer

_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ktest.backends.bare.daemon")
    parser.add_argument("--record", required=True, type=Path)
    parser.add_argument("--name", required=True)
    parser.add_argument("--k8s-version", default=None)
    parser.add_argument("--controllers", default="garbagecollector,namespace")
    parser.add_argument("--run-dir", default=None, type=Path)
    parser.add_argument("--nodes", default=0, type=int)
    args = parser.parse_args(argv)

    stop = threading.Event()
    starting = True

    def on_signal(signum: int, _frame: FrameType | None) -> None:
        stop.set()
        if starting:  # abort the start: ControlPlane.start() tears down what it began
            raise SystemExit(128 + signum)

    for signum in _SIGNALS:
        signal.signal(signum, on_signal)

    controllers = tuple(c for c in args.controllers.split(",") if c and c != "none")
    plane = ControlPlane(
        args.k8s_version, controllers=controllers or "none", root_directory=args.run_dir, nodes=args.nodes
    )
    try:
        plane.start()
    except KtestError as error:
        print(f"ktest up: {error}", file=sys.stderr, flush=True)
        return 1
    starting = False
    pid = os.getpid()
    # Reusing sessions ask through this socket to restart the controllers after new CRDs.
    server = ClusterServer(lambda: BareBackend(plane))
    try:
        share = server.open()
        record = UpRecord(
            name=args.name,
            pid=pid,
            pid_start=process_start_time(pid) or "",
            requested_version=args.k8s_version,
            controllers=controllers,
            nodes=args.nodes,
            started_at=time.time(),
            share=dataclasses.replace(share, description=f"Kubernetes {plane.version} at {plane.server}"),
            path=args.record,
        )
        write_record(record)
        print(f"ready: {plane.version} at {plane.server}, kubeconfig {plane.kubeconfig}", flush=True)
        while not stop.wait(1.0):
            pass
        print("stopping", flush=True)
    finally:
        current = read_record(args.record)
        if current is not None and current.pid == pid:
            args.record.unlink(missing_ok=True)
        try:
            server.close()
        finally:
            plane.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
