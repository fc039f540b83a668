"""Resolution order: KTEST_ASSETS > KUBEBUILDER_ASSETS > setup-envtest store > cache > download > build."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from assets_helpers import K8S_VERSION, write_fake_binaries  # type: ignore[import-not-found]

from ktest.assets import resolve_assets, store
from ktest.assets.progress import Progress
from ktest.errors import AssetsError


def _populate_cache(version: str = K8S_VERSION) -> Path:
    locations = store.Locations.from_env()
    with store.install_lock(locations, version, Progress(enabled=False)) as installer:
        entry = installer.install(
            "build", lambda scratch: (write_fake_binaries(scratch, version=version), {})[1]
        )
    return entry.directory


@pytest.fixture
def no_go(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """PATH without any `go`: only a directory with the shell."""
    bin_dir = tmp_path / "bin-without-go"
    bin_dir.mkdir()
    monkeypatch.setenv("PATH", str(bin_dir))
    return bin_dir


def test_each_source_is_used_in_order(
    isolated: Path, release_server, monkeypatch: pytest.MonkeyPatch, no_go: Path
) -> None:
    for key, value in release_server.env().items():
        monkeypatch.setenv(key, value)
    locations = store.Locations.from_env()
    ktest_assets = write_fake_binaries(isolated / "ktest-assets")
    kubebuilder_assets = write_fake_binaries(isolated / "kubebuilder-assets")
    envtest_entry = write_fake_binaries(locations.envtest_entry(K8S_VERSION))
    cache_entry = _populate_cache()
    monkeypatch.setenv("KTEST_ASSETS", str(ktest_assets))
    monkeypatch.setenv("KUBEBUILDER_ASSETS", str(kubebuilder_assets))

    def resolved() -> tuple[Path, str]:
        assets = resolve_assets(K8S_VERSION, progress=False)
        assert assets.version == K8S_VERSION
        return assets.directory, assets.origin

    assert resolved() == (ktest_assets, "KTEST_ASSETS")
    monkeypatch.delenv("KTEST_ASSETS")
    assert resolved() == (kubebuilder_assets, "KUBEBUILDER_ASSETS")
    monkeypatch.delenv("KUBEBUILDER_ASSETS")
    assert resolved() == (envtest_entry, "setup-envtest")
    for child in envtest_entry.iterdir():
        child.unlink()
    envtest_entry.rmdir()
    assert resolved() == (cache_entry, "cache")
    assert release_server.requests[release_server.archive_path] == 0

    for child in cache_entry.iterdir():
        child.unlink()
    cache_entry.rmdir()
    assert resolved() == (cache_entry, "download")
    assert release_server.requests[release_server.archive_path] == 1


def test_build_is_tried_after_download_fails(
    isolated: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # A stand-in `go` (Go is outside Kubernetes) that answers `go env` and fails the rest.
    bin_dir = tmp_path / "fake-go-bin"
    bin_dir.mkdir()
    calls = tmp_path / "go-calls"
    fake_go = bin_dir / "go"
    fake_go.write_text(
        "#!/bin/sh\n"
        f'echo "$*" >> {calls}\n'
        'if [ "$1" = env ]; then echo go1.26.8; echo local; exit 0; fi\n'
        'echo "go: stand-in: module lookup disabled" >&2; exit 1\n'
    )
    fake_go.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}/usr/bin{os.pathsep}/bin")

    with pytest.raises(AssetsError) as caught:
        resolve_assets(K8S_VERSION, progress=False)
    message = str(caught.value)
    download_at = message.index("- download: could not download the envtest release index")
    build_at = message.index("- build from Go modules: looking up k8s.io/kubernetes@v1.37.2 failed")
    assert download_at < build_at
    assert "stand-in: module lookup disabled" in message
    assert "list -m -json k8s.io/kubernetes@v1.37.2" in calls.read_text()
    assert not store.Locations.from_env().cache_entry(K8S_VERSION).exists()


def test_directory_without_controller_manager_reports_it_missing(
    isolated: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    directory = write_fake_binaries(
        isolated / "envtest", names=("kube-apiserver", "etcd", "kubectl")
    )
    monkeypatch.setenv("KUBEBUILDER_ASSETS", str(directory))
    assets = resolve_assets(progress=False)
    assert assets.version == K8S_VERSION
    assert assets.missing == ("kube-controller-manager",)
    assert not assets.has("kube-controller-manager")
    with pytest.raises(AssetsError, match="kube-controller-manager is not in"):
        assets.binary("kube-controller-manager")
    assert assets.binary("kube-apiserver") == directory / "kube-apiserver"


def test_kubebuilder_assets_of_another_version_is_skipped(
    isolated: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv(
        "KUBEBUILDER_ASSETS", str(write_fake_binaries(isolated / "old", version="1.35.4"))
    )
    cache_entry = _populate_cache()
    assets = resolve_assets("1.37", progress=True)
    assert (assets.directory, assets.version) == (cache_entry, K8S_VERSION)
    assert "holds Kubernetes 1.35.4, not 1.37" in capsys.readouterr().err


def test_ktest_assets_of_another_version_is_an_error(
    isolated: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KTEST_ASSETS", str(write_fake_binaries(isolated / "old", version="1.35.4")))
    with pytest.raises(AssetsError) as caught:
        resolve_assets("1.37.2", progress=False)
    assert "holds Kubernetes 1.35.4, but 1.37.2 was requested" in str(caught.value)
    assert "Unset KTEST_ASSETS" in str(caught.value)


@pytest.mark.parametrize("variable", ["KTEST_ASSETS", "KUBEBUILDER_ASSETS"])
def test_user_directory_without_apiserver_is_an_error(
    isolated: Path, monkeypatch: pytest.MonkeyPatch, variable: str
) -> None:
    directory = write_fake_binaries(isolated / "partial", names=("etcd", "kubectl"))
    monkeypatch.setenv(variable, str(directory))
    with pytest.raises(AssetsError) as caught:
        resolve_assets(progress=False)
    message = str(caught.value)
    assert f"{variable}={directory} has no executable kube-apiserver" in message
    assert f"unset {variable}" in message


def test_complete_cache_beats_incomplete_setup_envtest_entry(isolated: Path) -> None:
    locations = store.Locations.from_env()
    write_fake_binaries(
        locations.envtest_entry(K8S_VERSION), names=("kube-apiserver", "etcd", "kubectl")
    )
    cache_entry = _populate_cache()
    assets = resolve_assets(K8S_VERSION, progress=False)
    assert assets.directory == cache_entry and assets.missing == ()


def test_incomplete_setup_envtest_entry_is_used_when_nothing_better(isolated: Path) -> None:
    locations = store.Locations.from_env()
    entry = write_fake_binaries(
        locations.envtest_entry(K8S_VERSION), names=("kube-apiserver", "etcd", "kubectl")
    )
    assets = resolve_assets(K8S_VERSION, progress=False)
    assert (assets.directory, assets.origin, assets.missing) == (
        entry,
        "setup-envtest",
        ("kube-controller-manager",),
    )


def test_partial_selectors_use_installed_versions_when_offline(isolated: Path, no_go: Path) -> None:
    _populate_cache("1.36.3")
    _populate_cache("1.37.2")
    write_fake_binaries(
        store.Locations.from_env().envtest_entry("1.35.4"), version="1.35.4"
    )
    assert resolve_assets("1.36", progress=False).version == "1.36.3"
    assert resolve_assets("1.35", progress=False).version == "1.35.4"
    assert resolve_assets("latest", progress=False).version == "1.37.2"
    assert resolve_assets(None, progress=False).version == "1.37.2"


def test_unknown_minor_lists_the_known_versions(isolated: Path, no_go: Path) -> None:
    _populate_cache("1.37.2")
    with pytest.raises(AssetsError) as caught:
        resolve_assets("1.99", progress=False)
    message = str(caught.value)
    assert "no known Kubernetes release matches 1.99" in message
    assert "installed: 1.37.2" in message


def test_nothing_available_explains_the_three_ways_out(isolated: Path, no_go: Path) -> None:
    with pytest.raises(AssetsError) as caught:
        resolve_assets("1.37.2", progress=False)
    message = str(caught.value)
    for tried in ("KTEST_ASSETS: not set", "KUBEBUILDER_ASSETS: not set", "setup-envtest store",
                  "ktest cache", "download: could not download", "`go` is not on PATH"):
        assert tried in message
    assert "point KTEST_ASSETS at" in message
    assert "allow the download" in message
    assert "install Go" in message


def test_unknown_source_is_rejected(isolated: Path) -> None:
    with pytest.raises(AssetsError, match="unknown binaries source 'ftp'"):
        resolve_assets("1.37.2", source="ftp", progress=False)


def test_user_directory_of_any_version_is_used_when_no_version_is_requested(
    tmp_path, monkeypatch
) -> None:
    """Pointing KTEST_ASSETS at binaries without asking for a version means "use these"."""
    directory = tmp_path / "bin"
    directory.mkdir()
    for name in ("kube-apiserver", "etcd"):
        script = directory / name
        script.write_text("#!/bin/sh\necho 'Kubernetes v1.31.7'\n")
        script.chmod(0o755)
    monkeypatch.setenv("KTEST_ASSETS", str(directory))
    assets = resolve_assets(None, progress=False)
    assert (assets.directory, assets.version, assets.origin) == (directory, "1.31.7", "KTEST_ASSETS")
    with pytest.raises(AssetsError, match=r"holds Kubernetes 1\.31\.7, but 1\.37 was requested"):
        resolve_assets("1.37", progress=False)
