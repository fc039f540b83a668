"""``scripts/test-stages`` (what ``make test`` and ``make check`` run): properties of the plan it
prints (every test file runs in some stage, the critical path, what waits for what, priorities),
and the runner's own logic on small plans of real commands (order, failures, skips, the table);
a pytest stage there hands the runner what a real pytest session, run in this process, wrote.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shlex
import signal
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from ci_helpers import BURN_CPU, REPO
from processes import live_processes_using

STAGES = REPO / "scripts" / "stages"
if str(STAGES) not in sys.path:
    sys.path.insert(0, str(STAGES))

from stage_plan import Job  # noqa: E402
from stage_runner import run  # noqa: E402

SCRIPT = REPO / "scripts" / "test-stages"
ENV = {"BIN": ".venv/bin", "MAKE": "make", "OLDER_K8S_VERSION": "1.36", "TEST_WORKERS": "2"}


def _plan(*args: str, **env: str) -> dict[str, dict]:
    # the plan's defaults, not the worker counts `make test` passes to the suite running this
    inherited = {k: v for k, v in os.environ.items() if k not in ("BARE_WORKERS", "CHECK_WORKERS")}
    printed = subprocess.run([str(SCRIPT), *args, "--plan"], env={**inherited, **ENV, **env}, cwd=REPO,
                             capture_output=True, text=True, check=True).stdout
    return {job["name"]: job for job in json.loads(printed)}


def _recipe(job: dict) -> list[str]:
    """The command lines a job runs: its own, or those its make goal's recipe runs (``make -n``)."""
    command = job["command"]
    if command[0] != "make":
        return [shlex.join(command)]
    dry_run = subprocess.run([*command, "-n"], cwd=REPO, capture_output=True, text=True, check=True)
    return dry_run.stdout.splitlines()


def _pytest_command(job: dict) -> list[str] | None:
    """The pytest command line a job runs (None: it runs pytest elsewhere, e.g. the example project's)."""
    lines = [line for line in _recipe(job) if " -m pytest " in line]
    return shlex.split(lines[-1]) if lines else None


def _selects(command: list[str], test_file: str) -> bool:
    """Whether a pytest command line runs (some of) ``test_file``: under a path it names, not ignored."""
    after_pytest = command[command.index("pytest") + 1:]
    paths = [arg.split("::")[0] for arg in after_pytest
             if (not arg.startswith("-") and "/" in arg) or arg in ("tests", "examples")]
    ignored = [arg.split("=", 1)[1] for arg in after_pytest if arg.startswith("--ignore=")]
    under = any(test_file == path or test_file.startswith(path.rstrip("/") + "/") for path in paths)
    return under and not any(test_file == path or test_file.startswith(path + "/") for path in ignored)


def test_every_test_file_runs_in_some_stage() -> None:
    commands = {name: _pytest_command(job) for name, job in _plan().items() if job["junit"]}
    assert {"bare", "older", "kind-own", "kind", "floors", "lint-tests", "example"} <= set(commands)
    commands = {name: command for name, command in commands.items() if command is not None}
    test_files = sorted(
        str(path.relative_to(REPO))
        for folder in ("tests", "examples")
        for path in (REPO / folder).rglob("test_*.py")
        if "memcached-kopf" not in path.parts  # the example project: its own stage, from the wheel
    )
    assert len(test_files) > 150
    lost = [name for name in test_files if not any(_selects(command, name) for command in commands.values())]
    assert lost == []


def test_what_upgrades_from_the_older_minor_runs_in_the_older_stage_not_the_bare_suite() -> None:
    """A bare test on the older minor's binaries waits for their build: cold, a worker held 459 s."""
    commands = {name: _pytest_command(_plan()[name]) for name in ("bare", "older")}
    upgrading = sorted(
        str(path.relative_to(REPO))
        for folder in ("tests", "examples")
        for path in (REPO / folder).rglob("test_*.py")
        if re.search(r"def test_\w+\([^)]*\bcontrol_plane_upgrade\b", path.read_text())  # or an inner one's
        and "memcached-kopf" not in path.parts
    )
    assert len(upgrading) >= 3, upgrading
    bare, older = commands["bare"], commands["older"]
    assert bare is not None and older is not None
    misplaced = [name for name in upgrading if _selects(bare, name) or not _selects(older, name)]
    assert misplaced == []


def test_the_bare_suite_is_the_critical_path_and_the_rest_waits_or_yields() -> None:
    jobs = _plan()
    bare = jobs["bare"]
    assert bare["stream"] and bare["niceness"] == 0 and bare["after"] == ["prepare"]
    for name, job in jobs.items():
        if name not in ("bare", "prepare"):
            # Anything beside the bare suite yields the CPU to it.
            assert job["niceness"] > 0, name
    # Nothing waits for the bare suite alone: the floors and the example project start once the kind
    # layer or the bare suite has passed, whichever ends first (warm: the kind layer, so they run
    # beside the bare suite's last part; cold: the bare suite, so they run beside the kind layer).
    assert not [name for name, job in jobs.items() if "bare" in job["after"]]
    for name in ("floors", "example"):
        assert set(jobs[name]["after_any"]) == {"kind", "bare"}, name
    assert jobs["floors"]["after"] == [] and jobs["example"]["after"] == ["dist"]
    assert jobs["older-binaries"]["niceness"] == 19 and jobs["kind-image"]["niceness"] == 5
    assert jobs["kind"]["after"] == ["kind-own"]  # one set of kind clusters at a time
    assert jobs["kind-own"]["after"] == ["kind-image"]
    assert jobs["kind-image"]["after"] == ["prepare"]
    # The older minor's tests run beside the bare suite as soon as their binaries are there.
    assert set(jobs["older"]["after"]) == {"prepare", "older-binaries"}
    assert jobs["older"]["env"] == {"KTEST_OLDER_K8S_VERSION": "1.36"}
    # One sdist and wheel for the packaging tests and the example project.
    dist = jobs["dist"]["command"][jobs["dist"]["command"].index("--outdir") + 1]
    assert jobs["bare"]["env"]["KTEST_DIST_DIR"] == dist
    assert f"KTEST_DIST_DIR={dist}" in jobs["example"]["command"]


def test_every_pytest_stage_writes_junit_and_durations() -> None:
    for plan in (_plan(), _plan("--check")):
        for name, job in plan.items():
            if job["junit"]:
                recipe = " ".join(_recipe(job))
                assert f"--junitxml={REPO}/.ktest-stages/{name}.xml --durations=10" in recipe, name


def test_make_check_is_lint_and_the_bare_suite_without_slow_tests() -> None:
    check, full = _plan("--check"), _plan()
    assert set(check) == {"lint", "bare-quick"}
    quick = check["bare-quick"]["command"]
    assert quick[quick.index("not slow") - 1] == "-m"
    same_files = [arg for arg in full["bare"]["command"] if arg.startswith(("--ignore", "--deselect"))]
    assert [arg for arg in quick if arg.startswith(("--ignore", "--deselect"))] == same_files


def test_the_bare_suite_and_make_check_run_on_their_own_worker_counts() -> None:
    def workers(command: list[str]) -> str:
        return command[command.index("-n") + 1]

    # Beside the other stages the bare suite takes 3 workers; make check, alone, 4 (the Makefile's).
    assert workers(_plan()["bare"]["command"]) == "3"
    assert workers(_plan("--check")["bare-quick"]["command"]) == "4"
    assert workers(_plan(BARE_WORKERS="5")["bare"]["command"]) == "5"
    assert workers(_plan("--check", CHECK_WORKERS="6")["bare-quick"]["command"]) == "6"


def _job(name: str, code: str, **fields: object) -> Job:
    """A job running ``code`` in a fresh interpreter. Paths go in through ``env`` (not the code):
    a command line holding a pytest tmp_path reads as a child pytest session to the process census."""
    return Job(name, (sys.executable, "-c", code), **fields)  # type: ignore[arg-type]


def test_jobs_wait_for_what_they_come_after_and_run_at_their_niceness(tmp_path: Path) -> None:
    env = {"FIRST": str(tmp_path / "first")}
    # "first" takes a moment, so a "second" that did not wait for it would not find its file
    first = _job("first", "import os, pathlib, time; time.sleep(0.5); "
                 "pathlib.Path(os.environ['FIRST']).touch()", env=env)
    second = _job("second", "import os, pathlib; print('second saw first:', "
                  "pathlib.Path(os.environ['FIRST']).exists(), 'nice', os.nice(0)); "
                  "group = pathlib.Path('/proc/self/autogroup'); "
                  "print('group', group.read_text().split()[-1] if group.exists() else 'none')",
                  after=("first",), niceness=7, env=env)
    assert run([second, first], tmp_path / "out", dict(os.environ)) == 0
    log = (tmp_path / "out" / "second.log").read_text()
    assert f"second saw first: True nice {min(os.nice(0) + 7, 19)}" in log  # 7 above the runner's
    # Its session's scheduling group too, where the kernel groups sessions (else nice weighs only
    # against the job's own processes).
    assert "group 7" in log or "group none" in log, log
    table = (tmp_path / "out" / "table.md").read_text()
    assert re.search(r"\| second \| \d+:\d\d \| \d+:\d\d \| \d+:\d\d \| passed \|", table), table


def test_a_job_after_any_starts_once_the_first_of_them_passed(tmp_path: Path) -> None:
    """``after_any``: the job starts when one of its jobs has passed, without waiting for the other."""
    env = {"QUICK_MARK": str(tmp_path / "quick-done"), "EITHER_MARK": str(tmp_path / "either")}
    # "quick" takes a moment, so a job that did not wait for it would find no mark
    quick = _job("quick", "import os, pathlib, time; time.sleep(0.5); "
                 "pathlib.Path(os.environ['QUICK_MARK']).touch()", env=env)
    slow = _job("slow", "import os, pathlib, time\n"
                "while not pathlib.Path(os.environ['EITHER_MARK']).exists(): time.sleep(0.05)", env=env)
    either = _job("either", "import os, pathlib; "
                  "print('quick done:', pathlib.Path(os.environ['QUICK_MARK']).exists()); "
                  "pathlib.Path(os.environ['EITHER_MARK']).touch()", after_any=("slow", "quick"), env=env)
    assert run([slow, quick, either], tmp_path / "out", dict(os.environ)) == 0  # "slow" waits for "either"
    assert "quick done: True" in (tmp_path / "out" / "either.log").read_text()


def test_the_table_counts_the_cpu_of_a_jobs_descendants(tmp_path: Path) -> None:
    """A stage's weight is its CPU work: a grandchild's (a control plane, a child session) counts."""
    burner = _job("burner", "import subprocess, sys; "
                  f"subprocess.run([sys.executable, '-c', {BURN_CPU!r}], check=True)")
    assert run([burner], tmp_path / "out", dict(os.environ)) == 0
    burnt = float((tmp_path / "out" / "burner.log").read_text().split()[-1])
    table = (tmp_path / "out" / "table.md").read_text()
    found = re.search(r"\| burner \| \d+:\d\d \| \d+:\d\d \| (\d+):(\d\d) \| passed \|", table)
    assert found, table
    assert int(found[1]) * 60 + int(found[2]) >= int(burnt), (burnt, table)
    total = r"^CPU of all stages: \d+:\d\d in \d+:\d\d, \d+\.\d\d cores on average"
    assert re.search(total, table, re.MULTILINE), table


@contextlib.contextmanager
def ignored_sigint() -> Iterator[None]:
    """SIGINT ignored in this process, as in a background command of a script (the runner's jobs
    inherit that unless it undoes it for them)."""
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def test_a_failed_job_stops_the_running_ones_and_fails_with_its_status_and_log(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Only named on the sleeper's command line, to find it there: a token unique to this test.
    marker = Path(f"sleeper-marker-{uuid.uuid4().hex}")
    env = {"READY": str(tmp_path / "sleeper-ready"), "CLEANED": str(tmp_path / "sleeper-cleaned-up")}
    # A stage stopped as by Ctrl-C runs its teardowns (pytest's finalizers run on KeyboardInterrupt),
    # even when the runner itself was started with SIGINT ignored (a background job of a script).
    sleeper = _job("sleeper", "import os, pathlib, time\n"
                              "try:\n"
                              "    pathlib.Path(os.environ['READY']).touch()\n"
                              f"    time.sleep(120); {str(marker)!r}\n"
                              "except KeyboardInterrupt:\n"
                              "    pathlib.Path(os.environ['CLEANED']).touch()", env=env)
    # it fails once the sleeper is in its try block (a file it writes: its readiness, not a delay)
    failing = _job("failing", "import os, pathlib, sys, time\n"
                              "for _ in range(3000):\n"
                              "    if pathlib.Path(os.environ['READY']).exists(): break\n"
                              "    time.sleep(0.01)\n"
                              "print('the floors broke'); sys.exit(3)", after=(), env=env)
    never = _job("never", "print('ran after a failure')", after=("failing",))
    with ignored_sigint():
        assert run([sleeper, failing, never], tmp_path / "out", dict(os.environ)) == 3
    out, err = capsys.readouterr()
    assert "the floors broke" in out
    assert "failing failed with status 3" in err
    assert not (tmp_path / "out" / "never.log").exists()
    assert live_processes_using(marker) == []
    assert Path(env["CLEANED"]).exists(), "the running stage was not interrupted first (no teardown ran)"


SAMPLE = """
import pytest
def test_passes(): pass
@pytest.mark.skip(reason="one")
def test_skipped_one(): pass
@pytest.mark.skip(reason="two")
def test_skipped_two(): pass
"""


def _real_junit(pytester: pytest.Pytester, tests: str) -> tuple[int, Path]:
    """Real pytest on ``tests`` as a stage runs it (no ktest), in this process: its exit status
    and JUnit XML, for a stage's stand-in to hand the runner (:func:`_replay`)."""
    pytester.makepyfile(test_sample=tests)
    junit = pytester.path / "real.xml"
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider", "-p", "no:ktest", "-p", "no:randomly",
                                          "-o", "asyncio_default_fixture_loop_scope=function",
                                          f"--junitxml={junit}", "--durations=10", "test_sample.py")
    return int(result.ret), junit


def _replay(name: str, status: int, junit: Path, **fields: object) -> Job:
    """A pytest stage's stand-in (the runner reads nothing else of a stage than its exit status and
    JUnit XML): it copies a real session's ``junit`` to where the runner's ``--junitxml=`` says, and
    exits with that session's ``status``."""
    code = ("import os, shutil, sys\n"
            "target = next(a.split('=', 1)[1] for a in sys.argv[1:] if a.startswith('--junitxml='))\n"
            "shutil.copyfile(os.environ['REAL_JUNIT'], target)\n"
            f"sys.exit({status})")
    return _job(name, code, junit=True, env={"REAL_JUNIT": str(junit)}, **fields)


def test_more_skips_than_the_stage_allows_fail_the_run(
    pytester: pytest.Pytester, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    status, junit = _real_junit(pytester, SAMPLE)
    strict = _replay("strict", status, junit, skips_allowed=1)
    assert run([strict], tmp_path / "out", dict(os.environ)) == 1
    out, err = capsys.readouterr()
    assert "strict failed: 2 tests skipped, 1 allowed" in err
    assert "| strict |" in out and "| FAILED | 1 | 0 | 2 (1) |" in out


def test_the_table_lists_each_stage_and_its_slowest_tests(pytester: pytest.Pytester, tmp_path: Path) -> None:
    status, junit = _real_junit(pytester, SAMPLE)
    allowed = _replay("allowed", status, junit, skips_allowed=2)
    assert run([allowed], tmp_path / "out", dict(os.environ)) == 0
    table = (tmp_path / "out" / "table.md").read_text()
    assert "| passed | 1 | 0 | 2 (2) |" in table
    assert "### allowed: the 3 slowest tests" in table
    assert re.search(r"- +\d+\.\d s test_sample::test_passes", table), table


def test_no_tests_collected_is_a_failure(
    pytester: pytest.Pytester, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    status, junit = _real_junit(pytester, "# no tests here\n")
    empty = _replay("empty", status, junit)
    assert run([empty], tmp_path / "out", dict(os.environ)) == 5
    assert "empty failed: no tests collected (pytest's exit status 5)" in capsys.readouterr().err
