"""The soak (scripts/soak.py) with a small subset: runs ended normally, by Ctrl-C,
SIGTERM and kill -9 at several points, bare and reuse; zero leaks expected.
A release check runs ``python scripts/soak.py --runs 8`` (200 runs)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from ktest.assets.assets import Assets

SOAK = Path(__file__).resolve().parents[2] / "scripts" / "soak.py"


def test_quick_soak_leaks_nothing(assets: Assets) -> None:
    done = subprocess.run(
        [sys.executable, str(SOAK), "--quick", "--json"],
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
        env={**_env(), "KTEST_ASSETS": str(assets.directory)},
    )
    assert done.stdout, done.stderr[-3000:]
    report = json.loads(done.stdout)
    bad = [o for o in report["outcomes"] if o["leaks"] or o["hung"]]
    assert not bad, json.dumps(bad, indent=1)
    assert report["summary"]["runs"] == 7 and done.returncode == 0


def _env() -> dict[str, str]:
    import os

    return {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
