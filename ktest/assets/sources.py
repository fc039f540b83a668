"""Binary sources from other distributions: how ``ktest binaries install`` grows.

ktest itself finds binaries a user points at, reuses its cache and downloads
envtest's releases. A machine that cannot download needs another way: a
*binary source*, registered by another distribution as an entry point in the
group ``ktest.binary_sources`` (``ktest-offline``, in this repository's
``offline/``, builds from Go modules). Entry points are read only when a
resolution gets that far, and the core never imports a source's package.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from ktest.assets.progress import Progress
from ktest.errors import KtestError

SOURCES = ("auto", "download", "build")
"""How a resolution may obtain binaries (``ktest binaries install --source``): ``auto`` reuses, then
downloads, then builds; ``download`` and ``build`` only that way."""
BINARY_SOURCES_GROUP = "ktest.binary_sources"
OFFLINE_DISTRIBUTION = "ktest-offline"
INSTALL_OFFLINE = (
    f"pip install {OFFLINE_DISTRIBUTION} (from ktest's repository: pip install -e ./offline)"
)


@runtime_checkable
class BinarySource(Protocol):
    """A way to install binaries other than the download, offered by another distribution."""

    name: str
    """Its ``--source`` value (``build``)."""
    label: str
    """What it does, for lists of what was tried (``build from Go modules``)."""

    def unavailable(self) -> str | None:
        """Why it cannot run on this machine (``go`` is not on PATH), or None when it can."""

    def install_kubernetes(self, version: str, destination: Path, progress: Progress) -> dict[str, Any]:
        """Put kube-apiserver, kube-controller-manager, kubectl and etcd of ``version`` into the
        directory ``destination``; returns facts for the cache entry's metadata. Raises AssetsError."""

    def remedy(self, version: str) -> str:
        """How a user makes this source work, for the error when nothing worked."""


def load_plugins(group: str, kind: type[Any]) -> tuple[Any, ...]:
    """Every entry point of ``group``, loaded and called (each names a class or factory taking no
    arguments); KtestError naming the entry point when one fails to load or is not a ``kind``."""
    found = []
    for entry in sorted(entry_points(group=group), key=lambda entry: entry.name):
        try:
            factory: Callable[[], Any] = entry.load()
            plugin = factory()
        except Exception as error:  # a broken plug-in: name it, do not let it pass as missing
            raise KtestError(
                f"the {group} entry point {entry.name} = {entry.value} failed to load: "
                f"{type(error).__name__}: {error}.\nReinstall the distribution that provides it "
                f"({entry.dist.name if entry.dist else 'unknown'}), or uninstall it."
            ) from error
        if not isinstance(plugin, kind):
            raise KtestError(
                f"the {group} entry point {entry.name} = {entry.value} gave {plugin!r}, "
                f"which is not a {kind.__name__}"
            )
        found.append(plugin)
    return tuple(found)


@cache
def binary_sources() -> tuple[BinarySource, ...]:
    """The registered binary sources, by name (read once per process)."""
    return load_plugins(BINARY_SOURCES_GROUP, BinarySource)


def not_installed_note() -> str:
    """What a list of tried ways says when no distribution adds a binary source."""
    return f"build from Go modules: {OFFLINE_DISTRIBUTION} is not installed ({INSTALL_OFFLINE})"
