"""``ktest down --backend existing``: delete what killed test sessions left in an existing cluster.

A session on backend ``existing`` deletes its test namespaces as it ends; ``kill -9`` leaves
them. The next session on that cluster deletes them as it starts; this command does it now.
Only namespaces ktest created, whose holder ran on this machine and is dead, are deleted
(:func:`ktest.cluster.namespaces.sweep_dead_namespaces`). The module imports nothing heavy:
the ``ktest`` command loads every backend's ``cli`` part to build its parser.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

from ktest.config import add_setting_option, specs_by_name
from ktest.errors import ConfigError


def register(subparsers: Any, parsers: dict[str, argparse.ArgumentParser]) -> None:
    """The registry's ``cli``: ``ktest down --backend existing --context NAME [--kubeconfig PATH]``."""
    add_setting_option(parsers["down"], "kubeconfig")
    add_setting_option(parsers["down"], "context")


def down_from_args(args: argparse.Namespace) -> int:
    """The registry's ``down``: sweep the namespaces of dead sessions from the named context's cluster."""
    from ktest.backends.existing.backend import ExistingBackend
    from ktest.config import default_kubeconfig

    context = getattr(args, "context", None)
    if not context:
        spec = specs_by_name()["context"]
        raise ConfigError(
            "ktest down --backend existing needs the kubeconfig context named explicitly, so that it "
            f"cannot touch another cluster by accident: give --context NAME (or set {spec.env})"
        )
    kubeconfig = Path(args.kubeconfig).expanduser() if getattr(args, "kubeconfig", None) else None
    kubeconfig = kubeconfig or default_kubeconfig(os.environ)
    if not kubeconfig.is_file():
        raise ConfigError(f"ktest down --backend existing: kubeconfig {kubeconfig} does not exist")
    backend = ExistingBackend(kubeconfig, context)
    backend.close()
    sweep = backend.namespace_sweep
    summary = sweep.summary() or "no namespaces of killed ktest sessions of this machine"
    for line in summary.splitlines():
        print(f"ktest down: {line}", file=sys.stderr)
    return 1 if sweep.error else 0
