"""``scripts/test-stages`` (what ``make test`` runs): the order of its stages, the background
build at idle priority, and that no failure is lost and no build is left running.

``make`` and ``python`` are stand-ins here (shell scripts recording their calls): the script's
own logic is what is under test, not the suites it calls.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from ci_helpers import REPO
from processes import live_processes_using

from ktest.wait import eventually

SCRIPT = REPO / "scripts" / "test-stages"


def _stand_ins(
    tmp_path: Path, *, python_status: int = 0, background: str = "exit 0", python_first: str = ""
) -> dict[str, str]:
    """A fake ``make`` (the background goals run ``background``) and ``python`` (runs
    ``python_first``, then exits with ``python_status``); both log their calls."""
    calls = tmp_path / "calls"
    make = tmp_path / "make"
    make.write_text(
        "#!/usr/bin/env bash\n"
        f'echo "make $* nice=$(nice)" >> {calls}\n'
        f"if [[ $* == *kind-images* ]]; then cd {tmp_path}; {background}; fi\n"
    )
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    python = bin_dir / "python"
    python.write_text(
        f'#!/usr/bin/env bash\n{python_first}\necho "python $*" >> {calls}\nexit {python_status}\n'
    )
    for path in (make, python):
        path.chmod(0o755)
    return {
        **os.environ,
        "BIN": str(bin_dir),
        "MAKE": str(make),
        "OLDER_K8S_VERSION": "1.35",
        "BACKGROUND_LOG": str(tmp_path / "background.log"),
    }


def _run(env: dict[str, str], tmp_path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(SCRIPT)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
        check=False,
    )


def test_the_stages_run_in_order_with_the_builds_at_idle_priority(tmp_path: Path) -> None:
    result = _run(_stand_ins(tmp_path), tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    calls = (tmp_path / "calls").read_text().splitlines()
    background = next(call for call in calls if "kind-images" in call)
    assert "binaries-older kind-images" in background and background.endswith("nice=19")
    foreground = [call for call in calls if call is not background]
    assert foreground[0].startswith("python -m pytest -n 2 tests examples")
    assert "--ignore=tests/controlplane/test_versions.py" in foreground[0]
    assert foreground[1].startswith("make --no-print-directory test-floors")
    assert foreground[2] == "python -m pytest tests/kind tests/controlplane/test_versions.py"
    assert foreground[3].startswith("make --no-print-directory test-kind")


def test_a_failed_background_build_fails_the_run_with_its_log(tmp_path: Path) -> None:
    env = _stand_ins(tmp_path, background="echo 'go: module not found'; exit 3")
    result = _run(env, tmp_path)
    assert result.returncode == 3
    assert "go: module not found" in result.stdout
    assert "the background build (make binaries-older kind-images) failed with status 3" in result.stderr
    calls = (tmp_path / "calls").read_text()
    assert "python -m pytest tests/kind" not in calls and "test-kind" not in calls  # never ran


def test_a_failed_suite_stops_the_background_build(tmp_path: Path) -> None:
    build = tmp_path / "building" / "build.sh"
    build.parent.mkdir()
    started = tmp_path / "started"
    build.write_text(f"touch {started}; while :; do sleep 1; done\n")  # until killed; its path names it
    # The suite fails once the build runs.
    wait = f"until [[ -e {started} ]]; do sleep 0.05; done"
    env = _stand_ins(tmp_path, python_status=1, background=f"bash {build}", python_first=wait)
    result = _run(env, tmp_path)
    assert result.returncode == 1
    assert "stopping the background build" in result.stderr
    eventually(
        lambda: not live_processes_using(build.parent), timeout=10, description="the background build to end"
    )
