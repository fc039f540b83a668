"""A tiny hand-written operator: copies ConfigMaps labelled ``ktest.dev/copy=true``
into ``<name>-copy`` (owned by the source), with the official Python client.

``mirror_loop`` is the sync form (list, then watch from the list's resourceVersion);
``async_mirror`` the asyncio form (re-lists on a short period).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import kubernetes
from kubernetes.client.exceptions import ApiException

LABEL = "ktest.dev/copy"
SUFFIX = "-copy"
log = logging.getLogger("sample_operators.mirror")


def core_api(kubeconfig: str | Path) -> kubernetes.client.CoreV1Api:
    client = kubernetes.config.new_client_from_config(config_file=str(kubeconfig), persist_config=False)
    return kubernetes.client.CoreV1Api(client)


def reconcile(api: kubernetes.client.CoreV1Api, source: Any) -> None:
    meta = source.metadata
    if meta.deletion_timestamp is not None:
        return
    mirror = {
        "metadata": {
            "name": meta.name + SUFFIX,
            "ownerReferences": [
                {
                    "apiVersion": "v1",
                    "kind": "ConfigMap",
                    "name": meta.name,
                    "uid": meta.uid,
                    "controller": True,
                }
            ],
        },
        "data": source.data or {},
    }
    try:
        try:
            api.create_namespaced_config_map(meta.namespace, mirror)
            log.info("created %s/%s", meta.namespace, meta.name + SUFFIX)
        except ApiException as error:
            if error.status != 409:
                raise
            api.patch_namespaced_config_map(meta.name + SUFFIX, meta.namespace, {"data": source.data or {}})
            log.info("updated %s/%s", meta.namespace, meta.name + SUFFIX)
    except ApiException as error:
        if error.status == 404 or "NamespaceTerminating" in str(error.body):
            log.info("skipped %s/%s: its namespace is going away", meta.namespace, meta.name)
            return
        raise


def _list(api: kubernetes.client.CoreV1Api, namespace: str | None, **kwargs: Any) -> Any:
    selector = f"{LABEL}=true"
    if namespace:
        return api.list_namespaced_config_map(namespace, label_selector=selector, **kwargs)
    return api.list_config_map_for_all_namespaces(label_selector=selector, **kwargs)


def mirror_loop(
    kubeconfig: str | Path,
    stop: threading.Event,
    ready: Callable[[], None],
    namespace: str | None = None,
) -> None:
    """List, mark ready, then watch in 1-second slices so that ``stop`` is honoured promptly."""
    api = core_api(kubeconfig)
    version = None
    while not stop.is_set():
        if version is None:
            listing = _list(api, namespace)
            for item in listing.items:
                reconcile(api, item)
            version = listing.metadata.resource_version
            log.info("watching configmaps labelled %s=true", LABEL)
            ready()
        watcher = kubernetes.watch.Watch()
        try:
            # The client finds the object type from the method's docstring: pass the method itself.
            method, args = (
                (api.list_namespaced_config_map, [namespace])
                if namespace
                else (api.list_config_map_for_all_namespaces, [])
            )
            stream = watcher.stream(
                method, *args, label_selector=f"{LABEL}=true", resource_version=version, timeout_seconds=1
            )
            for event in stream:
                version = event["object"].metadata.resource_version
                if event["type"] in ("ADDED", "MODIFIED"):
                    reconcile(api, event["object"])
                if stop.is_set():
                    break
        except ApiException as error:
            if error.status != 410:
                raise
            version = None  # too old: list again
        finally:
            watcher.stop()
    log.info("stopped")


def sync_operator(ctx: Any) -> None:
    """The ``run_callable`` entry point of the sync form."""
    mirror_loop(ctx.kubeconfig, ctx.stop, ctx.ready)


async def async_mirror(ctx: Any) -> None:
    """The asyncio form: re-list every 0.1 s until ``ctx.stop`` (an asyncio.Event) is set."""
    api = core_api(ctx.kubeconfig)
    while not ctx.stop.is_set():
        listing = await asyncio.to_thread(_list, api, None)
        for item in listing.items:
            if item.metadata.name.endswith(SUFFIX):
                continue
            await asyncio.to_thread(reconcile, api, item)
        ctx.ready()
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(ctx.stop.wait(), 0.1)
    log.info("stopped")
