"""A crashing Go operator's goroutine dump, folded in the failure report to the goroutine that
panicked, with the whole log under the artifacts directory: a real Go program panics with
``GOTRACEBACK=all`` in an inner pytest session, whose report is read."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from ktest.operators import build_go_binary

WAITERS = 5
CRASHER_GO = """package main

import (
	"fmt"
	"os"
	"time"
)

func wait(ch chan int) { <-ch }

func main() {
	ch := make(chan int)
	for i := 0; i < WAITERS; i++ {
		go wait(ch)
	}
	fmt.Println("ready")
	for {
		if _, err := os.Stat(os.Args[1]); err == nil {
			panic("reconciler exploded")
		}
		time.Sleep(10 * time.Millisecond)
	}
}
""".replace("WAITERS", str(WAITERS))

INNER = """
from ktest.operators import run_subprocess
from ktest.wait import eventually


def test_the_operator_crashes(cluster, namespace, tmp_path):
    trigger = tmp_path / "crash-now"
    with run_subprocess([{binary!r}, str(trigger)], cluster, name="crasher", ready_log="ready",
                        env={{"GOTRACEBACK": "all"}}):
        trigger.touch()  # the operator panics; the next wait fails with its error
        eventually(lambda: cluster.get(("v1", "ConfigMap", "never", namespace)), timeout=60)
"""
HEADER = re.compile(r"goroutine \d+ \[")


@pytest.fixture
def crasher(tmp_path: Path) -> Path:
    source = tmp_path / "crasher"
    source.mkdir()
    (source / "go.mod").write_text("module example.com/crasher\n\ngo 1.22\n")
    (source / "main.go").write_text(CRASHER_GO)
    return build_go_binary(source, cache_dir=tmp_path / "operators", progress=False)


@pytest.mark.skipif(shutil.which("go") is None, reason="needs the go command")
def test_a_go_panic_is_folded_to_its_first_goroutine_and_kept_whole_in_the_artifacts(
    pytester: pytest.Pytester, inner_env: dict[str, str], crasher: Path
) -> None:
    pytester.makepyfile(test_inner=INNER.format(binary=str(crasher)))

    result = pytester.runpytest_inprocess("-p", "no:randomly")  # the operator is the subprocess

    result.assert_outcomes(failed=1)
    output = result.stdout.str()
    assert "panic: reconciler exploded" in output
    assert "[chan receive]" not in output, "the waiting goroutines should be folded"
    folded = re.findall(r"\.\.\. (\d+) more goroutines folded(.*)", output)
    assert folded and {int(count) for count, _ in folded} == {WAITERS}, folded
    section = re.search(r"the whole log: (\S+\.log)", output)
    assert section is not None, output[-4000:]
    whole = Path(section.group(1))
    assert whole.is_relative_to(pytester.path / ".ktest-artifacts" / "operator-logs")
    assert len(HEADER.findall(whole.read_text())) == WAITERS + 1
    assert whole.stat().st_mode & 0o777 == 0o600 and whole.parent.stat().st_mode & 0o777 == 0o700
    # The failure message and the report's log section each show only the goroutine that panicked.
    assert HEADER.findall(output) == ["goroutine 1 ["] * len(folded)
    assert "goroutine 1 [running]" in output
