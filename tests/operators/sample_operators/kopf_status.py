"""A kopf operator that writes its own ConfigMap (for least-privilege tests): on a labelled
ConfigMap it creates ``<name>-seen`` through kopf-independent client calls."""

from __future__ import annotations

from typing import Any

import kopf

from sample_operators.mirror import core_api


@kopf.on.startup()
def configure(settings: kopf.OperatorSettings, **_: Any) -> None:
    # The operator's role does not cover CRDs or namespaces; kopf must not scan them.
    settings.scanning.disabled = True
    settings.posting.enabled = False


@kopf.on.create("configmaps", labels={"ktest.dev/seen": "true"}, backoff=30)
def seen(name: str, namespace: str, memo: Any, **_: Any) -> None:
    core_api(memo.kubeconfig).create_namespaced_config_map(namespace, {"metadata": {"name": f"{name}-seen"}})
