"""``ktest kind build-image | images | install``: offline kind node images and the kind binary."""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from ktest.assets.progress import format_bytes


def register(subparsers: Any) -> None:
    """Add ``kind`` and its subcommands to the ``ktest`` parser."""
    parser = subparsers.add_parser(
        "kind",
        help="build and list offline kind node images; install the kind binary",
        description=(
            "kind node images built from Go modules and Debian packages, for machines without "
            "access to registry.k8s.io or Docker Hub (with internet, kind's kindest/node is simpler)."
        ),
    )
    commands = parser.add_subparsers(title="subcommands", metavar="SUBCOMMAND")
    parser.set_defaults(handler=lambda _args: _print_help(parser))

    build = commands.add_parser(
        "build-image", help="build the node image for a Kubernetes version (a no-op when it exists)"
    )
    build.add_argument(
        "--k8s-version",
        default=os.environ.get("KTEST_K8S_VERSION") or None,
        metavar="V",
        help="1.37.2, or 1.37 (newest known patch); default: $KTEST_K8S_VERSION or 1.37",
    )
    build.add_argument("--force", action="store_true", help="rebuild even if a matching image exists")
    build.add_argument("--quiet", "-q", action="store_true", help="no progress lines on stderr")
    build.set_defaults(handler=_build_image)

    images = commands.add_parser("images", help="list the local ktest node images and their labels")
    images.add_argument(
        "--all", action="store_true", help="also images made by another recipe or kind version"
    )
    images.set_defaults(handler=_images)

    install = commands.add_parser(
        "install", help="make the kind binary available (KTEST_KIND, PATH or built into the cache)"
    )
    install.add_argument("--quiet", "-q", action="store_true", help="no progress lines on stderr")
    install.set_defaults(handler=_install)


def _print_help(parser: argparse.ArgumentParser) -> int:
    parser.print_help(sys.stderr)
    return 2


def _build_image(args: argparse.Namespace) -> int:
    from ktest.kind.image import build_node_image

    print(build_node_image(args.k8s_version, force=args.force, progress=not args.quiet))
    return 0


def _images(args: argparse.Namespace) -> int:
    from ktest.kind import recipe
    from ktest.kind.image import list_node_images

    found = list_node_images(include_unusable=args.all)
    if not found:
        print(f"no ktest kind node images (repository {recipe.NODE_IMAGE_REPOSITORY})")
        print("build one with: ktest kind build-image [--k8s-version V]")
        return 0
    rows = [["IMAGE", "KUBERNETES", "KIND", "RECIPE", "BUILT", "SIZE", "USABLE"]]
    for info in found:
        rows.append([
            info.reference, info.k8s_version or "-", info.kind_version or "-",
            info.recipe_version or "-", info.build_date or "-", format_bytes(info.size),
            "yes" if info.usable
            else f"no (needs kind {recipe.KIND_VERSION}, recipe {recipe.RECIPE_VERSION})",
        ])
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]) - 1)]
    for row in rows:
        print("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=False)) + "  " + row[-1])
    return 0


def _install(args: argparse.Namespace) -> int:
    from ktest.kind.binary import kind_version_of, resolve_kind

    path = resolve_kind(progress=not args.quiet)
    print(f"kind {kind_version_of(path) or '(unknown version)'}: {path}")
    return 0
