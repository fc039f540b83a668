"""Backend kind's own settings rows (registered through its ``BackendSpec``'s ``settings`` part).

``ktest.config`` resolves them with every other setting (option > environment > ini > default);
a test reads them as ``settings.kind_image``. The module imports only the row type: the ``ktest``
command and the pytest plugin load it to build their options.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ktest.config_values import Spec, flag, parse_image_reference, parse_path, setting
from ktest.extension import ForeignOption

if TYPE_CHECKING:
    from ktest.config import Settings

# fmt: off
ROWS: tuple[Spec, ...] = (
    setting("kind_config", parse_path,
             "extra kind Cluster config (YAML file) merged with what ktest needs (backend kind)", "(none)",
             metavar="PATH"),
    setting("kind_image", parse_image_reference,
             "node image of the kind cluster (backend kind): name:tag, or name:tag@sha256:<digest> to pin "
             "it; it must be in the Docker engine or pullable", "a local ktest image for the version, else "
             "kindest/node:v<version>", metavar="IMAGE"),
    flag("keep_cluster",
          "keep the kind cluster after the run and print how to attach or delete it (backend kind)"),
    flag("kind_pool",
          "warm pool (backend kind): claim a spare cluster made in the background by an earlier run "
          "(attach in about a second), and make the next spare once this run's cluster is up; "
          "`ktest down --kind` deletes spares"),
)
# fmt: on

PYTEST_KIND = ("pytest-kind", "kind_cluster")
"""Whose options these are, and ktest's fixture that takes the place of that plugin's."""

# fmt: off
PYTEST_KIND_OPTIONS: tuple[ForeignOption, ...] = (
    ForeignOption("keep_cluster", "--keep-cluster", *PYTEST_KIND, "keep_cluster", default=False),
    ForeignOption("kind_image", "--kind-image", *PYTEST_KIND, "kind_image"),
    ForeignOption("cluster_name", "--cluster-name", *PYTEST_KIND, default="pytest-kind", refusal=(
        "ktest names its kind clusters itself (ktest-run-<random>, so it never touches a cluster of yours "
        "and parallel runs never collide); remove it. To keep the cluster after the run use "
        "--ktest-keep-cluster; to use one cluster for many runs, `ktest up --backend kind` and "
        "--ktest-reuse")),
    ForeignOption("kubeconfig", "--kubeconfig", *PYTEST_KIND, refusal=(
        "ktest writes the cluster's kubeconfig into the cluster's private directory "
        "(kind_cluster.kubeconfig_path names it); to test a cluster of yours instead use --ktest-backend "
        "existing with --ktest-kubeconfig and --ktest-context")),
    ForeignOption("kind_bin", "--kind-bin", *PYTEST_KIND, refusal=(
        "ktest runs the kind release its node images are made for (`ktest kind install`); to run another "
        "kind binary set KTEST_KIND=<path>")),
    ForeignOption("kind_kubectl_bin", "--kind-kubectl-bin", *PYTEST_KIND, refusal=(
        "ktest runs a kubectl matching the cluster's version (its binary cache); to run another set "
        "KTEST_KUBECTL=<path>")),
)
# fmt: on
"""pytest-kind's options (and its fork pytest-kind-ng's): taken as kind's settings, or refused
saying what to use instead (the registry's ``foreign_options``)."""


def describe(settings: Settings) -> list[str]:
    """Backend kind's words in the session header's settings line."""
    return ["kind-pool=on"] if settings.kind_pool else []
