"""Cache layout, XDG locations and the atomic, verified install."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from assets_helpers import K8S_VERSION, write_fake_binaries  # type: ignore[import-not-found]

from ktest.assets import store
from ktest.assets.progress import Progress
from ktest.errors import AssetsError

QUIET = Progress(enabled=False)


def test_locations_follow_xdg_variables(tmp_path: Path) -> None:
    env = {"HOME": str(tmp_path / "home"), "XDG_CACHE_HOME": str(tmp_path / "c"),
           "XDG_DATA_HOME": str(tmp_path / "d")}
    locations = store.Locations.from_env(env)
    arch = store.host_arch()
    assert locations.cache_entry("1.37.2") == tmp_path / "c" / "ktest" / "k8s" / f"1.37.2-linux-{arch}"
    assert locations.envtest_entry("1.37.2") == (
        tmp_path / "d" / "kubebuilder-envtest" / "k8s" / f"1.37.2-linux-{arch}"
    )
    assert locations.gobuild_dir == tmp_path / "c" / "ktest" / "gobuild"


def test_locations_default_under_home(tmp_path: Path) -> None:
    locations = store.Locations.from_env({"HOME": str(tmp_path)})
    assert locations.k8s_dir == tmp_path / ".cache" / "ktest" / "k8s"
    assert locations.envtest_root == tmp_path / ".local" / "share" / "kubebuilder-envtest"


def test_ktest_cache_dir_overrides_xdg(tmp_path: Path) -> None:
    locations = store.Locations.from_env(
        {"HOME": str(tmp_path), "KTEST_CACHE_DIR": str(tmp_path / "mine")}
    )
    assert locations.k8s_dir == tmp_path / "mine" / "k8s"


def test_what_is_derived_from_the_binaries_is_kept_beside_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The flag probes and etcd templates follow KTEST_CACHE_DIR with the binaries: a session whose
    HOME is elsewhere (a test's inner session, a CI job) reuses them instead of bootstrapping a
    throwaway control plane for a template again."""
    from ktest.controlplane import etcd_template, flags

    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.setenv("KTEST_CACHE_DIR", str(tmp_path / "mine"))
    assert flags.cache_directory() == tmp_path / "mine" / "flags"
    assert etcd_template.templates_directory() == tmp_path / "mine" / "etcd-templates"
    monkeypatch.delenv("KTEST_CACHE_DIR")
    assert etcd_template.templates_directory() == tmp_path / "xdg" / "ktest" / "etcd-templates"


def _install(locations: store.Locations, producer: Callable[[Path], dict]) -> store.Entry:
    with store.install_lock(locations, K8S_VERSION, QUIET) as installer:
        return installer.install("test", producer)


def test_install_lays_out_binaries_and_metadata(isolated: Path) -> None:
    locations = store.Locations.from_env()
    entry = _install(locations, lambda scratch: (write_fake_binaries(scratch), {"note": 1})[1])

    assert entry.directory == locations.cache_entry(K8S_VERSION)
    assert sorted(p.name for p in entry.directory.iterdir()) == sorted(
        ["etcd", "kube-apiserver", "kube-controller-manager", "kubectl", store.METADATA_FILE]
    )
    metadata = json.loads((entry.directory / store.METADATA_FILE).read_text())
    assert metadata["origin"] == "test"
    assert metadata["version"] == K8S_VERSION
    assert metadata["note"] == 1
    assert metadata["reported_versions"]["kube-apiserver"] == K8S_VERSION
    assert metadata["reported_versions"]["etcd"] == "3.7.0"
    assert metadata["sizes"]["kubectl"] == (entry.directory / "kubectl").stat().st_size
    assert store.read_cache_entry(locations, K8S_VERSION) == entry
    # Nothing but the entry and the lock directory is left next to it.
    assert sorted(p.name for p in locations.k8s_dir.iterdir()) == [
        ".locks",
        f"{K8S_VERSION}-linux-{locations.arch}",
    ]


def test_failing_producer_leaves_nothing_in_the_cache(isolated: Path) -> None:
    locations = store.Locations.from_env()

    def half_then_fail(scratch: Path) -> dict:
        write_fake_binaries(scratch, names=("kube-apiserver", "etcd"))
        raise AssetsError("network went away")

    with pytest.raises(AssetsError, match="network went away"):
        _install(locations, half_then_fail)
    assert store.read_cache_entry(locations, K8S_VERSION) is None
    assert [p.name for p in locations.k8s_dir.iterdir()] == [".locks"]


def test_binary_reporting_another_version_is_not_installed(isolated: Path) -> None:
    locations = store.Locations.from_env()

    def wrong_version(scratch: Path) -> dict:
        write_fake_binaries(scratch)
        write_fake_binaries(scratch, version="1.36.3", names=("kube-controller-manager",))
        return {}

    with pytest.raises(AssetsError) as caught:
        _install(locations, wrong_version)
    assert "kube-controller-manager reports version 1.36.3" in str(caught.value)
    assert "1.37.2 was requested" in str(caught.value)
    assert not locations.cache_entry(K8S_VERSION).exists()


def test_missing_binary_is_not_installed(isolated: Path) -> None:
    locations = store.Locations.from_env()
    with pytest.raises(AssetsError, match="kubectl"):
        _install(locations, lambda s: (write_fake_binaries(s, names=("kube-apiserver", "etcd",
                                                                      "kube-controller-manager")),
                                       {})[1])
    assert not locations.cache_entry(K8S_VERSION).exists()


def test_interrupted_install_leftovers_are_removed_and_never_trusted(isolated: Path) -> None:
    locations = store.Locations.from_env()
    locations.k8s_dir.mkdir(parents=True)
    leftover = locations.k8s_dir / f".tmp-{locations.entry_name(K8S_VERSION)}-abc123"
    write_fake_binaries(leftover)
    # A directory without metadata (e.g. copied by hand, half-written) is not trusted either.
    write_fake_binaries(locations.cache_entry(K8S_VERSION), names=("kube-apiserver",))
    assert store.read_cache_entry(locations, K8S_VERSION) is None

    entry = _install(locations, lambda scratch: (write_fake_binaries(scratch), {})[1])
    assert not leftover.exists()
    assert not entry.missing


def test_unwritable_cache_is_reported_with_the_fix(tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("")
    locations = store.Locations.from_env({"HOME": str(tmp_path), "XDG_CACHE_HOME": str(blocker)})
    with pytest.raises(AssetsError) as caught:
        store.ensure_writable_cache(locations)
    message = str(caught.value)
    assert str(locations.k8s_dir) in message and "not writable" in message
    assert "XDG_CACHE_HOME" in message and "KTEST_ASSETS" in message


def test_listing_finds_cache_and_setup_envtest_entries(isolated: Path) -> None:
    locations = store.Locations.from_env()
    _install(locations, lambda scratch: (write_fake_binaries(scratch), {})[1])
    write_fake_binaries(locations.envtest_entry("1.36.3"), version="1.36.3",
                        names=("kube-apiserver", "etcd", "kubectl"))
    (locations.envtest_root / "k8s" / "not-a-version").mkdir()

    cached = store.list_cache_entries(locations)
    envtest = store.list_envtest_entries(locations)
    assert [(e.version, e.origin) for e in cached] == [(K8S_VERSION, "test")]
    assert [(e.version, e.origin, e.missing) for e in envtest] == [
        ("1.36.3", "setup-envtest", ("kube-controller-manager",))
    ]
