"""The download path against a local release server: success and every way it can fail.

Each failure must leave nothing in the cache and say what went wrong.
"""

from __future__ import annotations

import hashlib
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from assets_helpers import K8S_VERSION  # type: ignore[import-not-found]

from ktest.assets import resolve_assets, store
from ktest.errors import AssetsError


@pytest.fixture
def served(isolated: Path, release_server, monkeypatch: pytest.MonkeyPatch):
    for key, value in release_server.env().items():
        monkeypatch.setenv(key, value)
    return release_server


def _cache_is_empty() -> bool:
    k8s_dir = store.Locations.from_env().k8s_dir
    if not k8s_dir.exists():
        return True
    return [p.name for p in k8s_dir.iterdir() if p.name != ".locks"] == []


def test_download_installs_verified_binaries(served) -> None:
    assets = resolve_assets(K8S_VERSION, source="download", progress=False)

    assert assets.origin == "download"
    assert assets.version == K8S_VERSION
    assert assets.missing == ()
    assert assets.directory == store.Locations.from_env().cache_entry(K8S_VERSION)
    for name in ("kube-apiserver", "etcd", "kubectl", "kube-controller-manager"):
        assert assets.has(name)
    entry = store.read_cache_entry(store.Locations.from_env(), K8S_VERSION)
    assert entry is not None and entry.metadata["origin"] == "download"
    assert served.requests[served.archive_path] == 1
    assert served.requests[served.kcm_path] == 1

    # A second resolution reuses the cache: no new request reaches the server.
    again = resolve_assets(K8S_VERSION, progress=False)
    assert again.directory == assets.directory and again.origin == "cache"
    assert served.requests[served.archive_path] == 1


def test_minor_selector_resolves_against_the_index(served) -> None:
    assets = resolve_assets("1.37", source="download", progress=False)
    assert assets.version == K8S_VERSION


def test_sha512_mismatch_names_file_and_both_hashes(served) -> None:
    real = hashlib.sha512(served.routes[served.archive_path].body).hexdigest()
    announced = "ab" * 64
    served.set_index_hash(announced)

    with pytest.raises(AssetsError) as caught:
        resolve_assets(K8S_VERSION, source="download", progress=False)
    message = str(caught.value)
    assert f"envtest-v{K8S_VERSION}-linux-{store.host_arch()}.tar.gz" in message
    assert announced in message and real in message
    assert _cache_is_empty()


def test_kube_controller_manager_checksum_mismatch(served) -> None:
    served.routes[served.kcm_path + ".sha512"].body = b"cd" * 64 + b"\n"
    with pytest.raises(AssetsError) as caught:
        resolve_assets(K8S_VERSION, source="download", progress=False)
    assert "SHA-512 mismatch for kube-controller-manager" in str(caught.value)
    assert "cd" * 64 in str(caught.value)
    assert _cache_is_empty()


def test_http_404_is_reported_with_the_url(served) -> None:
    del served.routes[served.kcm_path]
    with pytest.raises(AssetsError) as caught:
        resolve_assets(K8S_VERSION, source="download", progress=False)
    message = str(caught.value)
    assert "HTTP 404" in message and served.kcm_path in message
    assert _cache_is_empty()


def test_version_missing_from_index_lists_what_it_has(served) -> None:
    with pytest.raises(AssetsError) as caught:
        resolve_assets("1.36.3", source="download", progress=False)
    message = str(caught.value)
    assert "has no envtest-v1.36.3" in message and K8S_VERSION in message
    assert _cache_is_empty()


def test_truncated_body_is_detected(served) -> None:
    route = served.routes[served.archive_path]
    route.truncate_at = len(route.body) // 2
    with pytest.raises(AssetsError) as caught:
        resolve_assets(K8S_VERSION, source="download", progress=False)
    assert "cut short" in str(caught.value)
    assert f"of {len(route.body)} bytes" in str(caught.value)
    assert _cache_is_empty()


def test_archive_that_is_not_a_tarball_is_rejected(served) -> None:
    bogus = b"<html>proxy login page</html>"
    served.routes[served.archive_path].body = bogus
    served.set_index_hash(hashlib.sha512(bogus).hexdigest())
    with pytest.raises(AssetsError, match=r"not a readable \.tar\.gz"):
        resolve_assets(K8S_VERSION, source="download", progress=False)
    assert _cache_is_empty()


def test_unreachable_host_fails_within_seconds(isolated: Path) -> None:
    # `isolated` points both URLs at a closed 127.0.0.1 port.
    started = time.monotonic()
    with pytest.raises(AssetsError) as caught:
        resolve_assets(K8S_VERSION, source="download", progress=False)
    assert time.monotonic() - started < 5
    assert "connection refused" in str(caught.value)
    assert _cache_is_empty()


@pytest.fixture
def silent_server() -> Iterator[int]:
    """A socket that listens but never accepts: TCP connects, no HTTP answer ever comes."""
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(8)
        yield server.getsockname()[1]


def test_server_that_never_answers_hits_the_read_timeout(
    isolated: Path, silent_server: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KTEST_ENVTEST_INDEX_URL", f"http://127.0.0.1:{silent_server}/index.yaml")
    monkeypatch.setenv("KTEST_DOWNLOAD_READ_TIMEOUT", "1")
    started = time.monotonic()
    with pytest.raises(AssetsError) as caught:
        resolve_assets(K8S_VERSION, source="download", progress=False)
    assert time.monotonic() - started < 5
    assert "timed out" in str(caught.value)


@pytest.fixture
def full_backlog_port() -> Iterator[int]:
    """A listening port whose accept queue is full: new connects get no SYN-ACK and hang."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(0)
    port = server.getsockname()[1]
    fillers: list[socket.socket] = []
    try:
        while True:  # fill the queue until a connect attempt really hangs
            filler = socket.socket()
            filler.settimeout(0.5)
            fillers.append(filler)
            try:
                filler.connect(("127.0.0.1", port))
            except TimeoutError:
                break
            assert len(fillers) < 64, "accept queue never filled"
        yield port
    finally:
        for filler in fillers:
            filler.close()
        server.close()


def test_connect_that_hangs_hits_the_short_connect_timeout(
    isolated: Path, full_backlog_port: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KTEST_ENVTEST_INDEX_URL", f"http://127.0.0.1:{full_backlog_port}/i.yaml")
    started = time.monotonic()
    with pytest.raises(AssetsError) as caught:
        resolve_assets(K8S_VERSION, source="download", progress=False)
    elapsed = time.monotonic() - started
    assert elapsed < 6  # default connect timeout: 3 s
    assert "timed out" in str(caught.value)


def test_download_progress_reports_bytes(served, capsys: pytest.CaptureFixture[str]) -> None:
    resolve_assets(K8S_VERSION, source="download", progress=True)
    err = capsys.readouterr().err
    size = len(served.routes[served.archive_path].body)
    assert f"downloading envtest-v{K8S_VERSION}-linux-{store.host_arch()}.tar.gz: {size} B" in err
    assert "downloading kube-controller-manager" in err
