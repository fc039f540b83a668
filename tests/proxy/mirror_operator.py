"""A tiny operator for the proxy tests: it mirrors ConfigMaps, with switchable mistakes.

For every ConfigMap labelled ``mirror=yes`` in its namespace it keeps a copy
``<name>-copy`` with the same data (read, then a full update carrying the
resourceVersion it read: a real optimistic write). It lists, then watches from
the list's resourceVersion; ``Behaviour`` turns on one mistake at a time:

- ``rewatch=False``: once a watch stream ends, it never watches again;
- ``relist_on_410=False``: after 410 Gone it watches again from "now" without a list;
- ``retry="tight"``: a failed write is retried at once (ignoring Retry-After);
- ``retry="give-up-on-conflict"``: a 409 drops the work for good;
- ``hot=True``: it rewrites the copy on every pass of its loop, changed or not.
"""

from __future__ import annotations

import json
import queue
import threading
import time
from dataclasses import dataclass
from typing import Any

import kubernetes.client
import kubernetes.config
from kubernetes.client.exceptions import ApiException
from kubernetes.watch.watch import iter_resp_lines

from ktest.operators import OperatorContext

LABEL = "mirror=yes"


@dataclass(frozen=True)
class Behaviour:
    rewatch: bool = True
    relist_on_410: bool = True
    retry: str = "backoff"  # backoff (honours Retry-After), tight, give-up-on-conflict
    hot: bool = False


def mirror_operator(behaviour: Behaviour) -> Any:
    def run(ctx: OperatorContext) -> None:
        assert isinstance(ctx.stop, threading.Event)
        assert ctx.namespaces
        namespace = ctx.namespaces[0]
        api = kubernetes.config.new_client_from_config(config_file=str(ctx.kubeconfig), persist_config=False)
        api.user_agent = "mirror-operator"
        core = kubernetes.client.CoreV1Api(api)
        work: queue.Queue[tuple[float, str]] = queue.Queue()
        open_response: list[Any] = []
        watcher = threading.Thread(
            target=_watch_loop, args=(core, namespace, behaviour, work, ctx, open_response),
            daemon=True, name="mirror-watch",
        )
        watcher.start()
        try:
            while not ctx.stop.is_set():
                try:
                    due, name = work.get(timeout=0.05)
                except queue.Empty:
                    continue
                wait = due - time.monotonic()
                if wait > 0 and ctx.stop.wait(wait):
                    break
                try:
                    _mirror(core, namespace, name, behaviour)
                except ApiException as error:
                    if error.status == 404:
                        continue
                    if error.status == 409 and behaviour.retry == "give-up-on-conflict":
                        continue
                    delay = 0.0 if behaviour.retry == "tight" else _retry_delay(error)
                    work.put((time.monotonic() + delay, name))
                if behaviour.hot:
                    work.put((time.monotonic() + 0.01, name))
        finally:
            for response in list(open_response):
                response.shutdown()
            watcher.join(5)
            api.close()

    return run


def _retry_delay(error: ApiException) -> float:
    header = (error.headers or {}).get("Retry-After")
    return max(0.2, float(header)) if header else 0.2


def _mirror(core: kubernetes.client.CoreV1Api, namespace: str, name: str, behaviour: Behaviour) -> None:
    source = core.read_namespaced_config_map(name, namespace)
    copy_name = f"{name}-copy"
    try:
        copy = core.read_namespaced_config_map(copy_name, namespace)
    except ApiException as error:
        if error.status != 404:
            raise
        core.create_namespaced_config_map(
            namespace, {"metadata": {"name": copy_name}, "data": source.data or {}}  # type: ignore[arg-type]
        )
        return
    if copy.data == source.data and not behaviour.hot:
        return
    copy.data = source.data
    if behaviour.hot:
        copy.metadata.annotations = {"mirror/at": str(time.monotonic())}
    core.replace_namespaced_config_map(copy_name, namespace, copy)


def _watch_loop(
    core: kubernetes.client.CoreV1Api,
    namespace: str,
    behaviour: Behaviour,
    work: queue.Queue[tuple[float, str]],
    ctx: OperatorContext,
    open_response: list[Any],
) -> None:
    resource_version: str | None = None
    while not ctx.stop.is_set():
        try:
            if resource_version is None:
                listing = core.list_namespaced_config_map(namespace, label_selector=LABEL)
                for item in listing.items:
                    work.put((0.0, item.metadata.name))
                resource_version = listing.metadata.resource_version
            response = core.list_namespaced_config_map(
                namespace, label_selector=LABEL, watch=True, resource_version=resource_version,
                timeout_seconds=60, _preload_content=False,
            )
            open_response[:] = [response]
            if ctx.stop.is_set():
                return
            ctx.ready()
            for line in iter_resp_lines(response):
                event = json.loads(line)
                obj = event["object"]
                if event["type"] == "ERROR":
                    if obj.get("code") == 410:
                        resource_version = None if behaviour.relist_on_410 else ""
                        break
                    raise RuntimeError(obj)
                resource_version = obj["metadata"]["resourceVersion"]
                if event["type"] in ("ADDED", "MODIFIED"):
                    work.put((0.0, obj["metadata"]["name"]))
                if ctx.stop.is_set():
                    break
            response.release_conn()
            if not behaviour.rewatch:
                return
        except Exception:
            if ctx.stop.wait(0.2):
                return
            resource_version = None
