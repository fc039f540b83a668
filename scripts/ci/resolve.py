"""Resolve the Kubernetes version a CI job asked for and the cache keys that follow from it.

``python scripts/ci/resolve.py --k8s-version 1.37 --backend kind --os Linux --arch X64``
asks ``ktest versions --json --resolve`` which patch release ``1.37`` is, and
prints (or writes to ``$GITHUB_OUTPUT``) the exact version and the keys:

* binaries: ``ktest-binaries-v1-<os>-<arch>-k8s<patch>-ktest<ktest version>``; restore keys
  fall back to the same patch with another ktest, then to anything of the same OS/arch (the
  restored entries are checked by ``binary_cache.py``, never trusted blindly);
* node image (kind): ``ktest-kind-node-v1-<os>-<arch>-kind<kind version>-k8s<patch>``.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from gha import CIError, fail, set_outputs

BACKENDS = ("bare", "kind")
# Bump when what a cache holds changes shape, so old caches are not restored into new layouts.
CACHE_LAYOUT = "v1"
NODE_IMAGE_REPOSITORY = "kindest/node"


@dataclass(frozen=True)
class CacheKeys:
    binaries: str
    binaries_restore: tuple[str, ...]
    node_image: str


def cache_keys(patch: str, ktest_version: str, kind_version: str, runner_os: str, arch: str) -> CacheKeys:
    """Keys for one resolved patch version; the restore keys go from most to least specific."""
    base = f"ktest-binaries-{CACHE_LAYOUT}-{runner_os}-{arch}-"
    same_patch = f"{base}k8s{patch}-"
    return CacheKeys(
        binaries=f"{same_patch}ktest{ktest_version}",
        binaries_restore=(same_patch, base),
        node_image=f"ktest-kind-node-{CACHE_LAYOUT}-{runner_os}-{arch}-kind{kind_version}-k8s{patch}",
    )


def ktest_versions(selector: str | None, ktest: Sequence[str]) -> dict[str, Any]:
    """``ktest versions --json --resolve [--k8s-version SELECTOR]``; CIError with ktest's own message."""
    command = [*ktest, "versions", "--json", "--resolve"]
    if selector is not None:
        command += ["--k8s-version", selector]
    try:
        finished = subprocess.run(command, capture_output=True, text=True, check=False, timeout=300)
    except (OSError, subprocess.TimeoutExpired) as error:
        raise CIError(f"could not run {' '.join(command)}: {error}. Is ktest installed?") from error
    if finished.returncode != 0:
        detail = finished.stderr.strip().removeprefix("ktest: error: ")
        raise CIError(f"k8s-version {selector!r}: {detail or 'ktest versions failed'}")
    try:
        report = json.loads(finished.stdout)
    except ValueError as error:
        raise CIError(f"`ktest versions --json` printed no JSON: {finished.stdout[:200]!r}") from error
    if not isinstance(report, dict):
        raise CIError(f"`ktest versions --json` printed {type(report).__name__}, not an object")
    return report


def resolve(selector: str, backend: str, report: dict[str, Any]) -> str:
    """The exact patch release for ``selector``, or CIError saying which versions exist."""
    if backend not in BACKENDS:
        raise CIError(f"backend {backend!r} is not one of: {', '.join(BACKENDS)}")
    patch = (report.get("resolved") or {}).get(selector)
    if not patch:
        supported = ", ".join(report.get("supported", []))
        raise CIError(
            f"no Kubernetes release matching {selector!r} could be found (supported minors: "
            f"{supported}); the version listings (Go module proxy, envtest index) were not "
            "reachable or list none. Give an exact release such as 1.37.2."
        )
    return str(patch)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--k8s-version", required=True, help="1.37, 1.37.2, latest or default")
    parser.add_argument("--backend", default="bare")
    parser.add_argument("--os", dest="runner_os", required=True, help="runner.os, e.g. Linux")
    parser.add_argument("--arch", required=True, help="runner.arch, e.g. X64")
    parser.add_argument("--ktest", default="ktest", help="the ktest command (default: ktest)")
    args = parser.parse_args(argv)
    try:
        selector = args.k8s_version.strip() or "default"
        report = ktest_versions(None if selector == "default" else selector, args.ktest.split())
        if selector == "default":
            selector = str(report["default"])
        patch = resolve(selector, args.backend, report)
        keys = cache_keys(
            patch, str(report["ktest_version"]), str(report["kind_version"]), args.runner_os, args.arch
        )
    except CIError as error:
        return fail(error)
    set_outputs({
        "k8s-version": patch,
        "ktest-version": str(report["ktest_version"]),
        "kind-version": str(report["kind_version"]),
        "binaries-key": keys.binaries,
        "binaries-restore-keys": "\n".join(keys.binaries_restore),
        "node-image": f"{NODE_IMAGE_REPOSITORY}:v{patch}",
        "node-image-key": keys.node_image,
    })
    return 0


if __name__ == "__main__":
    sys.exit(main())
