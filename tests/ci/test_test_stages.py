"""``scripts/test-stages`` (what ``make test`` runs): the order of its stages, the background
jobs at their priorities, and that no failure is lost and no job is left running.

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
    floors: str = "exit 0",
    example: str = "exit 0",
    python_first: str = "",
    kind_tests: str = "",
) -> dict[str, str]:
    """A fake ``make`` (background job A, ``kind-image``, runs ``image``; job B,
    ``binaries-older``, runs ``older``; ``test-floors`` runs ``floors``, ``test-example``
    ``example``) and ``python`` (runs ``python_first``, then exits with ``python_status``;
    the kind layer's own tests record whether the bare suite was still running when they
    started, which waits briefly for them to start, then run ``kind_tests``; the
    older-version tests record whether the kind layer had ended when they started); both log
    their calls."""
    calls = tmp_path / "calls"
    make = tmp_path / "make"
    make.write_text(
        "#!/usr/bin/env bash\n"
        f'echo "make $* nice=$(nice)" >> {calls}\n'
        f"cd {tmp_path}\n"
        # The default version's binaries (with the Go operators) record whether job B had started
        # (waiting briefly).
        'if [[ $* == *" binaries node-tools go-operators" ]]; then\n'
        "  for _ in $(seq 100); do [[ -e b-started ]] && break; sleep 0.05; done\n"
        f'  echo "B started before binaries: $([[ -e b-started ]] && echo yes || echo no)" >> {calls}\n'
        "fi\n"
        # The floors record whether the bare suite had ended when they started, and whether
        # they were still running when the kind layer ended (waiting briefly for that).
        'if [[ $* == *test-floors* ]]; then\n'
        f'  echo "floors after the bare suite: $([[ -e suite-done ]] && echo yes || echo no)" >> {calls}\n'
        "  for _ in $(seq 100); do [[ -e kind-layer-done ]] && break; sleep 0.05; done\n"
        f'  echo "floors beside the kind layer: $([[ -e kind-layer-done ]] && echo yes || echo no)"'
        f" >> {calls}\n"
        "fi\n"
        # The example project records whether the kind layer had ended when it started.
        'if [[ $* == *test-example* ]]; then\n'
        f'  echo "example after the kind layer: $([[ -e kind-layer-done ]] && echo yes || echo no)"'
        f" >> {calls}\n"
        "fi\n"
        # The kind layer records whether the kind layer's own tests had ended when it started.
        'if [[ $* == *test-kind* ]]; then\n'
        f'  echo "kind layer after the kind tests: $([[ -e kind-tests-done ]] && echo yes || echo no)"'
        f" >> {calls}\n"
        "fi\n"
        'case "$*" in\n'
        "  *test-kind*) touch kind-layer-done;;\n"
        f"  *binaries-older*) touch b-started; {older};;\n"
        f"  *kind-image*) {image};;\n"
        f"  *test-floors*) {floors};;\n"
        f"  *test-example*) {example};;\n"
        "esac\n"
    )
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    python = bin_dir / "python"
    python.write_text(
        "#!/usr/bin/env bash\n"
        f"{python_first}\n"
        f"cd {tmp_path}\n"
        'if [[ -n ${KTEST_OLDER_K8S_VERSION:-} ]]; then\n'
        '  echo "older tests after the kind layer: $([[ -e kind-layer-done ]] && echo yes || echo no)"'
        f" >> {calls}\n"
        "fi\n"
        'if [[ $* == *"tests/kind"* && $* != *--ignore* ]]; then\n'
        '  echo "kind tests during the bare suite: $([[ -e suite-done ]] && echo no || echo yes)"'
        f" >> {calls}\n"
        "  touch kind-tests-started\n"
        f"  {kind_tests or ':'}\n"
        "fi\n"
        'if [[ $* == *"tests examples"* ]]; then\n'
        "  for _ in $(seq 100); do [[ -e kind-tests-started ]] && break; sleep 0.05; done\n"
        "fi\n"
        f'echo "python $* older=${{KTEST_OLDER_K8S_VERSION:-unset}}" >> {calls}\n'
        f'[[ $* == *"tests examples"* ]] && touch {tmp_path}/suite-done\n'
        f'[[ $* == *"tests/kind"* && $* != *--ignore* ]] && touch {tmp_path}/kind-tests-done\n'
        f"exit {python_status}\n"
    )
    for path in (make, python):
        path.chmod(0o755)
    return {
        **os.environ,
        "BIN": str(bin_dir),
        "MAKE": str(make),
        "OLDER_K8S_VERSION": "1.36",
        "BACKGROUND_LOG_PREFIX": str(tmp_path / "background-"),
    }


def _run(env: dict[str, str], tmp_path: Path) -> subprocess.CompletedProcess[str]:
    env.pop("KTEST_OLDER_K8S_VERSION", None)
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


OLDER_TESTS = (
    "tests/controlplane/test_versions.py tests/controlplane/test_plane_upgrade.py "
    "tests/controlplane/test_upgrade_fixtures.py examples/test_upgrade.py tests/nodes/test_older_minor.py "
    "tests/docs/test_docs_examples.py::test_page_examples_run[docs/guides/upgrades.md]"
)
OLDER_TEST_CALL = f"python -m pytest -n 2 --dist loadgroup {OLDER_TESTS}"
BACKGROUND = {
    "make --no-print-directory binaries-older OLDER_K8S_VERSION=1.36 nice=19",
    "make --no-print-directory kind-image OLDER_K8S_VERSION=1.36 nice=10",
    "make --no-print-directory test-floors OLDER_K8S_VERSION=1.36 nice=5",
    "make --no-print-directory test-example OLDER_K8S_VERSION=1.36 nice=5",
    # The older-version tests' job: the binaries (B's, waited for through its install lock), the tests.
    "make --no-print-directory binaries-older OLDER_K8S_VERSION=1.36 nice=5",
    f"{OLDER_TEST_CALL} older=1.36",
    # The kind layer's own tests' job: the node image (A's, waited for through its build lock), the tests.
    "make --no-print-directory kind-image OLDER_K8S_VERSION=1.36 nice=5",
    "python -m pytest tests/kind older=unset",
}


def test_the_stages_run_in_order_with_the_background_jobs_at_their_priorities(tmp_path: Path) -> None:
    result = _run(_stand_ins(tmp_path), tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    calls = _calls(tmp_path)
    assert set(calls) >= BACKGROUND
    # B starts before the default version's binaries build, A only after it.
    assert "B started before binaries: yes" in calls
    assert calls.index("B started before binaries: yes") < calls.index(
        "make --no-print-directory kind-image OLDER_K8S_VERSION=1.36 nice=10"
    )
    foreground = [
        call for call in calls
        if call not in BACKGROUND
        and not call.startswith(("B ", "floors ", "example ", "older tests ", "kind tests ", "kind layer "))
    ]
    assert foreground[0] == "make --no-print-directory binaries node-tools go-operators nice=0"
    assert foreground[1].startswith("python -m pytest -n 2 --dist loadgroup tests examples")
    # What needs the older minor's binaries waits for them (after the kind layer), not in the bare suite.
    for test in OLDER_TESTS.split():
        left_out = f"--deselect={test}" if "::" in test else f"--ignore={test}"
        assert left_out in foreground[1]
    assert "--ignore=tests/kind " in foreground[1] + " "
    # The floors start once the bare suite is done and run beside the kind layer. (Their log
    # lines may come after the kind layer's: a background job's first line is not ordered.)
    assert "floors after the bare suite: yes" in calls
    assert "floors beside the kind layer: yes" in calls
    # The kind layer's own tests (the default version only: no older node image is built) run
    # beside the bare suite (off the critical path: they mostly wait on kind), and end before
    # the kind layer starts.
    assert "kind tests during the bare suite: yes" in calls
    assert "kind layer after the kind tests: yes" in calls
    # The example project and the older-version tests start once the kind layer is done.
    assert "example after the kind layer: yes" in calls
    assert "older tests after the kind layer: yes" in calls
    assert foreground[2].startswith("make --no-print-directory test-kind")
    assert len(foreground) == 3


def _failed_job_run(tmp_path: Path, job: str, goal: str, status: int, message: str) -> str:
    """Run the stages with the background ``job`` failing (``status``, printing ``message``);
    check that the run fails with the job's status and log; the calls made."""
    env = _stand_ins(tmp_path, **{job: f"echo '{message}'; exit {status}"})
    result = _run(env, tmp_path)
    assert result.returncode == status
    assert message in result.stdout
    name = "kind-image" if job == "image" else job
    assert f"the background job ({name}: make {goal}) failed with status {status}" in result.stderr
    return "\n".join(_calls(tmp_path))


def test_a_failed_kind_image_build_fails_the_run_before_the_kind_layer(tmp_path: Path) -> None:
    calls = _failed_job_run(tmp_path, "image", "kind-image", 3, "go: module not found")
    assert "python -m pytest -n 2 --dist loadgroup tests examples" in calls  # the bare suite before it ran
    assert "test-kind" not in calls and "python -m pytest tests/kind" not in calls


def test_failed_floors_fail_the_run_with_their_log(tmp_path: Path) -> None:
    """Waited for once the kind layer is done: nothing after the kind layer starts."""
    calls = _failed_job_run(tmp_path, "floors", "test-floors", 2, "pip: no matching distribution")
    assert "test-kind" in calls
    assert "test-example" not in calls and OLDER_TEST_CALL not in calls


def test_a_failed_example_project_fails_the_run_with_its_log(tmp_path: Path) -> None:
    calls = _failed_job_run(tmp_path, "example", "test-example", 3, "example: 1 failed")
    assert "python -m pytest tests/kind older=unset" in calls


def test_failed_kind_layer_own_tests_fail_the_run_before_the_kind_layer(tmp_path: Path) -> None:
    env = _stand_ins(tmp_path, kind_tests="echo 'kind: 1 failed'; exit 6")
    result = _run(env, tmp_path)
    assert result.returncode == 6
    assert "kind: 1 failed" in result.stdout
    assert "the background job (kind-own: kind_own_tests) failed with status 6" in result.stderr
    calls = "\n".join(_calls(tmp_path))
    assert "python -m pytest -n 2 --dist loadgroup tests examples" in calls  # the bare suite ran
    assert "test-kind" not in calls and OLDER_TEST_CALL not in calls


def test_a_failed_older_build_fails_the_run(tmp_path: Path) -> None:
    calls = _failed_job_run(tmp_path, "older", "binaries-older", 4, "etcd: build failed")
    assert "test-kind" in calls and OLDER_TEST_CALL not in calls


def test_a_failed_suite_stops_the_background_jobs(tmp_path: Path) -> None:
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
    assert "stopping the background job kind-image" in result.stderr
    assert "stopping the background job older" in result.stderr
    for build in builds:
        eventually(
            lambda build=build: not live_processes_using(build.parent),
            timeout=10,
            description=f"the background job in {build.parent.name} to end",
        )
