"""Find control-plane binaries for a Kubernetes version, trying each source in order.

1. ``KTEST_ASSETS``, then ``KUBEBUILDER_ASSETS`` (a directory the user points at)
2. setup-envtest's store
3. ktest's cache
4. download (envtest index + official kube-controller-manager), SHA-512 verified
5. every binary source another distribution registers (:mod:`ktest.assets.sources`):
   ``ktest-offline`` builds from Go modules (``build``) when ``go`` is on PATH
6. otherwise one error saying what was tried and the three ways out.

``source="download"`` or ``"build"`` (a registered source's name) restricts steps
4-5 to that one way (and skips the user/setup-envtest directories); the cache is
always used.
"""

from __future__ import annotations

import os
import shlex
from functools import cached_property, partial
from pathlib import Path

from ktest.assets import download, gotool, probe, sources, store, versions
from ktest.assets.bundle import OPTIONAL_BINARIES, REQUIRED_BINARIES, Assets
from ktest.assets.progress import Progress, as_progress
from ktest.assets.selectors import Selector, parse_selector
from ktest.assets.sources import SOURCES
from ktest.errors import AssetsError

USER_DIRECTORY_VARIABLES = ("KTEST_ASSETS", "KUBEBUILDER_ASSETS")


def resolve_assets(
    selector: str | None = None,
    *,
    source: str = "auto",
    progress: bool | Progress = True,
    repair: bool = False,
) -> Assets:
    """Return a directory of binaries for ``selector`` (``"1.37.2"``, ``"1.37"``, ``"latest"``).

    None means the newest stable release known, or whatever version a directory
    named by ``KTEST_ASSETS``/``KUBEBUILDER_ASSETS`` holds: pointing at binaries
    without asking for a version means "use these". Installs into the cache when
    needed (download or Go build); raises AssetsError saying what was tried.

    A cached entry whose binaries changed since install (see
    :func:`ktest.assets.store.verify_entry`) raises AssetsError naming them;
    ``repair=True`` (``ktest binaries install``) installs it again instead.
    """
    return Resolution(
        parse_selector(selector),
        source,
        as_progress(progress),
        version_requested=selector is not None,
        repair=repair,
    ).run()


class Resolution:
    """One resolution: the selector, the allowed sources and what has been tried so far."""

    def __init__(
        self, selector: Selector, source: str, progress: Progress, *, version_requested: bool, repair: bool
    ) -> None:
        if source not in SOURCES:
            raise AssetsError(f"unknown binaries source {source!r}; use one of: {', '.join(SOURCES)}.")
        self.selector = selector
        self.source = source
        self.progress = progress
        self.locations = store.Locations.from_env()
        self.settings = download.DownloadSettings.from_env()
        self.tried: list[str] = []
        self.version_requested = version_requested
        self.repair = repair

    @property
    def allows_download(self) -> bool:
        return self.source in ("auto", "download") and self.settings.enabled

    @property
    def allows_build(self) -> bool:
        return self.source in ("auto", "build")

    @cached_property
    def go(self) -> gotool.GoTool | None:
        """The ``go`` on PATH: it lists the releases on the Go module proxy."""
        return gotool.find_go()

    def run(self) -> Assets:
        if self.source == "auto":
            for variable in USER_DIRECTORY_VARIABLES:
                found = self._user_directory(variable)
                if found is not None:
                    return found
        version = self._concrete_version()
        if self.source == "auto":
            found = self._setup_envtest_store(version)
            if found is not None:
                return found
        cached = store.read_cache_entry(self.locations, version)
        if cached is not None:
            damage = store.verify_entry(cached)
            if not damage:
                return _assets(cached)
            if not self.repair:
                raise AssetsError(store.damage_report(cached, damage))
            names = ", ".join(item.name for item in damage)
            self.progress.note(f"repairing Kubernetes {version}: corrupt {names}; installing it again")
            self.tried.append(f"ktest cache {cached.directory}: corrupt ({names})")
        else:
            self.tried.append(f"ktest cache {self.locations.cache_entry(version)}: not installed")
        return self._install(version)

    def _user_directory(self, variable: str) -> Assets | None:
        raw = os.environ.get(variable, "")
        if not raw:
            self.tried.append(f"{variable}: not set")
            return None
        directory = Path(raw).expanduser()
        if not directory.is_dir():
            raise AssetsError(
                f"{variable}={raw} is not a directory.\n"
                f"Point {variable} at a directory holding kube-apiserver and etcd "
                f"(and kube-controller-manager, kubectl), or unset it to let ktest find binaries."
            )
        lacking = [
            name
            for name in REQUIRED_BINARIES
            if not (directory / name).is_file() or not os.access(directory / name, os.X_OK)
        ]
        if lacking:
            raise AssetsError(
                f"{variable}={directory} has no executable {' or '.join(lacking)}.\n"
                f"Put the binaries there (e.g. `ktest binaries path` shows a complete set), "
                f"or unset {variable} so ktest finds, downloads or builds them."
            )
        version = probe.reported_version(directory / "kube-apiserver", "kube-apiserver")
        if self.version_requested and not self.selector.matches(version):
            if variable == "KTEST_ASSETS":
                raise AssetsError(
                    f"KTEST_ASSETS={directory} holds Kubernetes {version}, but {self.selector} "
                    "was requested.\nUnset KTEST_ASSETS to let ktest provide "
                    f"{self.selector}, or request {version}."
                )
            self.progress.note(
                f"not using {variable}={directory}: it holds Kubernetes {version}, not {self.selector}"
            )
            self.tried.append(f"{variable}={directory}: holds {version}, not {self.selector}")
            return None
        missing = tuple(n for n in OPTIONAL_BINARIES if not (directory / n).is_file())
        if missing:
            self.progress.note(
                f"{variable}={directory} has no {', '.join(missing)}: "
                "garbage-collector and namespace controllers will be unavailable"
                if "kube-controller-manager" in missing
                else f"{variable}={directory} has no {', '.join(missing)}"
            )
        return Assets(directory=directory, version=version, origin=variable, missing=missing)

    def _concrete_version(self) -> str:
        if self.selector.is_exact:
            return self.selector.exact_version
        downloader = download.Downloader(self.settings, self.progress) if self.allows_download else None
        go = self.go.path if self.allows_build and self.go is not None else None
        known = versions.known_versions(self.locations, go=go, downloader=downloader, progress=self.progress)
        chosen = self.selector.newest_match(known.all())
        if chosen is not None:
            return chosen
        if known.all():
            raise AssetsError(
                f"no known Kubernetes release matches {self.selector!s}.\n"
                f"Known versions: {known.describe()}.\n"
                "Pick one of those (e.g. --k8s-version "
                f"{known.all()[0]}), or an exact version like 1.37.2."
            )
        self.tried.append(f"listing versions: {known.describe()}")
        raise AssetsError(self._nothing_worked(str(self.selector)))

    def _setup_envtest_store(self, version: str) -> Assets | None:
        entry = store.read_envtest_entry(self.locations, version)
        if entry is None:
            self.tried.append(f"setup-envtest store {self.locations.envtest_entry(version)}: not installed")
            return None
        if "kube-controller-manager" in entry.missing:
            cached = store.read_cache_entry(self.locations, version)
            if cached is not None and not store.verify_entry(cached):
                return _assets(cached)  # complete beats incomplete for the same version
        return _assets(entry)

    def _install(self, version: str) -> Assets:
        with store.install_lock(self.locations, version, self.progress) as installer:
            existing = installer.existing()
            if existing is not None and not store.verify_entry(existing):
                self.progress.note(f"Kubernetes {version} was installed by another process")
                return _assets(existing)
            if self.allows_download:
                downloader = download.Downloader(self.settings, self.progress)
                self.progress.note(f"downloading Kubernetes {version} binaries from {self._download_hosts()}")
                outcome = self._attempt(
                    "download",
                    "download",
                    installer,
                    partial(download.download_binaries, version, self.locations.arch, downloader=downloader),
                )
                if isinstance(outcome, Assets):
                    return outcome
                self.progress.note(f"download failed: {_first_line(outcome)}")
            elif self.source in ("auto", "download"):
                self.tried.append("download: disabled by KTEST_DOWNLOAD")
            if self.allows_build:
                registered = sources.binary_sources()
                if not registered:
                    self.tried.append(sources.not_installed_note())
                for binary_source in registered:
                    if self.source not in ("auto", binary_source.name):
                        continue
                    reason = binary_source.unavailable()
                    if reason is not None:
                        self.tried.append(f"{binary_source.label}: {reason}")
                        continue
                    outcome = self._attempt(
                        binary_source.name,
                        binary_source.label,
                        installer,
                        partial(binary_source.install_kubernetes, version, progress=self.progress),
                    )
                    if isinstance(outcome, Assets):
                        return outcome
        raise AssetsError(self._nothing_worked(version))

    def _attempt(
        self, source: str, label: str, installer: store.Installer, producer: store.Producer
    ) -> Assets | AssetsError:
        """Install one way (``source``, filling the entry with ``producer``): the assets, or the error
        when other ways may still be tried (noted in ``tried`` as ``label``); raised when ``source``
        was asked for."""
        try:
            return _assets(installer.install(source, producer), source)
        except AssetsError as error:
            if self.source == source:
                raise
            self.tried.append(f"{label}: {_indented(error)}")
            return error

    def _download_hosts(self) -> str:
        hosts = dict.fromkeys(
            download.host_of(url) for url in (self.settings.index_url, self.settings.release_url)
        )
        return " and ".join(hosts)

    def _nothing_worked(self, version: str) -> str:
        tried = "\n".join(f"  - {line}" for line in self.tried)
        quoted = shlex.quote(version)
        return (
            f"could not get control-plane binaries for Kubernetes {version}. Tried:\n{tried}\n"
            "Three ways out:\n"
            "  1. point KTEST_ASSETS at a directory holding kube-apiserver, etcd, "
            "kube-controller-manager and kubectl of that version\n"
            "     (setup-envtest's `setup-envtest use -p path` prints one);\n"
            f"  2. allow the download: make {self._download_hosts()} reachable (or set "
            "KTEST_ENVTEST_INDEX_URL / KTEST_K8S_RELEASE_URL to a mirror), then run "
            f"`ktest binaries install --k8s-version {quoted} --source download`;\n"
            f"{self._build_remedy(version, quoted)}"
        )

    def _build_remedy(self, version: str, quoted: str) -> str:
        registered = sources.binary_sources()
        if registered:
            return "\n".join(f"  3. {binary_source.remedy(version)}" for binary_source in registered)
        return (
            f"  3. build them from Go modules: {sources.INSTALL_OFFLINE}, install Go "
            "(https://go.dev/dl/) with access to a Go module proxy, then\n"
            f"     `ktest binaries install --k8s-version {quoted}` builds them once (minutes)."
        )


def _assets(entry: store.Entry, origin: str | None = None) -> Assets:
    """``origin``: how this call got the entry; an entry found installed is ``cache``."""
    if origin is None:
        origin = "setup-envtest" if entry.origin == "setup-envtest" else "cache"
    return Assets(
        directory=entry.directory,
        version=entry.version,
        origin=origin,
        missing=tuple(n for n in OPTIONAL_BINARIES if n in entry.missing),
    )


def _indented(error: BaseException) -> str:
    """The whole message, continuation lines indented under their list item."""
    return str(error).strip().replace("\n", "\n    ")


def _first_line(error: BaseException) -> str:
    return str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
