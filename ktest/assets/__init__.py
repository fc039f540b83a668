"""Control-plane binaries (kube-apiserver, etcd, kube-controller-manager, kubectl) per version.

``resolve_assets("1.37")`` returns an ``Assets`` directory, reusing what is
installed, downloading (SHA-512 verified) or building from Go modules.
"""

from ktest.assets.assets import ALL_BINARIES, OPTIONAL_BINARIES, REQUIRED_BINARIES, Assets
from ktest.assets.progress import Progress
from ktest.assets.resolve import SOURCES, resolve_assets
from ktest.assets.selectors import Selector, parse_selector

__all__ = [
    "ALL_BINARIES",
    "OPTIONAL_BINARIES",
    "REQUIRED_BINARIES",
    "SOURCES",
    "Assets",
    "Progress",
    "Selector",
    "parse_selector",
    "resolve_assets",
]
