"""Run by test_lifecycle in a child Python process: start a control plane from a
short-lived worker thread, report it on stdout, then wait to be killed (or, with
``exit`` as third argument, exit normally on a line of input without stopping it;
with ``fork`` as fourth, first fork a child that outlives this process)."""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from pathlib import Path

from ktest.controlplane import ControlPlane


def main() -> None:
    assets = Path(sys.argv[1]) if len(sys.argv) > 1 and sys.argv[1] else None
    controllers = sys.argv[2] if len(sys.argv) > 2 else "garbagecollector,namespace"
    then = sys.argv[3] if len(sys.argv) > 3 else "wait"
    fork = len(sys.argv) > 4 and sys.argv[4] == "fork"
    planes: list[ControlPlane] = []

    def start() -> None:
        planes.append(ControlPlane(assets=assets, controllers=controllers).start())

    # The starting thread ends here: children must survive it (parent-death
    # signals follow the forking thread, not the process).
    worker = threading.Thread(target=start)
    worker.start()
    worker.join()
    plane = planes[0]
    report = {
        "directory": str(plane.directory),
        "pids": {name: process.pid for name, process in plane.processes().items()},
    }
    if fork:
        # Like multiprocessing's default start method: a child that outlives us.
        forked = os.fork()
        if forked == 0:
            time.sleep(300)
            os._exit(0)
        report["forked"] = forked
    print(json.dumps(report), flush=True)
    sys.stdin.readline()  # until the test kills us, or says "exit"
    if then == "exit":
        sys.exit(0)  # without calling plane.stop()


if __name__ == "__main__":
    main()
