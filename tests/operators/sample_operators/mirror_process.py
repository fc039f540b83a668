"""The sync mirror operator as a program: ``python mirror_process.py [--exit-with N]
[--ignore-sigterm] [--namespace NS]``, using KUBECONFIG from the environment."""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import threading
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from sample_operators.mirror import mirror_loop


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--exit-with", type=int, default=None)
    parser.add_argument("--ignore-sigterm", action="store_true")
    parser.add_argument("--namespace", default=None)
    options = parser.parse_args()
    logging.basicConfig(level=logging.INFO, stream=sys.stdout, format="%(levelname)s %(name)s: %(message)s")
    if options.exit_with is not None:
        print(
            f"fatal: cannot load configuration: OPERATOR_MODE is not set (exit {options.exit_with})",
            flush=True,
        )
        return options.exit_with
    stop = threading.Event()
    if options.ignore_sigterm:
        signal.signal(signal.SIGTERM, lambda *_: print("ignoring SIGTERM", flush=True))
    else:
        signal.signal(signal.SIGTERM, lambda *_: stop.set())
    mirror_loop(os.environ["KUBECONFIG"], stop, lambda: None, namespace=options.namespace)
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
