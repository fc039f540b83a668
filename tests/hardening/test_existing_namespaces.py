"""``kill -9`` of a session on backend ``existing`` leaves no test namespace in the user's
cluster for good: every namespace ktest creates names its holder (pid, start time,
boot and pid namespace); the next session on that cluster, and ``ktest down --backend
existing``, delete those whose holder ran on this machine and is dead, and leave every other
alone: a live session's, another machine's, a kept one, one ktest did not create, and one
labelled and annotated by hand as ktest's (its holder not signed with this user's key, issue 50.5).

The "existing cluster" is a real ktest control plane with the namespace controller, so a
deleted namespace really goes; the sessions are real child processes, really killed."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from hardening_helpers import run_ktest, sandbox_env

from ktest.assets.bundle import Assets
from ktest.base.user_secret import secret_path
from ktest.cluster import Cluster
from ktest.cluster.namespaces import HOLDER_ANNOTATION, MANAGED_BY_LABEL, NamespaceHolder
from ktest.controlplane import ControlPlane
from ktest.wait import eventually

CHILD = Path(__file__).parent / "child_session.py"


pytestmark = pytest.mark.xdist_group("existing-namespaces-plane")  # one worker starts cluster_plane


@pytest.fixture(scope="module")
def cluster_plane(assets: Assets) -> Iterator[ControlPlane]:
    """The user's "existing cluster": a control plane whose namespace controller empties and
    removes deleted namespaces, as a real cluster's does."""
    with ControlPlane(assets=assets, controllers="namespace") as control_plane:
        yield control_plane


@pytest.fixture
def admin(cluster_plane: ControlPlane) -> Iterator[Cluster]:
    with Cluster(cluster_plane.kubeconfig) as cluster:
        yield cluster


@pytest.fixture
def existing_env(tmp_path: Path, assets: Assets, cluster_plane: ControlPlane) -> dict[str, str]:
    context = yaml.safe_load(cluster_plane.kubeconfig.read_text())["current-context"]
    return {
        **sandbox_env(tmp_path, assets.directory),
        "KTEST_BACKEND": "existing",
        "KTEST_KUBECONFIG": str(cluster_plane.kubeconfig),
        "KTEST_CONTEXT": context,
    }


def _holding_session(env: dict[str, str]) -> tuple[subprocess.Popen[str], str]:
    """A child session holding a test namespace; the namespace's name."""
    child = subprocess.Popen(
        [sys.executable, str(CHILD), "namespace"],
        env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    assert child.stdout is not None
    line = child.stdout.readline()
    if not line.startswith("ready "):
        child.kill()
        raise AssertionError(f"child failed: {line}{child.communicate()[1][-3000:]}")
    return child, line.split()[1]


def _state(admin: Cluster, name: str) -> str:
    namespace = admin.get_or_none(("v1", "Namespace", name))
    if namespace is None:
        return "gone"
    return "terminating" if namespace["metadata"].get("deletionTimestamp") else "active"


def _planted(admin: Cluster, name: str, holder: dict[str, object] | None, *, label: bool = True) -> str:
    metadata: dict[str, object] = {"name": name}
    if label:
        metadata["labels"] = {MANAGED_BY_LABEL: "ktest"}
    if holder is not None:
        metadata["annotations"] = {HOLDER_ANNOTATION: json.dumps(holder)}
    admin.create({"apiVersion": "v1", "kind": "Namespace", "metadata": metadata})
    return name


@pytest.mark.parametrize("sweeper", ["next session", "ktest down --backend existing"])
def test_a_killed_sessions_namespace_is_deleted_and_others_are_left_alone(
    admin: Cluster, existing_env: dict[str, str], sweeper: str
) -> None:
    victim, victims_namespace = _holding_session(existing_env)
    survivor, survivors_namespace = _holding_session(existing_env)
    planted: list[str] = []
    try:
        victims = admin.get(("v1", "Namespace", victims_namespace))
        holder = NamespaceHolder.of(victims)
        signature = json.loads(victims["metadata"]["annotations"][HOLDER_ANNOTATION]).get("mac", "")
        assert holder is not None and holder.pid == victim.pid and holder.on_this_machine(), holder
        victim.kill()
        victim.wait()
        assert _state(admin, victims_namespace) == "active", "kill -9 deletes nothing itself"
        dead = {"pid": holder.pid, "start": holder.start, "host": "elsewhere"}
        elsewhere = _planted(admin, f"other-machine-{victim.pid}", {**dead, "where": "another-boot/pid:[1]"})
        kept = _planted(admin, f"kept-{victim.pid}", None)
        not_ours = _planted(admin, f"not-ktest-{victim.pid}", {**dead, "where": holder.where}, label=False)
        # Issue 50.5's attack: label and annotation set by hand, as anyone who may patch
        # namespaces can: the killed session's holder without its signature, and with the
        # signature copied from the killed session's own namespace.
        forged = _planted(admin, f"prod-data-{victim.pid}", {**dead, "where": holder.where})
        copied = _planted(admin, f"prod-copy-{victim.pid}", {**dead, "where": holder.where, "mac": signature})
        planted += [elsewhere, kept, not_ours, forged, copied]

        if sweeper == "next session":
            session = subprocess.run(
                [sys.executable, str(CHILD), "session", "exit"],
                env=existing_env, input="\n", capture_output=True, text=True, timeout=120, check=False,
            )
            assert session.returncode == 0 and "ready" in session.stdout, session.stderr[-3000:]
        else:
            down = run_ktest(
                existing_env, "down", "--backend", "existing",
                "--kubeconfig", existing_env["KTEST_KUBECONFIG"], "--context", existing_env["KTEST_CONTEXT"],
            )
            assert down.returncode == 0, down.stderr
            said = down.stderr
            assert f"left by killed ktest sessions of this machine: {victims_namespace}" in said
            assert "left alone, held by ktest sessions of other machines" in said and elsewhere in said
            assert survivors_namespace not in said and kept not in said and not_ours not in said
            assert f"not signed with this user's key ({secret_path()})" in said
            assert f"{forged}, {copied}" in said or f"{copied}, {forged}" in said, said

        eventually(
            lambda: _state(admin, victims_namespace) == "gone",
            timeout=60,
            description="the killed session's namespace to be deleted (the namespace controller empties it)",
        )
        assert _state(admin, survivors_namespace) == "active", "a live session's namespace was touched"
        assert {name: _state(admin, name) for name in planted} == dict.fromkeys(planted, "active")
    finally:
        for child in (victim, survivor):
            child.kill()
            child.wait()
        for name in planted:
            admin.delete(("v1", "Namespace", name), missing_ok=True)
    # The survivor, killed too, is swept by the next look (here: the library call itself).
    from ktest.cluster.namespaces import sweep_dead_namespaces

    assert sweep_dead_namespaces(admin).deleted == [survivors_namespace]


def test_a_kept_namespace_loses_its_holder(admin: Cluster) -> None:
    """A namespace kept on purpose (``keep=True``, ``ktest_keep_namespaces``) is no sweep's to delete."""
    with admin.namespace(prefix="kept", keep=True) as name:
        assert NamespaceHolder.of(admin.get(("v1", "Namespace", name))) is not None
    try:
        assert NamespaceHolder.of(admin.get(("v1", "Namespace", name))) is None
    finally:
        admin.delete(("v1", "Namespace", name), missing_ok=True)


def test_keeping_a_namespace_the_test_deleted_is_no_error(admin: Cluster) -> None:
    with admin.namespace(prefix="gone", keep=True) as name:
        admin.delete(("v1", "Namespace", name), wait=True)
    assert admin.get_or_none(("v1", "Namespace", name)) is None


def test_ktest_down_for_existing_needs_the_context_named(existing_env: dict[str, str]) -> None:
    env = {key: value for key, value in existing_env.items() if key != "KTEST_CONTEXT"}
    down = run_ktest(env, "down", "--backend", "existing", "--kubeconfig", env["KTEST_KUBECONFIG"])
    assert down.returncode != 0
    assert "ktest down --backend existing needs the kubeconfig context named explicitly" in down.stderr
