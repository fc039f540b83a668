"""A corrupt cached binary is detected before use, reported with the fix,
and `ktest binaries install` repairs it. Checksums are recorded at install."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from assets_helpers import K8S_VERSION, write_fake_binaries  # type: ignore[import-not-found]

from ktest.assets import resolve_assets, store
from ktest.assets.progress import Progress
from ktest.errors import AssetsError


@pytest.fixture
def served(isolated: Path, release_server, monkeypatch: pytest.MonkeyPatch):
    for key, value in release_server.env().items():
        monkeypatch.setenv(key, value)
    return release_server


@pytest.fixture
def entry_dir(served) -> Path:
    """Kubernetes 1.37.2 installed into the isolated cache from the local release server."""
    return resolve_assets(K8S_VERSION, source="download", progress=False).directory


def _metadata(directory: Path) -> dict:
    return json.loads((directory / store.METADATA_FILE).read_text())


def _flip_a_byte(path: Path, *, keep_mtime: bool = False) -> None:
    stat = path.stat()
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x01
    path.write_bytes(bytes(data))
    if keep_mtime:
        os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))


def test_install_records_size_mtime_and_sha256(entry_dir: Path) -> None:
    files = _metadata(entry_dir)["files"]
    assert sorted(files) == ["etcd", "kube-apiserver", "kube-controller-manager", "kubectl"]
    for name, record in files.items():
        path = entry_dir / name
        assert record == {
            "size": path.stat().st_size,
            "mtime_ns": path.stat().st_mtime_ns,
            "sha256": store.sha256_of(path),
        }


def test_intact_entry_passes(entry_dir: Path) -> None:
    entry = store.read_cache_entry(store.Locations.from_env(), K8S_VERSION)
    assert entry is not None
    assert store.verify_entry(entry) == [] and store.verify_entry(entry, full=True) == []
    assert resolve_assets(K8S_VERSION, progress=False).directory == entry_dir


def test_a_flipped_byte_is_reported_with_the_repair_command(entry_dir: Path) -> None:
    _flip_a_byte(entry_dir / "etcd")
    with pytest.raises(AssetsError) as caught:
        resolve_assets(K8S_VERSION, progress=False)
    message = str(caught.value)
    assert f"{entry_dir / 'etcd'}: SHA-256" in message
    assert "corrupt" in message and "kube-apiserver" not in message.split("Repair")[0]
    assert f"ktest binaries install --k8s-version {K8S_VERSION}" in message


def test_a_truncated_binary_is_caught_by_its_size(entry_dir: Path) -> None:
    path = entry_dir / "kube-apiserver"
    size = path.stat().st_size
    with path.open("r+b") as file:
        file.truncate(size - 3)
    with pytest.raises(AssetsError, match=rf"kube-apiserver: size {size - 3} bytes, {size} when installed"):
        resolve_assets(K8S_VERSION, progress=False)


def test_same_size_and_mtime_pass_the_fast_path_but_not_verify(entry_dir: Path, run_cli) -> None:
    _flip_a_byte(entry_dir / "kubectl", keep_mtime=True)
    assert resolve_assets(K8S_VERSION, progress=False).directory == entry_dir  # stat only
    result = run_cli("binaries", "verify")
    assert result.returncode == 1, result.stdout + result.stderr
    assert f"CORRUPT {K8S_VERSION}" in result.stdout and "kubectl: SHA-256" in result.stdout
    assert "etcd:" not in result.stdout


def test_verify_says_ok_for_an_intact_cache(entry_dir: Path, run_cli) -> None:
    result = run_cli("binaries", "verify")
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout == f"ok      {K8S_VERSION}: {entry_dir}\n"


def test_install_repairs_a_corrupt_entry(entry_dir: Path, served, run_cli) -> None:
    original = store.sha256_of(entry_dir / "etcd")
    _flip_a_byte(entry_dir / "etcd")
    result = run_cli("binaries", "install", "--k8s-version", K8S_VERSION, "--source", "download")
    assert result.returncode == 0, result.stderr
    assert "repairing" in result.stderr and "etcd" in result.stderr
    assert store.sha256_of(entry_dir / "etcd") == original
    assert run_cli("binaries", "verify").returncode == 0
    assert not list(entry_dir.parent.glob(".tmp-*")), "the repair left a scratch directory"


def test_failed_repair_keeps_saying_what_is_corrupt(entry_dir: Path, run_cli, closed_port: int) -> None:
    _flip_a_byte(entry_dir / "etcd")
    dead = f"http://127.0.0.1:{closed_port}"
    result = run_cli(
        "binaries",
        "install",
        "--k8s-version",
        K8S_VERSION,
        env={
            "KTEST_ENVTEST_INDEX_URL": f"{dead}/index.yaml",
            "KTEST_K8S_RELEASE_URL": dead,
            "PATH": "/nonexistent-bin",
        },
    )
    assert result.returncode == 2
    assert f"ktest cache {entry_dir}: corrupt (etcd)" in result.stderr
    assert "Traceback" not in result.stderr


def test_an_entry_without_checksums_gets_them_on_first_use(isolated: Path) -> None:
    locations = store.Locations.from_env()
    with store.install_lock(locations, K8S_VERSION, Progress(enabled=False)) as installer:
        directory = installer.install("build", lambda s: (write_fake_binaries(s), {})[1]).directory
    metadata = _metadata(directory)
    del metadata["files"]  # as written by a ktest without checksums
    (directory / store.METADATA_FILE).write_text(json.dumps(metadata))

    assert resolve_assets(K8S_VERSION, progress=False).directory == directory
    assert _metadata(directory)["files"]["etcd"]["sha256"] == store.sha256_of(directory / "etcd")

    # and from then on, a change is caught
    _flip_a_byte(directory / "etcd")
    with pytest.raises(AssetsError, match="etcd: SHA-256"):
        resolve_assets(K8S_VERSION, progress=False)


def test_an_entry_without_checksums_and_a_wrong_size_is_not_adopted(isolated: Path) -> None:
    locations = store.Locations.from_env()
    with store.install_lock(locations, K8S_VERSION, Progress(enabled=False)) as installer:
        directory = installer.install("build", lambda s: (write_fake_binaries(s), {})[1]).directory
    metadata = _metadata(directory)
    del metadata["files"]
    (directory / store.METADATA_FILE).write_text(json.dumps(metadata))
    with (directory / "kubectl").open("ab") as file:
        file.write(b"# appended\n")
    with pytest.raises(AssetsError, match="kubectl: size"):
        resolve_assets(K8S_VERSION, progress=False)
    assert "files" not in _metadata(directory)
