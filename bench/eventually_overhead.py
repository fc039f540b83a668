"""CPU one ``eventually()`` call costs when its check passes at once, against the same check
retried by a bare ``tenacity.Retrying`` (what ``eventually`` is built on), in the same run.

Run: .venv/bin/python bench/eventually_overhead.py [--lines 400] [--calls 300] [--runs 5]

``eventually`` finds its check's source to name what failed (the lambda's expression and its
operands' values), so its fixed cost grows with the test module the check is written in: the
check here is a lambda in a generated module of ``--lines`` lines (functions with lambdas, as
test modules have). Prints the medians of ``--runs`` runs of ``--calls`` calls each, in CPU
milliseconds per call, and the ratio to the baseline.
"""

from __future__ import annotations

import argparse
import importlib.util
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import tenacity

from ktest.wait import eventually

MODULE = '''
STATE = {"status": {"phase": "Ready"}}


def check_through_eventually(eventually):
    return eventually(lambda: STATE["status"]["phase"] == "Ready", timeout=5)


def check_through_tenacity(retrying):
    return retrying(lambda: STATE["status"]["phase"] == "Ready")
'''


def _module(lines: int, directory: Path) -> Any:
    filler = "".join(
        f"\n\ndef helper_{i}(items):\n    return sorted(items, key=lambda item: item + {i})\n"
        for i in range(max(0, (lines - MODULE.count("\n")) // 4))
    )
    path = directory / "bench_checks.py"
    path.write_text(MODULE + filler)
    spec = importlib.util.spec_from_file_location("bench_checks", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _per_call(call: Callable[[], Any], calls: int) -> float:
    started = time.process_time()
    for _ in range(calls):
        call()
    return (time.process_time() - started) / calls * 1000


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--lines", type=int, default=400)
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    retrying = tenacity.Retrying(stop=tenacity.stop_after_delay(5), wait=tenacity.wait_fixed(0.25),
                                 retry=tenacity.retry_if_result(lambda ok: not ok))
    with tempfile.TemporaryDirectory(prefix="ktest-bench-eventually-") as scratch:
        module = _module(args.lines, Path(scratch))
        ours: list[float] = []
        baseline: list[float] = []
        for _ in range(args.runs):  # interleaved, so that both see the same machine
            ours.append(_per_call(lambda: module.check_through_eventually(eventually), args.calls))
            baseline.append(_per_call(lambda: module.check_through_tenacity(retrying), args.calls))
    ours_ms, baseline_ms = statistics.median(ours), statistics.median(baseline)
    print(f"eventually(), check in a {args.lines}-line module: {ours_ms:.3f} ms CPU per call "
          f"(median of {args.runs} runs of {args.calls})")
    print(f"tenacity.Retrying, same check: {baseline_ms:.3f} ms CPU per call")
    print(f"ratio: {ours_ms / baseline_ms:.1f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
