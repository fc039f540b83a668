"""Control-plane binaries (kube-apiserver, etcd, kube-controller-manager, kubectl) per version.

``resolve_assets("1.37")`` returns an ``Assets`` directory, reusing what is
installed, downloading (SHA-512 verified) or building from Go modules.

The names are imported lazily: settings that only parse a version selector
(``ktest.assets.selectors``) must not pull in the download and build machinery,
which would cost every pytest run with ``KTEST_K8S_VERSION`` set ~40 ms.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ktest.lazy import lazy_attributes

if TYPE_CHECKING:
    from ktest.assets.bundle import ALL_BINARIES as ALL_BINARIES
    from ktest.assets.bundle import OPTIONAL_BINARIES as OPTIONAL_BINARIES
    from ktest.assets.bundle import REQUIRED_BINARIES as REQUIRED_BINARIES
    from ktest.assets.bundle import Assets as Assets
    from ktest.assets.progress import Progress as Progress
    from ktest.assets.resolve import resolve_assets as resolve_assets
    from ktest.assets.selectors import KubeVersion as KubeVersion
    from ktest.assets.selectors import Selector as Selector
    from ktest.assets.selectors import parse_selector as parse_selector
    from ktest.assets.sources import SOURCES as SOURCES

_EXPORTS = {
    "ALL_BINARIES": "ktest.assets.bundle",
    "OPTIONAL_BINARIES": "ktest.assets.bundle",
    "REQUIRED_BINARIES": "ktest.assets.bundle",
    "Assets": "ktest.assets.bundle",
    "Progress": "ktest.assets.progress",
    "SOURCES": "ktest.assets.sources",
    "resolve_assets": "ktest.assets.resolve",
    "Selector": "ktest.assets.selectors",
    "parse_selector": "ktest.assets.selectors",
    "KubeVersion": "ktest.assets.selectors",
}

__all__ = sorted(_EXPORTS)

if not TYPE_CHECKING:  # hidden from type checkers, so that a misspelt name is an error, not Any
    __getattr__, __dir__ = lazy_attributes(__name__, _EXPORTS, globals())
