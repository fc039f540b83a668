"""Building node images: rebuild avoidance, distrust of wrong labels, and the errors users see."""

from __future__ import annotations

import io
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from processes import with_default_sigint

import ktest
from ktest.assets.gotool import find_go, go_install
from ktest.assets.progress import Progress
from ktest.backends.kind import engine, recipe
from ktest.backends.kind.cache import KindCache
from ktest.backends.kind.image_sources import resolve_version
from ktest.errors import KindError
from ktest_offline.node_image import build_node_image, find_node_image, list_node_images
from ktest_offline.node_image.build import build

pytestmark = pytest.mark.slow


def _quiet() -> Progress:
    return Progress(enabled=True, stream=io.StringIO())


def test_a_second_build_for_the_same_inputs_builds_nothing(
    default_image: str, default_version: str, docker_client: Any
) -> None:
    before = docker_client.images.get(default_image).id
    progress = _quiet()
    report = build(docker_client, default_version, force=False, progress=progress, cache=KindCache.from_env())
    assert report.reused, report
    assert report.steps == {}
    assert docker_client.images.get(default_image).id == before
    assert "is up to date" in progress.stream.getvalue()  # type: ignore[attr-defined]


def _build_containers(docker_client: Any) -> list[Any]:
    running = f"{recipe.LABEL_BUILD_CONTAINER}={recipe.BUILD_RUNNING}"
    return docker_client.containers.list(all=True, filters={"label": running})


def _interrupt_during_assembly(default_version: str, docker_client: Any) -> subprocess.CompletedProcess[str]:
    """Start `ktest kind build-image` and press Ctrl-C once its build container exists."""
    process = subprocess.Popen(
        [str(Path(sys.executable).with_name("ktest")), "kind", "build-image", "--k8s-version",
         default_version],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL,
        preexec_fn=with_default_sigint,
    )
    try:
        ktest.eventually(lambda: _build_containers(docker_client) or process.poll() is not None,
                         timeout=300, interval=0.2)
        assert process.poll() is None, "the build ended before its build container appeared"
        process.send_signal(signal.SIGINT)
        stdout, stderr = process.communicate(timeout=120)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    return subprocess.CompletedProcess(process.args, process.returncode, stdout, stderr)


@pytest.fixture
def image_restored_afterwards(default_image: str, default_version: str) -> Iterator[str]:
    """The default image, usable again after the test whatever happened in it (the test puts a
    hand-made image under its tag), so that one failure does not fail the tests after it."""
    yield default_image
    if find_node_image(default_version) is None:
        build_node_image(default_version, progress=False)


def test_an_image_with_the_right_tag_but_wrong_labels_is_rebuilt_even_after_an_interruption(
    image_restored_afterwards: str, default_version: str, docker_client: Any
) -> None:
    """A hand-made image under the tag is not trusted: found as unusable, then replaced by a build.

    The first rebuild is interrupted (Ctrl-C) while it assembles the node: it exits 130, leaves
    no build container, and the tag still names the old image; the next build completes.
    """
    default_image = image_restored_afterwards
    dockerfile = f"FROM {default_image}\nLABEL {recipe.LABEL_RECIPE_VERSION}=0-handmade\n"
    handmade, _ = docker_client.images.build(
        fileobj=io.BytesIO(dockerfile.encode()), tag=default_image, rm=True
    )
    assert find_node_image(default_version) is None
    unusable = {info.reference: info for info in list_node_images(include_unusable=True)}
    assert not unusable[default_image].usable
    assert default_image not in {info.reference for info in list_node_images()}

    interrupted = _interrupt_during_assembly(default_version, docker_client)
    assert interrupted.returncode == 130, interrupted.stderr
    assert "ktest: interrupted" in interrupted.stderr
    assert _build_containers(docker_client) == [], interrupted.stderr
    assert docker_client.images.get(default_image).id == handmade.id

    progress = _quiet()
    report = build(docker_client, default_version, force=False, progress=progress, cache=KindCache.from_env())

    assert not report.reused
    assert find_node_image(default_version) == default_image
    labels = docker_client.images.get(default_image).labels
    assert labels[recipe.LABEL_RECIPE_VERSION] == recipe.RECIPE_VERSION
    # Every cached part was reused: no Go build, no debootstrap ran again.
    log = progress.stream.getvalue()  # type: ignore[attr-defined]
    assert "building kubelet" not in log and "debootstrap" not in log.replace("Debian", "")


def test_unsupported_kubernetes_version_is_refused_naming_the_supported_ones() -> None:
    with pytest.raises(KindError) as caught:
        build_node_image("1.30", progress=False)
    message = str(caught.value)
    assert "Kubernetes 1.30 is not supported" in message
    assert all(minor in message for minor in recipe.MINORS)
    assert "--k8s-version" in message


def test_nonsense_version_is_refused_before_anything_runs() -> None:
    with pytest.raises(KindError, match=r"--k8s-version 'one\.two'"):
        resolve_version("one.two")


def test_no_engine_is_explained(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    socket = tmp_path / "no-docker.sock"
    monkeypatch.setenv("DOCKER_HOST", f"unix://{socket}")
    with pytest.raises(KindError) as caught:
        build_node_image(recipe.DEFAULT_MINOR, progress=False)
    message = str(caught.value)
    assert f"no Docker engine at unix://{socket}: there is no socket at {socket}" in message
    assert "scripts/docker-engine" in message and "DOCKER_HOST" in message


def test_a_refused_connection_is_explained(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DOCKER_HOST", "tcp://127.0.0.1:9")
    with pytest.raises(KindError, match=r"no Docker engine at tcp://127\.0\.0\.1:9: connecting to it failed"):
        engine.connect()


def test_a_failed_go_build_shows_the_log_tail_and_where_the_log_is(tmp_path: Path) -> None:
    go = find_go()
    assert go is not None, "this test needs `go` on PATH"
    destination = tmp_path / "kind"
    with pytest.raises(KindError) as caught:
        go_install(
            go, f"{recipe.KIND_MODULE}@v0.0.999", "kind", destination, _quiet(), "building kind v0.0.999"
        )
    message = str(caught.value)
    log = tmp_path / "kind.log"
    assert f"full log: {log}" in message
    assert "v0.0.999" in log.read_text()
    last_line = log.read_text().strip().splitlines()[-1]
    assert last_line.strip() in message
    assert not destination.exists()
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".tmp-")] == []


def test_missing_disk_space_is_reported_before_building(tmp_path: Path, docker_client: Any) -> None:
    """A cache on a 16 MiB file system cannot take a root filesystem: refused up front, naming it."""
    from ktest.assets.store import Locations
    from ktest_offline.node_image.build import check_disk

    mount = tmp_path / "small"
    mount.mkdir()
    mounted = os.system(f"mount -t tmpfs -o size=16m ktest-small {mount} 2>/dev/null") == 0
    assert mounted, "this test mounts a small tmpfs (needs root)"
    try:
        cache = KindCache(Locations(mount / "ktest", mount / "envtest", "amd64"))
        with pytest.raises(KindError) as caught:
            check_disk(cache, engine.engine_info(docker_client).docker_root, "1.37.2")
        message = str(caught.value)
        assert "not enough disk space" in message and str(mount) in message
        assert "GiB free" in message
    finally:
        os.system(f"umount {mount}")


def test_socket_permission_denied_is_explained() -> None:
    """A user outside the `docker` group: connect from a child process that dropped to uid nobody."""
    import docker  # noqa: F401 - loaded before the child gives up the rights to read the venv

    read_end, write_end = os.pipe()
    child = os.fork()
    if child == 0:  # pragma: no cover - runs in the child
        os.close(read_end)
        try:
            os.setgroups([])
            os.setresgid(65534, 65534, 65534)
            os.setresuid(65534, 65534, 65534)
            engine.connect({"DOCKER_HOST": f"unix://{engine.DEFAULT_SOCKET}", "HOME": "/tmp"})
            message = "connected"
        except BaseException as error:  # report whatever happened to the parent
            message = f"{type(error).__name__}: {error}"
        os.write(write_end, message.encode())
        os._exit(0)
    os.close(write_end)
    with os.fdopen(read_end) as pipe:
        message = pipe.read()
    os.waitpid(child, 0)
    assert message.startswith("KindError: permission denied on the Docker engine socket"), message
    assert "uid 65534" in message and "docker` group" in message


def test_cli_lists_images_and_refuses_bad_versions(
    default_image: str, default_version: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from ktest.cli.main import main

    assert main(["kind", "images"]) == 0
    listing = capsys.readouterr().out.splitlines()
    assert listing[0].split() == ["IMAGE", "KUBERNETES", "KIND", "RECIPE", "BUILT", "SIZE", "USABLE"]
    row = next(line for line in listing if line.startswith(default_image + " "))
    assert row.split()[1:4] == [default_version, recipe.KIND_VERSION, recipe.RECIPE_VERSION]
    assert row.endswith("yes")

    assert main(["kind", "build-image", "--k8s-version", default_version, "--quiet"]) == 0
    assert capsys.readouterr().out.strip() == default_image

    assert main(["kind", "build-image", "--k8s-version", "1.30"]) == 2
    assert "ktest: error: Kubernetes 1.30 is not supported" in capsys.readouterr().err
