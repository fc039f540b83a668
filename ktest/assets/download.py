"""Verified downloads: the envtest release archive and kube-controller-manager.

* kube-apiserver, etcd, kubectl: controller-tools' ``envtest-releases.yaml`` index
  (``releases: {vX.Y.Z: {envtest-vX.Y.Z-linux-amd64.tar.gz: {hash, selfLink}}}``),
  SHA-512 checked.
* kube-controller-manager: ``<release>/vX.Y.Z/bin/linux/<arch>/kube-controller-manager``
  checked against the ``.sha512`` file published next to it.

Connections use a short connect timeout so a machine without network fails in
seconds and resolution moves on to the Go build.
"""

from __future__ import annotations

import functools
import hashlib
import http.client
import os
import socket
import tarfile
import time
import urllib.error
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import yaml

from ktest.assets.progress import Progress
from ktest.assets.selectors import KubeVersion, sort_versions
from ktest.errors import AssetsError

DEFAULT_INDEX_URL = (
    "https://raw.githubusercontent.com/kubernetes-sigs/controller-tools/HEAD/envtest-releases.yaml"
)
DEFAULT_RELEASE_URL = "https://dl.k8s.io/release"
ENVTEST_BINARIES = ("etcd", "kube-apiserver", "kubectl")
_CHUNK = 1 << 16


@dataclass(frozen=True)
class DownloadSettings:
    """Where to download from and how long to wait; every field has an env var."""

    index_url: str = DEFAULT_INDEX_URL
    release_url: str = DEFAULT_RELEASE_URL
    connect_timeout: float = 3.0
    read_timeout: float = 30.0
    enabled: bool = True

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> DownloadSettings:
        env = os.environ if env is None else env
        return cls(
            index_url=env.get("KTEST_ENVTEST_INDEX_URL") or DEFAULT_INDEX_URL,
            release_url=(env.get("KTEST_K8S_RELEASE_URL") or DEFAULT_RELEASE_URL).rstrip("/"),
            connect_timeout=_float_env(env, "KTEST_DOWNLOAD_CONNECT_TIMEOUT", cls.connect_timeout),
            read_timeout=_float_env(env, "KTEST_DOWNLOAD_READ_TIMEOUT", cls.read_timeout),
            enabled=env.get("KTEST_DOWNLOAD", "").lower() not in ("0", "false", "no", "off"),
        )


def _float_env(env: Mapping[str, str], name: str, default: float) -> float:
    raw = env.get(name)
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if value <= 0:
        raise AssetsError(f"{name}={raw!r} is not a positive number of seconds; fix or unset it.")
    return value


@dataclass(frozen=True)
class Archive:
    """One envtest archive listed in the index."""

    name: str
    url: str
    sha512: str


class _TimedHTTPConnection(http.client.HTTPConnection):
    """Connects with the request's (short) timeout, then reads with ``read_timeout``."""

    def __init__(self, *args: Any, read_timeout: float, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._read_timeout = read_timeout

    def connect(self) -> None:
        super().connect()
        self.sock.settimeout(self._read_timeout)


class _TimedHTTPSConnection(_TimedHTTPConnection, http.client.HTTPSConnection):
    """The same over TLS: the read timeout is set on the socket once the TLS handshake is done."""


class _TimedOpening(urllib.request.AbstractHTTPHandler):
    """What both handlers share: open the connection class with the read timeout."""

    def __init__(self, read_timeout: float) -> None:
        super().__init__()
        self._read_timeout = read_timeout

    def _open_timed(
        self, connection: type[_TimedHTTPConnection], req: urllib.request.Request, **how: Any
    ) -> http.client.HTTPResponse:
        return self.do_open(functools.partial(connection, read_timeout=self._read_timeout), req, **how)


class _TimedHTTPHandler(_TimedOpening, urllib.request.HTTPHandler):
    def http_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
        return self._open_timed(_TimedHTTPConnection, req)


class _TimedHTTPSHandler(_TimedOpening, urllib.request.HTTPSHandler):
    def https_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
        return self._open_timed(_TimedHTTPSConnection, req, context=getattr(self, "_context", None))


class Downloader:
    """Fetches URLs with the settings' timeouts and reports bytes to ``progress``."""

    def __init__(self, settings: DownloadSettings, progress: Progress) -> None:
        self.settings = settings
        self.progress = progress
        self._opener = urllib.request.build_opener(
            _TimedHTTPHandler(settings.read_timeout), _TimedHTTPSHandler(settings.read_timeout)
        )

    def _open(self, url: str, what: str) -> http.client.HTTPResponse:
        request = urllib.request.Request(url, headers={"User-Agent": "ktest"})
        try:
            return self._opener.open(request, timeout=self.settings.connect_timeout)
        except urllib.error.HTTPError as error:
            error.close()
            raise AssetsError(
                f"could not download {what}: {url} answered HTTP {error.code} {error.reason}."
            ) from error
        except (urllib.error.URLError, OSError, http.client.HTTPException) as error:
            raise AssetsError(f"could not download {what} from {url}: {_reason(error)}.") from error

    def fetch_text(self, url: str, what: str, limit: int = 32 << 20) -> str:
        """A small document (index, checksum file), fully read."""
        with self._open(url, what) as response:
            try:
                body = response.read(limit + 1)
            except (OSError, http.client.HTTPException) as error:
                raise AssetsError(f"could not download {what} from {url}: {_reason(error)}.") from error
        if len(body) > limit:
            raise AssetsError(f"{what} at {url} is larger than {limit} bytes; is the URL right?")
        return body.decode("utf-8", errors="replace")

    def fetch_file(self, url: str, destination: Path, name: str, sha512: str) -> None:
        """Stream ``url`` into ``destination`` and check its SHA-512; delete it on any failure."""
        digest = hashlib.sha512()
        received = 0
        try:
            with self._open(url, name) as response, destination.open("wb") as out:
                length_header = response.headers.get("Content-Length")
                total = int(length_header) if length_header and length_header.isdigit() else None
                while True:
                    try:
                        chunk = response.read(_CHUNK)
                    except http.client.IncompleteRead as error:
                        raise AssetsError(
                            f"download of {name} from {url} was cut short after "
                            f"{received + len(error.partial)} of {total} bytes."
                        ) from error
                    except (OSError, http.client.HTTPException) as error:
                        raise AssetsError(
                            f"download of {name} from {url} failed after {received} bytes: {_reason(error)}."
                        ) from error
                    if not chunk:
                        break
                    out.write(chunk)
                    digest.update(chunk)
                    received += len(chunk)
                    self.progress.transferred(name, received, total)
            if total is not None and received != total:
                raise AssetsError(
                    f"download of {name} from {url} was cut short after {received} of {total} bytes."
                )
            actual = digest.hexdigest()
            if actual.lower() != sha512.strip().lower():
                raise AssetsError(
                    f"SHA-512 mismatch for {name} downloaded from {url}:\n"
                    f"  expected {sha512.strip().lower()}\n"
                    f"  got      {actual}\n"
                    "The file was discarded. A proxy or mirror may have altered it; try again, "
                    "or check KTEST_ENVTEST_INDEX_URL / KTEST_K8S_RELEASE_URL."
                )
        except BaseException:
            destination.unlink(missing_ok=True)
            raise


def _reason(error: BaseException) -> str:
    """A short human reason for a network failure."""
    cause: BaseException = error
    if isinstance(error, urllib.error.URLError) and isinstance(error.reason, BaseException):
        cause = error.reason
    if isinstance(cause, (socket.timeout, TimeoutError)):
        return "timed out (no answer)"
    if isinstance(cause, ConnectionRefusedError):
        return "connection refused"
    if isinstance(cause, socket.gaierror):
        return f"host name not resolvable ({cause.strerror})"
    if isinstance(cause, urllib.error.URLError):
        return str(cause.reason)
    return str(cause) or type(cause).__name__


def parse_index(text: str, url: str) -> dict[str, dict[str, Archive]]:
    """The envtest index as ``{version: {archive name: Archive}}``; versions without ``v``."""
    try:
        document = yaml.safe_load(text)
    except yaml.YAMLError as error:
        raise AssetsError(f"the envtest index {url} is not valid YAML: {error}") from error
    releases = document.get("releases") if isinstance(document, dict) else None
    if not isinstance(releases, dict):
        raise AssetsError(
            f"the envtest index {url} has no 'releases' mapping; is KTEST_ENVTEST_INDEX_URL "
            "pointing at an envtest-releases.yaml?"
        )
    index: dict[str, dict[str, Archive]] = {}
    for version, archives in releases.items():
        if not isinstance(archives, dict):
            continue
        entries = {}
        for name, details in archives.items():
            if isinstance(details, dict) and details.get("hash") and details.get("selfLink"):
                entries[str(name)] = Archive(str(name), str(details["selfLink"]), str(details["hash"]))
        index[KubeVersion.parse(str(version)).text] = entries
    return index


def archive_name(version: str, arch: str) -> str:
    return f"envtest-v{version}-linux-{arch}.tar.gz"


def index_versions(index: Mapping[str, Mapping[str, Archive]], arch: str) -> list[str]:
    """Stable versions that have an archive for this platform, newest first."""
    return sort_versions(v for v, archives in index.items() if archive_name(v, arch) in archives)


def fetch_index(downloader: Downloader) -> dict[str, dict[str, Archive]]:
    url = downloader.settings.index_url
    return parse_index(downloader.fetch_text(url, "the envtest release index"), url)


def download_binaries(version: str, arch: str, destination: Path, downloader: Downloader) -> dict[str, Any]:
    """Download and verify all four binaries of ``version`` into ``destination``."""
    started = time.monotonic()
    settings = downloader.settings
    index = fetch_index(downloader)
    wanted = archive_name(version, arch)
    archive = index.get(version, {}).get(wanted)
    if archive is None:
        known = ", ".join(index_versions(index, arch)[:8]) or "none"
        raise AssetsError(f"the envtest index {settings.index_url} has no {wanted} (it lists: {known}).")
    archive_path = destination / f".{archive.name}"
    downloader.fetch_file(archive.url, archive_path, archive.name, archive.sha512)
    try:
        _extract_envtest(archive_path, destination, archive.name)
    finally:
        archive_path.unlink(missing_ok=True)

    kcm_url = f"{settings.release_url}/v{version}/bin/linux/{arch}/kube-controller-manager"
    checksum = downloader.fetch_text(f"{kcm_url}.sha512", "kube-controller-manager.sha512")
    expected = checksum.split()[0] if checksum.split() else ""
    if len(expected) != 128:
        raise AssetsError(f"{kcm_url}.sha512 does not hold a SHA-512 checksum (got {checksum[:80]!r}).")
    kcm_path = destination / "kube-controller-manager"
    downloader.fetch_file(kcm_url, kcm_path, "kube-controller-manager", expected)
    kcm_path.chmod(0o755)
    return {
        "download_seconds": round(time.monotonic() - started, 1),
        "sources": {"envtest": archive.url, "kube-controller-manager": kcm_url},
    }


def _extract_envtest(archive_path: Path, destination: Path, name: str) -> None:
    """Copy the three binaries out of the archive, whatever folder they sit in."""
    found: set[str] = set()
    try:
        with tarfile.open(archive_path, "r:gz") as tar:
            for member in tar:
                base = os.path.basename(member.name)
                if not member.isreg() or base not in ENVTEST_BINARIES or base in found:
                    continue
                source = tar.extractfile(member)
                if source is None:
                    continue
                target = destination / base
                with source, target.open("wb") as out:
                    while chunk := source.read(_CHUNK):
                        out.write(chunk)
                target.chmod(0o755)
                found.add(base)
    except (tarfile.TarError, OSError, EOFError) as error:
        raise AssetsError(f"{name} is not a readable .tar.gz archive: {error}") from error
    missing = sorted(set(ENVTEST_BINARIES) - found)
    if missing:
        raise AssetsError(f"{name} does not contain {', '.join(missing)}.")


def host_of(url: str) -> str:
    return urlsplit(url).netloc or url
