"""Ctrl-C during the creation of something outside the process lands after the creation, so the
clean-up knows what to remove (``ktest.base.interrupts``). Each case runs in its own interpreter,
whose main thread receives the signal, as a user's ``ktest`` command would (a control without a
signal runs in this process)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
from cli_runs import pytest_command
from hardening_helpers import sandbox_env
from inner_runs import run_inner
from processes import with_default_sigint
from warm_planes import WarmPlane, shared_for_the_session

from ktest.assets.bundle import Assets
from ktest.controlplane import ControlPlane

SCRIPT = textwrap.dedent(
    """
    import contextlib, os, signal, sys
    from ktest.base.interrupts import interrupts_held

    mode = sys.argv[1]
    if mode == "own-handler":
        signal.signal(signal.SIGINT, lambda signum, frame: print("own handler ran"))
    made = None
    try:
        with interrupts_held() if mode != "unheld" else contextlib.nullcontext():
            os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C while the request is in flight
            for _ in range(10_000):  # Python runs signal handlers between bytecodes
                pass
            made = "container"
            print("created")
        print("after the block")
    except KeyboardInterrupt:
        print(f"interrupted; clean-up knows {made}")
    """
)


def _run(mode: str, script: str = SCRIPT) -> list[str]:
    result = subprocess.run(
        [sys.executable, "-c", script, mode], capture_output=True, text=True, timeout=60,
        stdin=subprocess.DEVNULL, check=False, preexec_fn=with_default_sigint,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout.splitlines()


def test_without_the_hold_ctrl_c_lands_before_the_handle_is_known() -> None:
    assert _run("unheld") == ["interrupted; clean-up knows None"]


def test_ctrl_c_inside_the_hold_is_raised_once_the_handle_is_known() -> None:
    assert _run("held") == ["created", "interrupted; clean-up knows container"]


def test_a_handler_of_the_programs_own_runs_after_the_block() -> None:
    assert _run("own-handler") == ["created", "own handler ran", "after the block"]


@pytest.mark.parametrize("handler", ["SIG_IGN", "SIG_DFL"])
def test_an_ignored_or_default_sigint_is_left_alone(handler: str) -> None:
    script = (
        "import signal\nfrom ktest.base.interrupts import interrupts_held\n"
        f"signal.signal(signal.SIGINT, signal.{handler})\n"
        "with interrupts_held():\n"
        f"    assert signal.getsignal(signal.SIGINT) is signal.{handler}\n"
        "print('left alone')\n"
    )
    assert _run(handler, script) == ["left alone"]


# -------------------------------------------------------------- Ctrl-C during a session's teardown

TEARDOWN_CONFTEST = textwrap.dedent(
    """
    import os, signal
    import pytest

    class Collected:
        def __del__(self):
            # Ctrl-C lands while a finalizer runs, as it does while pytest collects garbage at
            # the session's end: Python prints its KeyboardInterrupt as "Exception ignored"
            os.kill(os.getpid(), signal.SIGINT)
            for _ in range(100_000):  # the handler runs between bytecodes, here
                pass

    @pytest.fixture(scope="session", autouse=True)
    def ctrl_c_in_teardown():
        yield
        if os.environ["CTRL_C"] == "finalizer":
            Collected()  # dropped at once: its __del__ runs
    """
)

TEARDOWN_TEST = textwrap.dedent(
    """
    def test_uses_the_cluster(cluster):
        metadata = {"name": "c", "namespace": "default"}
        cluster.apply({"apiVersion": "v1", "kind": "ConfigMap", "metadata": metadata})
    """
)


@pytest.fixture(scope="session")
def folders_plane_for_reuse(
    plane: ControlPlane, tmp_path_factory: pytest.TempPathFactory, pytestconfig: pytest.Config
) -> Iterator[WarmPlane]:
    """This folder's plane (without controllers), recorded for reuse in a state directory of its own
    (tests/conftest.py's ``inner_warm_plane`` records the session's plane instead). As long-lived as
    the plane: closing the record's server stops the plane it serves. The record names the default
    controllers, which an inner session asks for; the test below needs none."""
    with shared_for_the_session(plane, tmp_path_factory, pytestconfig, "hardening-warm-state") as warm:
        yield warm


@pytest.fixture
def on_the_folders_plane(
    binary_cache: Path,
    folders_plane_for_reuse: WarmPlane,
    pytester: pytest.Pytester,
    monkeypatch: pytest.MonkeyPatch,
) -> WarmPlane:
    """This process's environment for an inner session attached to ``folders_plane_for_reuse`` (what
    tests/conftest.py's ``inner_env`` sets)."""
    for name in list(os.environ):
        if name.startswith("KTEST_") and name not in ("KTEST_CACHE_DIR", "KTEST_ASSETS"):
            monkeypatch.delenv(name)  # the outer run's settings must not leak in
    monkeypatch.setenv("KTEST_CACHE_DIR", os.environ.get("KTEST_CACHE_DIR") or str(binary_cache))
    monkeypatch.setenv("PYTEST_ADDOPTS", "-p no:cacheprovider -W ignore::DeprecationWarning")
    for name, value in folders_plane_for_reuse.env.items():
        monkeypatch.setenv(name, value)
    return folders_plane_for_reuse


def test_a_sessions_teardown_without_ctrl_c_passes(
    pytester: pytest.Pytester, on_the_folders_plane: WarmPlane, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The control of the test below: the same project, no Ctrl-C, exit status 0. Only the session's
    outcome is checked (no signal, no plane of its own), so it runs in this process, attached to the
    folder's plane. A clean session's own plane stopping: test_environment_proxy.py's child."""
    monkeypatch.setenv("CTRL_C", "none")
    pytester.makeconftest(TEARDOWN_CONFTEST)
    result = run_inner(pytester, TEARDOWN_TEST)
    output = "\n".join(result.outlines + result.errlines)
    assert on_the_folders_plane.attached_header in output, output[-3000:]  # no plane of its own
    assert result.ret == 0, output[-3000:]
    assert "1 passed" in output, output[-3000:]
    assert "KeyboardInterrupt" not in output, output[-3000:]


def test_ctrl_c_during_the_sessions_teardown_is_not_a_pass(tmp_path: Path, assets: Assets) -> None:
    """Was: exit status 0 (a run the user stopped looked passed); the control plane still stops.
    A fresh interpreter with a plane of its own: the signal goes to its main thread, and the plane's
    stop after it is checked."""
    env = {**sandbox_env(tmp_path, assets.directory), "CTRL_C": "finalizer"}
    project = tmp_path / "project"
    project.mkdir()
    (project / "conftest.py").write_text(TEARDOWN_CONFTEST)
    (project / "test_teardown.py").write_text(TEARDOWN_TEST)
    (project / "pytest.ini").write_text("[pytest]\n")
    run = subprocess.run(
        pytest_command("-p", "no:randomly"),
        cwd=project, env=env, capture_output=True, text=True, timeout=300,
        stdin=subprocess.DEVNULL, check=False, preexec_fn=with_default_sigint,
    )
    output = run.stdout + run.stderr
    assert "1 passed" in output, output[-3000:]
    assert run.returncode == 2, output[-3000:]
    assert "KeyboardInterrupt" in output, output[-3000:]
    assert not list((tmp_path / "run").glob("ktest-cp-*")), "the control plane was left running"
