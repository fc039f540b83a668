"""Which Kubernetes versions each source knows, to turn ``1.37``/``latest`` into ``1.37.2``.

Sources: installed entries (no network), the Go module proxy (``go list -m
-versions k8s.io/kubernetes``) and the envtest index. Remote answers are kept
in ``versions.json`` in the cache for a few hours, so resolving a selector in a
test session costs no network round trip; failures are remembered briefly so
an offline machine does not retry on every call.
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from ktest.assets import download, store
from ktest.assets.progress import Progress
from ktest.assets.selectors import sort_versions
from ktest.base.process import run_captured
from ktest.errors import AssetsError

FRESH_SECONDS = 6 * 3600.0
RETRY_FAILED_SECONDS = 600.0
GO_LIST_TIMEOUT = 60.0


@dataclass
class KnownVersions:
    """Versions per source (``installed``, ``Go module proxy``, ``envtest index``) and failures."""

    by_source: dict[str, list[str]] = field(default_factory=dict)
    failures: dict[str, str] = field(default_factory=dict)

    def all(self) -> list[str]:
        return sort_versions(v for versions in self.by_source.values() for v in versions)

    def describe(self) -> str:
        parts = [
            f"{source}: {', '.join(versions[:6]) or 'none'}"
            + (" ..." if len(versions) > 6 else "")
            for source, versions in self.by_source.items()
        ]
        parts += [
            f"{source}: unavailable ({reason.rstrip('.')})"
            for source, reason in self.failures.items()
        ]
        return "; ".join(parts)


def installed_versions(locations: store.Locations) -> list[str]:
    entries = store.list_cache_entries(locations) + store.list_envtest_entries(locations)
    return sort_versions(entry.version for entry in entries)


def proxy_versions(go: str) -> list[str]:
    """Stable k8s.io/kubernetes versions on the Go module proxy (GOPROXY)."""
    try:
        finished = run_captured(
            [go, "list", "-m", "-versions", "k8s.io/kubernetes"], timeout=GO_LIST_TIMEOUT,
            cwd=tempfile.gettempdir(), env={**os.environ, "GO111MODULE": "on", "GOWORK": "off"},
        )
    except (OSError, subprocess.TimeoutExpired) as error:
        raise AssetsError(f"`go list -m -versions k8s.io/kubernetes` failed: {error}") from error
    if finished.returncode != 0:
        detail = (finished.stderr.strip().splitlines() or ["no output"])[-1]
        raise AssetsError(f"`go list -m -versions k8s.io/kubernetes` failed: {detail}")
    return sort_versions(finished.stdout.split()[1:])


class VersionCache:
    """``versions.json``: remote listings with the time they were fetched."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def _load(self) -> dict[str, dict[str, object]]:
        try:
            data = json.loads(self.path.read_text())
        except (OSError, ValueError):
            return {}
        return data if isinstance(data, dict) else {}

    def lookup(self, key: str, fetch: Callable[[], list[str]]) -> list[str]:
        """Cached versions for ``key`` if fresh, else ``fetch()`` (remembering the outcome)."""
        now = time.time()
        record = self._load().get(key, {})
        fetched = record.get("fetched")
        if isinstance(fetched, (int, float)) and now - fetched < FRESH_SECONDS:
            return [str(v) for v in record.get("versions", [])]  # type: ignore[attr-defined]
        failed = record.get("failed")
        if isinstance(failed, (int, float)) and now - failed < RETRY_FAILED_SECONDS:
            raise AssetsError(f"{record.get('error')} (remembered from {int(now - failed)}s ago)")
        try:
            versions = fetch()
        except AssetsError as error:
            stale = record.get("versions")
            self._store(key, {**record, "failed": now, "error": str(error).splitlines()[0]})
            if isinstance(stale, list) and stale:
                return [str(v) for v in stale]
            raise
        self._store(key, {"fetched": now, "versions": versions})
        return versions

    def _store(self, key: str, record: dict[str, object]) -> None:
        data = self._load()
        data[key] = record
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with tempfile.NamedTemporaryFile(
                "w", dir=self.path.parent, prefix=".versions-", delete=False
            ) as handle:
                json.dump(data, handle, indent=1)
            os.replace(handle.name, self.path)
        except OSError:
            pass  # an unwritable cache only costs a repeated listing


def known_versions(
    locations: store.Locations,
    *,
    go: str | None,
    downloader: download.Downloader | None,
    progress: Progress,
) -> KnownVersions:
    """Versions known to the installed entries and to the remote sources that are enabled."""
    known = KnownVersions()
    known.by_source["installed"] = installed_versions(locations)
    cache = VersionCache(locations.versions_file)
    if downloader is not None:
        url = downloader.settings.index_url
        try:
            known.by_source["envtest index"] = cache.lookup(
                f"index {url} {locations.arch}",
                lambda: download.index_versions(download.fetch_index(downloader), locations.arch),
            )
        except AssetsError as error:
            known.failures["envtest index"] = str(error).splitlines()[0]
    if go is not None:
        try:
            known.by_source["Go module proxy"] = cache.lookup(
                f"goproxy {os.environ.get('GOPROXY', '')}", lambda: proxy_versions(go)
            )
        except AssetsError as error:
            known.failures["Go module proxy"] = str(error).splitlines()[0]
    del progress  # failures are reported by the caller only when they matter
    return known
