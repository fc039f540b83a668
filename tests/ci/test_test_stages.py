"""``scripts/test-stages`` (what ``make test`` runs): the order of its stages, the two background
builds at their priorities, and that no failure is lost and no build is left running.

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
    tmp_path: Path,
    *,
    python_status: int = 0,
    image: str = "exit 0",
    older: str = "exit 0",
    python_first: str = "",
) -> dict[str, str]:
    """A fake ``make`` (background job A, ``kind-image``, runs ``image``; job B, ending in
    ``kind-image-older``, runs ``older``) and ``python`` (runs ``python_first``, then exits with
    ``python_status``); both log their calls."""
    calls = tmp_path / "calls"
    make = tmp_path / "make"
    make.write_text(
        "#!/usr/bin/env bash\n"
        f'echo "make $* nice=$(nice)" >> {calls}\n'
        f"cd {tmp_path}\n"
        # The default version's binaries record whether job B had started (waiting briefly).
        'if [[ $* == *" binaries" ]]; then\n'
        "  for _ in $(seq 100); do [[ -e b-started ]] && break; sleep 0.05; done\n"
        f'  echo "B started before binaries: $([[ -e b-started ]] && echo yes || echo no)" >> {calls}\n'
        "fi\n"
        f'case "$*" in *kind-image-older*) touch b-started; {older};; *kind-image*) {image};; esac\n'
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
        "BACKGROUND_LOG_PREFIX": str(tmp_path / "background-"),
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


def _calls(tmp_path: Path) -> list[str]:
    return (tmp_path / "calls").read_text().splitlines()


def test_the_stages_run_in_order_with_the_builds_at_their_priorities(tmp_path: Path) -> None:
    result = _run(_stand_ins(tmp_path), tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    calls = _calls(tmp_path)
    background = [call for call in calls if "kind-image" in call]
    assert background == [
        "make --no-print-directory binaries-older kind-image-older OLDER_K8S_VERSION=1.35 nice=19",
        "make --no-print-directory kind-image OLDER_K8S_VERSION=1.35 nice=10",
    ]
    # B starts before the default version's binaries build, A only after it.
    assert "B started before binaries: yes" in calls
    assert calls.index("B started before binaries: yes") < calls.index(background[1])
    foreground = [call for call in calls if call not in background and not call.startswith("B ")]
    assert foreground[0] == "make --no-print-directory binaries nice=0"
    assert foreground[1].startswith("python -m pytest -n 2 tests examples")
    assert "--ignore=tests/controlplane/test_versions.py" in foreground[1]
    assert foreground[2].startswith("make --no-print-directory test-floors")
    assert foreground[3].startswith("make --no-print-directory test-kind")
    assert foreground[4] == "python -m pytest tests/kind tests/controlplane/test_versions.py"
    assert len(foreground) == 5


def test_a_failed_kind_image_build_fails_the_run_before_the_kind_layer(tmp_path: Path) -> None:
    env = _stand_ins(tmp_path, image="echo 'go: module not found'; exit 3")
    result = _run(env, tmp_path)
    assert result.returncode == 3
    assert "go: module not found" in result.stdout
    assert "the background build (kind-image: make kind-image) failed with status 3" in result.stderr
    calls = "\n".join(_calls(tmp_path))
    assert "test-floors" in calls  # the suites before it ran
    assert "test-kind" not in calls and "python -m pytest tests/kind" not in calls


def test_a_failed_older_build_fails_the_run_after_the_kind_layer(tmp_path: Path) -> None:
    env = _stand_ins(tmp_path, older="echo 'etcd: build failed'; exit 4")
    result = _run(env, tmp_path)
    assert result.returncode == 4
    assert "etcd: build failed" in result.stdout
    assert (
        "the background build (older: make binaries-older kind-image-older) failed with status 4"
        in result.stderr
    )
    calls = "\n".join(_calls(tmp_path))
    assert "test-kind" in calls and "python -m pytest tests/kind" not in calls


def test_a_failed_suite_stops_both_background_builds(tmp_path: Path) -> None:
    builds = []
    for name in ("image", "older"):
        build = tmp_path / f"building-{name}" / "build.sh"
        build.parent.mkdir()
        # Runs until killed; its path names it. It marks that it started.
        build.write_text(f"touch {tmp_path}/started-{name}; while :; do sleep 1; done\n")
        builds.append(build)
    # The suite fails once both builds run.
    wait = f"until [[ -e {tmp_path}/started-image && -e {tmp_path}/started-older ]]; do sleep 0.05; done"
    env = _stand_ins(
        tmp_path, python_status=1, image=f"bash {builds[0]}", older=f"bash {builds[1]}",
        python_first=wait,
    )
    result = _run(env, tmp_path)
    assert result.returncode == 1
    assert "stopping the background build kind-image" in result.stderr
    assert "stopping the background build older" in result.stderr
    for build in builds:
        eventually(
            lambda build=build: not live_processes_using(build.parent),
            timeout=10,
            description=f"the background build in {build.parent.name} to end",
        )
