"""``ktest up | status | down``: a cluster kept warm between test runs.

This module holds the commands; each backend owns its part (``up``, ``down``, ``status``
and its options, the ``cli`` part, in ``ktest.backend_registry``): bare's warm control
plane is :mod:`ktest.backends.bare.cli`, kind's kept cluster :mod:`ktest.backends.kind.cli`.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from ktest import backend_registry as registry
from ktest.config import Source, add_setting_option, specs_by_name

DEFAULT_BACKEND = "bare"
"""``ktest up`` and ``ktest down`` without ``--backend``."""


def register(subparsers: Any) -> dict[str, argparse.ArgumentParser]:
    """Add ``up``, ``status`` and ``down`` to the ``ktest`` parser; the parsers of ``up`` and
    ``down`` by name, for the backends' own options (their ``cli`` part)."""
    up = subparsers.add_parser(
        "up",
        help="start a control plane in the background, kept warm between test runs",
        description="Start etcd + kube-apiserver + kube-controller-manager in a background process "
        "that outlives this command; test runs with --ktest-reuse attach to it.",
    )
    add_setting_option(up, "k8s_version")
    up.add_argument(
        "--backend",
        choices=registry.names("up"),
        default=DEFAULT_BACKEND,
        help="; ".join(f"{name}: {registry.spec(name).summary}" for name in registry.names("up"))
        + f" (default: {DEFAULT_BACKEND})",
    )
    up.set_defaults(handler=_up)

    status = subparsers.add_parser("status", help="show the warm clusters started by `ktest up`")
    status.set_defaults(handler=_status)

    down = subparsers.add_parser("down", help="stop a warm cluster started by `ktest up`")
    down.add_argument(
        "--backend",
        choices=registry.names("down"),
        default=DEFAULT_BACKEND,
        help=f"whose warm clusters (default: {DEFAULT_BACKEND})",
    )
    down.add_argument("--all", action="store_true", help="stop every warm control plane")
    down.set_defaults(handler=_down)
    return {"up": up, "down": down}


def _up(args: argparse.Namespace) -> int:
    spec = specs_by_name()["k8s_version"]
    version = spec.parse(args.k8s_version or "", spec, Source("option", "option --k8s-version", Path.cwd()))
    up = registry.spec(args.backend).load("up")
    assert up is not None
    return int(up(args, version))


def _status(args: argparse.Namespace) -> int:
    """``ktest status``: every backend's lines."""
    for _backend, status in registry.parts("status"):
        for line in status():
            print(line)
    return 0


def _down(args: argparse.Namespace) -> int:
    """``ktest down``: the chosen backend's part (``--backend``, or an option of its own)."""
    down = registry.spec(args.backend).load("down")
    assert down is not None  # --backend offers only backends with a ``down``
    return int(down(args))
