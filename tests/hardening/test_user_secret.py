"""The key ktest signs its namespaces' holders with (issue 50.5): private to the user, made
once even by processes starting together, and refused (with the fix) when others could have
read or made it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ktest.base import user_secret
from ktest.cluster import Cluster
from ktest.controlplane import ControlPlane

needs_root = pytest.mark.skipif(os.getuid() != 0, reason="needs root to make another user's file")


def test_the_key_is_private_and_signs_for_one_text(tmp_path: Path) -> None:
    path = tmp_path / "cache" / "ktest" / user_secret.KEY_FILE
    mac = user_secret.sign("namespace-a", path)
    assert (path.stat().st_mode & 0o777, path.parent.stat().st_mode & 0o777) == (0o600, 0o700)
    assert user_secret.signed("namespace-a", mac, path)
    assert not user_secret.signed("namespace-b", mac, path)
    assert not user_secret.signed("namespace-a", "", path)


def test_processes_starting_together_agree_on_one_key(tmp_path: Path) -> None:
    code = "from ktest.base import user_secret; print(user_secret.user_secret().hex())"
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path)}
    children = [
        subprocess.Popen([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE, text=True)
        for _ in range(6)
    ]
    keys = {child.communicate(timeout=60)[0].strip() for child in children}
    assert len(keys) == 1 and keys != {""}, keys
    assert list((tmp_path / "ktest").iterdir()) == [tmp_path / "ktest" / user_secret.KEY_FILE]


def test_a_key_others_may_read_is_refused_with_the_fix(tmp_path: Path) -> None:
    path = tmp_path / user_secret.KEY_FILE
    path.write_bytes(os.urandom(32))
    path.chmod(0o644)
    with pytest.raises(user_secret.SecretUnusable) as caught:
        user_secret.user_secret(path)
    message = str(caught.value)
    assert f"ktest's key {path} is not a private file" in message and "mode 0644" in message
    assert "Remove it" in message


@needs_root
def test_a_key_another_user_made_is_refused(tmp_path: Path) -> None:
    path = tmp_path / user_secret.KEY_FILE
    path.write_bytes(os.urandom(32))
    path.chmod(0o600)
    os.chown(path, 65534, 65534)
    with pytest.raises(user_secret.SecretUnusable, match="owner uid 65534"):
        user_secret.user_secret(path)


def test_without_a_usable_key_namespaces_are_still_made_and_the_sweep_deletes_nothing(
    plane: ControlPlane, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A home that cannot hold the key (here: one others may read) must not stop the tests."""
    admin = Cluster(plane.kubeconfig)
    from ktest.cluster.namespaces import HOLDER_ANNOTATION, create_namespace, sweep_dead_namespaces

    key = tmp_path / "ktest" / user_secret.KEY_FILE
    key.parent.mkdir()
    key.write_bytes(os.urandom(32))
    key.chmod(0o644)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    name = create_namespace(admin, f"unsigned-{os.getpid()}")
    try:
        annotations = admin.get(("v1", "Namespace", name))["metadata"]["annotations"]
        holder = json.loads(annotations[HOLDER_ANNOTATION])
        assert "mac" not in holder and holder["pid"] == os.getpid()
        sweep = sweep_dead_namespaces(admin)
        assert sweep.deleted == [] and (sweep.error == "" or str(key) in sweep.error), sweep
    finally:
        admin.delete(("v1", "Namespace", name), missing_ok=True)
        admin.close()
