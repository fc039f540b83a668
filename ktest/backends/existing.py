"""Backend ``existing``: any cluster reachable through a kubeconfig context.

Safety first: the context must be named explicitly and be the kubeconfig's
current context, so a test run cannot land on a production cluster because
someone's kubeconfig pointed there. ktest never deletes what it did not create
(namespaces it creates carry ``app.kubernetes.io/managed-by=ktest``, and only
those are deleted).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from ktest.backends.base import Backend, ClusterShare
from ktest.cluster import Cluster
from ktest.errors import ConfigError


class ExistingBackend(Backend):
    """A cluster ktest did not start: nothing is stopped on :meth:`close`."""

    name = "existing"

    def __init__(self, kubeconfig: Path, context: str) -> None:
        check_context(kubeconfig, context)
        super().__init__(Cluster(kubeconfig, context=context, controllers=None, name=context))
        self.kubeconfig = kubeconfig
        self.context = context

    def describe(self) -> str:
        cluster = self.cluster
        return f"existing cluster {cluster.server} (context {self.context}, Kubernetes {cluster.version})"

    def share(self) -> ClusterShare:
        return ClusterShare(
            kubeconfig=str(self.kubeconfig),
            version=self.cluster.version,
            description=self.describe(),
            context=self.context,
        )


def check_context(kubeconfig: Path, context: str) -> None:
    """Raise ConfigError unless ``context`` exists in ``kubeconfig`` and is its current context."""
    try:
        config: Any = yaml.safe_load(kubeconfig.read_text())
    except (OSError, yaml.YAMLError) as error:
        raise ConfigError(f"backend existing: cannot read kubeconfig {kubeconfig}: {error}") from None
    if not isinstance(config, dict):
        raise ConfigError(f"backend existing: {kubeconfig} is not a kubeconfig (no mapping at the top)")
    names = [entry.get("name") for entry in config.get("contexts") or () if isinstance(entry, dict)]
    if context not in names:
        raise ConfigError(
            f"backend existing: context {context!r} is not in {kubeconfig} "
            f"(it has: {', '.join(map(str, names)) or 'no contexts'}); name one of those"
        )
    current = config.get("current-context") or ""
    if current != context:
        raise ConfigError(
            f"backend existing: refusing to run: the current context of {kubeconfig} is "
            f"{current or '(unset)'!r}, not {context!r} as named for the tests. Switch to it first "
            f"(kubectl --kubeconfig {kubeconfig} config use-context {context}) or name {current!r} "
            "if that is really the cluster to test against"
        )
