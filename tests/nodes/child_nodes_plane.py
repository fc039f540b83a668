"""Run by test_leave_nothing in a child Python process: start a control plane with three
simulated nodes, report its directory and its components' pids on stdout, then wait to be killed."""

from __future__ import annotations

import json
import sys

from ktest.assets import resolve_assets
from ktest.controlplane import ControlPlane


def main() -> None:
    plane = ControlPlane(assets=resolve_assets(sys.argv[1]), nodes=3).start()
    report = {
        "directory": str(plane.directory),
        "pids": {name: process.pid for name, process in plane.processes().items()},
    }
    print(json.dumps(report), flush=True)
    sys.stdin.readline()  # until the test kills us


if __name__ == "__main__":
    main()
