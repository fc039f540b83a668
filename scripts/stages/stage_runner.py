"""Runs a plan of jobs (scripts/stages/stage_plan.py) as `make test` does, then prints the stage table.

A job starts once every job it comes after has passed (and, if it names some ``after_any``, the
first of those), at its own CPU niceness and I/O class, in
its own process group, its output in ``<out>/<name>.log`` (the one job marked ``stream`` prints
live instead). The first failure stops every running job (the whole process group, Ctrl-C first) and fails
the run with that job's log; so does a pytest stage that skips more tests than its allowance. The run
ends with the table: each job's wall time and CPU time (its process and every descendant it waited
for: control planes, child sessions, builds; not the kind nodes' containers, which the Docker engine
runs), outcome counts and skips against the allowance, and the slowest tests of each pytest stage
(from the JUnit XML each writes). The CPU column is what a suite's weight is measured in: on 2 cores
a run is bound by its total CPU work.

Standard library only: it runs before the virtual environment is checked.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from stage_plan import Job
from stage_table import StageResult, read_junit, render_table

INTERRUPT_GRACE = 60.0  # a pytest session's teardowns after Ctrl-C: stopping its planes and daemons
TERMINATE_GRACE = 15.0


@dataclass
class Running:
    job: Job
    process: subprocess.Popen[bytes]
    started: float
    log: Path


@dataclass
class Run:
    jobs: list[Job]
    out: Path
    env: dict[str, str]
    origin: float = field(default_factory=time.monotonic)
    running: dict[str, Running] = field(default_factory=dict)
    results: dict[str, StageResult] = field(default_factory=dict)

    def ready(self) -> list[Job]:
        return [
            job
            for job in self.jobs
            if job.name not in self.results
            and job.name not in self.running
            and all(self.passed(name) for name in job.after)
            and (not job.after_any or any(self.passed(name) for name in job.after_any))
        ]

    def passed(self, name: str) -> bool:
        result = self.results.get(name)
        return result is not None and result.passed

    def start(self, job: Job) -> None:
        log = self.out / f"{job.name}.log"
        argv = job.command(str(self.out))
        announce(f"{job.name} starts (nice {job.niceness}): {' '.join(job.argv)}")
        sink = None if job.stream else log.open("wb")
        process = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=sink,
            stderr=subprocess.STDOUT if sink else None,
            env={**self.env, **job.env},
            start_new_session=True,
            preexec_fn=lambda: prepare_child(job.niceness, job.io_class),
        )
        if sink:
            sink.close()
        self.running[job.name] = Running(job, process, time.monotonic(), log)

    def reap(self) -> StageResult | None:
        """The result of a job that has ended (None if none has); a failed one is returned too."""
        for name, running in list(self.running.items()):
            ended = reap_with_cpu(running.process)
            if ended is None:
                continue
            status, cpu = ended
            del self.running[name]
            result = StageResult(
                name=name,
                status=status,
                started=running.started - self.origin,
                wall=time.monotonic() - running.started,
                cpu=cpu,
                skips_allowed=running.job.skips_allowed,
                tests=read_junit(self.out / f"{name}.xml") if running.job.junit else None,
            )
            self.results[name] = result
            if not running.job.stream:
                sys.stdout.write(running.log.read_text(errors="replace"))
            announce(f"{name} {result.verdict()} after {result.wall:.0f} s")
            return result
        return None

    def stop_all(self) -> None:
        """Stop the running jobs as Ctrl-C would: SIGINT to each job's process group, so that pytest
        runs its teardowns (control planes, ``ktest up`` daemons a test started); SIGTERM to what is
        still there after ``INTERRUPT_GRACE`` seconds, SIGKILL after ``TERMINATE_GRACE`` more."""
        for name, running in self.running.items():
            if running.process.poll() is None:
                announce(f"stopping {name} (pid {running.process.pid}; log: {running.log})")
        for sent, grace in ((signal.SIGINT, INTERRUPT_GRACE), (signal.SIGTERM, TERMINATE_GRACE),
                            (signal.SIGKILL, None)):
            alive = [running for running in self.running.values() if running.process.poll() is None]
            for running in alive:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(running.process.pid, sent)
            deadline = time.monotonic() + (grace or 30)
            for running in alive:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    running.process.wait(timeout=max(0.1, deadline - time.monotonic()))
        self.running.clear()


def reap_with_cpu(process: subprocess.Popen[bytes]) -> tuple[int, float] | None:
    """(exit status, CPU seconds of the process and its waited-for descendants) once it ended, else
    None. Popen cannot tell the CPU, so the runner reaps the job itself (and tells Popen)."""
    pid, wait_status, usage = os.wait4(process.pid, os.WNOHANG)
    if pid == 0:
        return None
    process.returncode = os.waitstatus_to_exitcode(wait_status)
    return process.returncode, usage.ru_utime + usage.ru_stime


AUTOGROUP = Path("/proc/self/autogroup")


def prepare_child(niceness: int, io_class: int) -> None:
    """In the child before exec: Ctrl-C's default, so that a stopped job's pytest gets its
    KeyboardInterrupt (a shell without job control starts a background command, e.g. a CI step's
    ``make test &``, with SIGINT ignored, and Python then leaves it ignored); then its priority."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    lower_priority(niceness, io_class)


def lower_priority(niceness: int, io_class: int) -> None:
    """Its CPU niceness and (via ionice) I/O class.

    Each job runs in a session of its own, and where the kernel groups sessions for scheduling
    (``kernel.sched_autogroup_enabled``) a process's niceness only weighs against its own session:
    the session's group gets the niceness too. (Without it, a cold run's older-minor Go build at
    nice 19 finished before the default version's at nice 0: 9:51 against 11:58.)"""
    if niceness:
        os.nice(niceness)
        # An older kernel or a restricted /proc: the process's own niceness still holds.
        with contextlib.suppress(OSError):
            AUTOGROUP.write_text(str(niceness))
    if io_class != 2:
        subprocess.run(["ionice", "-c", str(io_class), "-p", str(os.getpid())], check=False)


def announce(text: str) -> None:
    print(f"\n=== make test: {text} ({time.strftime('%H:%M:%S')})", flush=True)


def run(jobs: list[Job], out: Path, env: dict[str, str]) -> int:
    """Runs the plan; 0 when every job passed within its skip allowance."""
    out.mkdir(parents=True, exist_ok=True)
    for stale in (*out.glob("*.xml"), *out.glob("*.log")):
        stale.unlink()
    state = Run(jobs, out, env)
    failed: StageResult | None = None
    try:
        while len(state.results) < len(jobs):
            for job in state.ready():
                state.start(job)
            result = state.reap()
            if result is not None and not result.passed:
                failed = result
                break
            if result is None:
                if not state.running:
                    break  # what is left waits on a job that failed: cannot happen without `failed`
                time.sleep(0.5)
    finally:
        state.stop_all()
    table = render_table([state.results[job.name] for job in jobs if job.name in state.results])
    (out / "table.md").write_text(table)
    print("\n" + table, flush=True)
    if failed is not None:
        print(f"make test: {failed.name} {failed.verdict()}; its log: {out / (failed.name + '.log')}",
              file=sys.stderr)
        return failed.status or 1
    return 0
