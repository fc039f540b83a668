"""What `make test` runs (scripts/test-stages): jobs, what each waits for, and at which priority.

On 2 cores a run is bound by its total CPU work, so jobs overlap wherever they can and their
niceness says which is wanted first:

- ``bare``, the bare suite, is the critical path of a warm run (nice 0, its output live), once
  ``prepare`` has the default version's binaries (warm: a few seconds of checks);
- ``lint`` (ruff, mypy), ``lint-tests`` (the typing checks on user-style files, the strict docs
  build) and ``dist`` (the sdist and wheel, built once: the packaging tests and the example project
  use them) run beside it at nice 5; ``older`` (the older minor's tests) too, once
  ``older-binaries`` (nice 19) has built them;
- ``kind-image`` (the default version's kind node image, nice 5: cold, a long build that the kind
  chain waits for) starts once the binaries are there; ``kind-own`` (the kind layer's own tests,
  which create, build and reuse clusters) after it, then ``kind`` (the kind backend, the parity
  set and the demo suite on one shared cluster), both at nice 5: their tests mostly wait on kind,
  and one set of kind clusters at a time leaves the bare suite most of the CPU;
- ``floors`` (the dependency floors' subset) and ``example`` (the example project from the wheel)
  once the kind layer or the bare suite has passed, whichever ends first: warm, the kind layer
  (beside the bare suite's last part); cold, the bare suite (beside the kind layer, which the
  node image's build started late).

Every pytest job writes JUnit XML and declares how many skips it allows: more fails the run.
"""

from __future__ import annotations

import os
import shlex
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Job:
    name: str
    argv: tuple[str, ...]
    after: tuple[str, ...] = ()
    after_any: tuple[str, ...] = ()  # and once the first of these has passed (whichever ends first)
    niceness: int = 0
    io_class: int = 2  # best effort; 3 = idle
    junit: bool = False
    skips_allowed: int = 0
    stream: bool = False
    env: dict[str, str] = field(default_factory=dict)
    pytest_args: tuple[str, ...] = ()
    why: str = ""

    @property
    def runs_make(self) -> bool:
        return "--no-print-directory" in self.argv[:2]

    def command(self, out: str) -> list[str]:
        """The command line: a pytest stage's own arguments, JUnit XML and durations added (through
        ``PYTEST_ARGS=`` when make runs pytest)."""
        if not self.junit:
            return list(self.argv)
        args = (*self.pytest_args, f"--junitxml={out}/{self.name}.xml", "--durations=10")
        if self.runs_make:
            return [*self.argv, f"PYTEST_ARGS={shlex.join(args)}"]
        return [*self.argv, *args]


@dataclass(frozen=True)
class Settings:
    bin: str
    make: str = "make"
    bare_workers: str = "3"
    check_workers: str = "4"
    older_version: str = "1.36"
    version_args: tuple[str, ...] = ()
    pytest_args: tuple[str, ...] = ()
    out: str = ".ktest-stages"

    @classmethod
    def from_env(cls, env: dict[str, str]) -> Settings:
        return cls(
            bin=env["BIN"],
            make=env.get("MAKE") or "make",
            bare_workers=env.get("BARE_WORKERS") or "3",
            check_workers=env.get("CHECK_WORKERS") or "4",
            older_version=env["OLDER_K8S_VERSION"],
            version_args=tuple(shlex.split(env.get("VERSION_ARGS", ""))),
            pytest_args=tuple(shlex.split(env.get("PYTEST_ARGS", ""))),
            out=os.path.abspath(env.get("KTEST_STAGES_DIR") or ".ktest-stages"),
        )


# What needs the older minor's binaries: the older-version test, the in-place upgrades from the older
# minor to the default (and the timeline of one), their docs page, the simulated nodes on the older
# minor. It runs beside the bare suite as soon as those binaries are there (warm: at once; cold: they
# build at nice 19, and a bare test needing them held a worker 459 s waiting for that build).
OLDER_TESTS = (
    "tests/controlplane/test_versions.py",
    "tests/controlplane/test_plane_upgrade.py",
    "tests/controlplane/test_upgrade_fixtures.py",
    "tests/timeline/test_timeline_own_plane.py",
    "examples/test_upgrade.py",
    "tests/nodes/test_older_minor.py",
    "tests/docs/test_docs_examples.py::test_page_examples_run[docs/guides/upgrades.md]",
)


# Lint-like tests: they run type checkers and the strict docs build on files, no cluster; beside the
# suites at low priority instead of on a worker of the bare suite.
LINT_TESTS = ("tests/test_typing.py", "tests/docs/test_docs_reference.py")


def ignoring(tests: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(f"--deselect={test}" if "::" in test else f"--ignore={test}" for test in tests)


BARE_SUITE = ("tests", "examples", "--ignore=tests/on_kind", "--ignore=tests/kind_machinery")


def check_plan(settings: Settings) -> list[Job]:
    """`make check`, the inner loop: lint, and the bare suite without its slow tests."""
    pytest = (f"{settings.bin}/python", "-m", "pytest", *settings.version_args)
    return [
        Job("lint", (settings.make, "--no-print-directory", "lint"), niceness=5, why="ruff and mypy"),
        Job("bare-quick", (*pytest, "-n", settings.check_workers, "--dist", "loadgroup", "-m", "not slow",
                           *BARE_SUITE, *ignoring(OLDER_TESTS + LINT_TESTS)),
            junit=True, pytest_args=settings.pytest_args, stream=True, skips_allowed=2,
            why="the bare suite without the tests marked slow"),
    ]


def plan(settings: Settings) -> list[Job]:
    python = f"{settings.bin}/python"
    make = (settings.make, "--no-print-directory")
    older = f"OLDER_K8S_VERSION={settings.older_version}"
    pytest = (python, "-m", "pytest", *settings.version_args)
    xdist = ("-n", settings.bare_workers, "--dist", "loadgroup")
    dist_dir = f"{settings.out}/dist"
    extra = settings.pytest_args
    return [
        Job("older-binaries", (*make, "binaries-older", older), niceness=19,
            why="the older minor's binaries (cold: a long build, wanted last; with idle I/O it waited on "
                "the kind layer's disk writes while the CPU idled: 32:36 for 9:00 of CPU, the run's end)"),
        Job("prepare", (*make, "binaries", "node-tools", "go-operators"),
            why="the default version's binaries, the simulated nodes' tools, the Go operators"),
        Job("dist", (python, "scripts/ci/check-dist", "--from-copy", "--outdir", dist_dir), niceness=5,
            why="the sdist and wheel, built and checked once for the packaging tests and the example"),
        Job("lint", (*make, "lint"), niceness=5, io_class=3, why="ruff and mypy on ktest's code"),
        Job("lint-tests", (*pytest, "-p", "no:xdist", *LINT_TESTS), after=("lint",), niceness=5, io_class=3,
            junit=True, pytest_args=extra,
            why="mypy --strict and pyright on user-style files, the strict docs build and its reference"),
        Job("bare", (*pytest, *xdist, *BARE_SUITE, *ignoring(OLDER_TESTS + LINT_TESTS)),
            after=("prepare",), junit=True, pytest_args=extra, stream=True, skips_allowed=2,
            env={"KTEST_DIST_DIR": dist_dir},
            why="everything but the kind layer and the older minor's tests (its packaging tests wait for "
                "the dist stage's files); 2 skips: examples/test_webapp.py's Deployment-status pair, one "
                "needs kind's real nodes, the other a plane without the deployment controller"),
        Job("older", (*pytest, "-p", "no:xdist", *OLDER_TESTS),
            after=("prepare", "older-binaries"), niceness=5, junit=True, pytest_args=extra,
            env={"KTEST_OLDER_K8S_VERSION": settings.older_version},
            why="the older minor's tests, beside the bare suite once their binaries are there"),
        Job("kind-image", (*make, "kind-image", older), after=("prepare",), niceness=5,
            why="the default version's kind node image (cold: a long build that starts the kind chain; "
                "at nice 10 and idle I/O it took 15:43 for 6:15 of CPU)"),
        Job("kind-own", (*pytest, "-p", "no:xdist", "tests/kind_machinery"), after=("kind-image",),
            niceness=5,
            junit=True, pytest_args=extra,
            why="the kind layer's own tests: they create, build and reuse clusters, one at a time"),
        Job("kind", (*make, "test-kind", older), after=("kind-own",), niceness=5, junit=True,
            pytest_args=extra, skips_allowed=4,  # the demo suite's tests for the bare backend alone
            why="the kind backend, the parity set and the demo suite on one shared cluster, beside the bare "
                "suite (its tests mostly wait on the cluster)"),
        Job("floors", (*make, "test-floors", older), after_any=("kind", "bare"), niceness=5, junit=True,
            pytest_args=extra, why="the dependency floors on the tests that exercise dependency behaviour, "
                                   "beside the bare suite or the kind layer, whichever is still running "
                                   "(cold: the floors after the kind layer ended the run, 2:16 late)"),
        Job("example", (*make, "test-example", older, f"KTEST_DIST_DIR={dist_dir}"),
            after=("dist",), after_any=("kind", "bare"), niceness=5, junit=True, pytest_args=extra,
            why="the example project as a user runs it, from the wheel built once, beside the bare suite "
                "or the kind layer, whichever is still running"),
    ]
