"""The job matrix of the reusable workflow: Kubernetes versions x backends x shards, as JSON.

``matrix.py --versions-json versions.json --k8s-versions '["1.37","1.36"]' --backends '["bare","kind"]'
--shards 2`` writes ``matrix`` (``{"include": [...]}`` for ``fromJSON``) and ``cells``. The versions
file is ``ktest versions --json``: ``supported`` (or the word ``supported`` as the version list)
and ``default`` come from there. An unknown version or backend fails here, in the first seconds,
naming the supported ones.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from gha import CIError, fail, set_outputs

BACKENDS = ("bare", "kind")
MAX_SHARDS = 32
_SELECTOR = re.compile(r"^v?1\.(\d+)(?:\.(\d+))?$")


def parse_list(text: str, what: str) -> list[str]:
    """A JSON list (``["1.37", "1.36"]``) or a comma-separated one (``1.37, 1.36``)."""
    stripped = text.strip()
    if stripped.startswith("["):
        try:
            value = json.loads(stripped)
        except ValueError as error:
            raise CIError(f"{what}: {text!r} is not a valid JSON list ({error})") from error
        if not isinstance(value, list):
            raise CIError(f"{what}: expected a JSON list, got {text!r}")
        items = [str(item).strip() for item in value]
    else:
        items = [item.strip() for item in stripped.split(",")]
    items = [item for item in items if item]
    if not items:
        raise CIError(f"{what} is empty; give at least one, e.g. [\"1.37\"]")
    return list(dict.fromkeys(items))


def check_version(text: str, supported: Sequence[str], default: str) -> str:
    """The version as the matrix carries it (``default`` -> the default minor); CIError if unknown."""
    if text in ("default", "latest"):
        return default if text == "default" else supported[0]
    match = _SELECTOR.match(text)
    if match is None or f"1.{match.group(1)}" not in supported:
        raise CIError(
            f"Kubernetes version {text!r} is not supported by ktest; supported: "
            f"{', '.join(supported)} (default {default}), an exact release of one (e.g. "
            f"{supported[0]}.0), 'default' or 'latest'."
        )
    return text.lstrip("v")


def build_matrix(
    versions: Sequence[str], backends: Sequence[str], shards: int, report: dict[str, Any]
) -> list[dict[str, Any]]:
    """One entry per version x backend x shard, in that order."""
    supported = [str(v) for v in report.get("supported", [])]
    if not supported:
        raise CIError("the versions file lists no supported versions; is it `ktest versions --json`?")
    default = str(report.get("default", supported[0]))
    if versions == ["supported"]:
        versions = supported
    checked = list(dict.fromkeys(check_version(v, supported, default) for v in versions))
    for backend in backends:
        if backend not in BACKENDS:
            raise CIError(f"backend {backend!r} is not one of: {', '.join(BACKENDS)}")
    if not 1 <= shards <= MAX_SHARDS:
        raise CIError(f"shards must be between 1 and {MAX_SHARDS}, got {shards}")
    return [
        {
            "k8s-version": version,
            "backend": backend,
            "shard": shard,
            "shards": shards,
            "name": f"{version} {backend}" + (f" {shard}/{shards}" if shards > 1 else ""),
            "artifact": f"{version}-{backend}-{shard}of{shards}",
        }
        for version in checked
        for backend in backends
        for shard in range(1, shards + 1)
    ]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--versions-json", required=True, type=Path, help="`ktest versions --json` output")
    parser.add_argument("--k8s-versions", required=True, help='JSON or comma list, or "supported"')
    parser.add_argument("--backends", default='["bare"]')
    parser.add_argument("--shards", default="1")
    args = parser.parse_args(argv)
    try:
        try:
            report = json.loads(args.versions_json.read_text())
        except (OSError, ValueError) as error:
            raise CIError(f"cannot read {args.versions_json}: {error}") from error
        try:
            shards = int(args.shards)
        except ValueError as error:
            raise CIError(f"shards must be a whole number, got {args.shards!r}") from error
        versions = parse_list(args.k8s_versions, "k8s-versions")
        include = build_matrix(versions, parse_list(args.backends, "backends"), shards, report)
    except CIError as error:
        return fail(error)
    set_outputs({"matrix": json.dumps({"include": include}), "cells": str(len(include))})
    return 0


if __name__ == "__main__":
    sys.exit(main())
