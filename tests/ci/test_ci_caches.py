"""What a restored cache holds is checked before use: scripts/ci/binary_cache.py (ktest's binaries)
and scripts/ci/node_image.py (the kind node image archive, real Docker)."""

from __future__ import annotations

import os
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from ci_helpers import read_outputs, run_ci_script

from ktest.assets import Assets


def copy_entry(source: Path, destination: Path) -> None:
    """Hard links: a 300 MB entry in milliseconds; files are only ever replaced, never written to."""
    destination.mkdir(parents=True)
    for item in source.iterdir():
        os.link(item, destination / item.name)


def check_cache(
    cache: Path, version: str, *extra: str
) -> tuple[subprocess.CompletedProcess[str], dict[str, str]]:
    output = cache.parent / "out"
    output.unlink(missing_ok=True)
    done = run_ci_script(
        "binary_cache.py", "--k8s-version", version, "--matched-key", "k-old", *extra,
        cwd=cache.parent,
        env={"KTEST_CACHE_DIR": str(cache), "GITHUB_OUTPUT": str(output)},
        timeout=300,
    )
    return done, (read_outputs(output) if output.exists() else {})


def test_a_restored_cache_of_another_patch_is_not_used(tmp_path: Path, k8s_assets: Assets) -> None:
    cache = tmp_path / "cache"
    other = cache / "k8s" / "1.0.1-linux-amd64"
    other.mkdir(parents=True)
    (other / "kube-apiserver").write_text("old")
    done, outputs = check_cache(cache, k8s_assets.version)
    assert done.returncode == 0, done.stderr
    assert outputs == {"usable": "false"}
    assert (
        f"holds 1.0.1-linux-amd64, not Kubernetes {k8s_assets.version}: not used, left alone" in done.stderr
    )
    assert other.exists()  # without --prune-other-versions (a developer's machine) nothing is removed


def test_pruning_removes_other_versions_but_never_locks_or_installs_in_progress(
    tmp_path: Path, k8s_assets: Assets
) -> None:
    """An install in progress (its temporary directory and lock) must survive: on a shared cache
    another process is filling it."""
    k8s = tmp_path / "cache" / "k8s"
    other = k8s / "1.0.1-linux-amd64"
    in_progress = k8s / ".tmp-1.0.2-linux-amd64-abc123"
    locks = k8s / ".locks"
    for directory in (other, in_progress, locks):
        directory.mkdir(parents=True)
    (locks / "1.0.2-linux-amd64.lock").write_text("")
    done, outputs = check_cache(k8s.parent, k8s_assets.version, "--prune-other-versions")
    assert done.returncode == 0, done.stderr
    assert outputs == {"usable": "false"}
    assert "holds 1.0.1-linux-amd64" in done.stderr and "not used, removed" in done.stderr
    assert not other.exists()
    assert in_progress.is_dir() and (locks / "1.0.2-linux-amd64.lock").is_file()
    assert ".tmp-" not in done.stderr and ".locks" not in done.stderr


def test_the_wanted_entry_is_verified_and_a_damaged_one_is_not_usable(
    tmp_path: Path, k8s_assets: Assets
) -> None:
    cache = tmp_path / "cache"
    entry = cache / "k8s" / k8s_assets.directory.name
    copy_entry(k8s_assets.directory, entry)
    done, outputs = check_cache(cache, k8s_assets.version)
    assert done.returncode == 0, done.stderr
    assert outputs == {"usable": "true"}
    (entry / "kubectl").unlink()  # a new file, the shared cache's kubectl is untouched
    (entry / "kubectl").write_bytes(b"#!/bin/sh\necho tampered\n")
    (entry / "kubectl").chmod(0o755)
    done, outputs = check_cache(cache, k8s_assets.version)
    assert outputs == {"usable": "false"}
    assert "failed verification; installing again" in done.stderr and "kubectl" in done.stderr


def docker_available() -> bool:
    try:
        return (
            subprocess.run(["docker", "info"], capture_output=True, timeout=60, check=False).returncode == 0
        )
    except (OSError, subprocess.TimeoutExpired):
        return False


@pytest.fixture
def tiny_images(tmp_path: Path) -> Iterator[tuple[str, str]]:
    """Two one-file images built locally (no registry), removed afterwards."""
    if not docker_available():
        pytest.fail("no Docker engine: run `make docker-engine` (scripts/docker-engine)")
    tag = uuid.uuid4().hex[:8]
    images = (f"ktest-ci-test/node:v0.0.{tag}", f"ktest-ci-test/other:v0.0.{tag}")
    for image in images:
        context = tmp_path / image.replace("/", "_").replace(":", "_")
        context.mkdir()
        (context / "marker").write_text(image)
        (context / "Dockerfile").write_text("FROM scratch\nCOPY marker /marker\n")
        subprocess.run(
            ["docker", "build", "--quiet", "--tag", image, str(context)],
            check=True,
            capture_output=True,
            timeout=300,
        )
    try:
        yield images
    finally:
        subprocess.run(["docker", "image", "rm", "--force", *images], capture_output=True, check=False)


def node_image(
    action: str, image: str, archive: Path
) -> tuple[subprocess.CompletedProcess[str], dict[str, str]]:
    output = archive.parent.parent / f"out-{uuid.uuid4().hex}"
    done = run_ci_script(
        "node_image.py", action, "--image", image, "--archive", str(archive),
        cwd=archive.parent.parent,
        env={"GITHUB_OUTPUT": str(output)},
        timeout=600,
    )
    return done, (read_outputs(output) if output.exists() else {})


def test_node_image_save_then_load_from_the_archive(tmp_path: Path, tiny_images: tuple[str, str]) -> None:
    image, _ = tiny_images
    archive = tmp_path / "ci-cache" / "node-image.tar"
    done, _ = node_image("save", image, archive)
    assert done.returncode == 0, done.stderr
    assert archive.is_file() and not archive.with_name("node-image.tar.partial").exists()
    done, outputs = node_image("load", image, archive)
    assert outputs == {"source": "present"}  # already there: nothing loaded
    subprocess.run(["docker", "image", "rm", image], check=True, capture_output=True)
    done, outputs = node_image("load", image, archive)
    assert done.returncode == 0, done.stderr
    assert outputs == {"source": "archive"}
    assert subprocess.run(["docker", "image", "inspect", image], capture_output=True).returncode == 0


def test_an_archive_of_another_image_is_not_trusted(tmp_path: Path, tiny_images: tuple[str, str]) -> None:
    image, other = tiny_images
    archive = tmp_path / "node-image.tar"
    assert node_image("save", other, archive)[0].returncode == 0
    subprocess.run(["docker", "image", "rm", image], check=True, capture_output=True)
    done, _ = node_image("load", image, archive)
    # The archive held `other`: removed, then a pull is tried (this image exists in no registry).
    assert f"did not give {image}" in done.stderr
    assert not archive.exists()
    assert done.returncode == 2
    assert f"could not pull the kind node image {image}" in done.stderr
    assert "ktest kind build-image --k8s-version 0.0." in done.stderr
