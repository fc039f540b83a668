"""Webhook set-up on bare: certificates, install, and the first call the API server makes (medians).

Run: .venv/bin/python bench/webhook_setup.py [--runs 7]
One control plane serves every run. Measured per run:
- certificates: a CA and a serving certificate (``WebhookTLS``);
- Python handlers: ``Webhooks(...).start()`` (certificates, front server, a validating and
  a mutating configuration installed, probes until the API server called both), then the
  first create the webhooks judge; the sum is the set-up the goal (< 1 s) is about;
- Go manager: the same for fixtures/go-webhook-manager's manifests and CRD (admission +
  conversion webhooks) with the manager already running (its own start is in
  bench/operators_start.py); the first run creates the CRD, later ones update its conversion;
- baseline, same run: one ConfigMap create without webhooks (an API round trip).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ktest.cluster import Cluster
from ktest.controlplane import ControlPlane
from ktest.operators import build_go_binary, run_subprocess
from ktest.webhooks import AdmissionRequest, Denied, Handlers, Webhooks
from ktest.webhooks.tls import WebhookTLS

ROOT = Path(__file__).resolve().parent.parent
MANAGER = ROOT / "fixtures" / "go-webhook-manager"


def timed(fn: Callable[..., Any], *args: Any) -> tuple[float, Any]:
    started = time.monotonic()
    result = fn(*args)
    return time.monotonic() - started, result


def handlers() -> Handlers:
    registry = Handlers()

    @registry.validate("", "v1", "configmaps")
    def no_passwords(request: AdmissionRequest) -> None:
        if "password" in (request.object.get("data") or {}):
            raise Denied("no passwords")

    @registry.mutate("", "v1", "configmaps")
    def team(request: AdmissionRequest) -> None:
        request.object["metadata"].setdefault("labels", {})["team"] = "a"

    return registry


def configmap(name: str, namespace: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": namespace}}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    binary = build_go_binary(MANAGER)
    samples: dict[str, list[float]] = {}

    def add(name: str, seconds: float) -> None:
        samples.setdefault(name, []).append(seconds)

    with (
        ControlPlane() as plane,
        Cluster(plane.kubeconfig, webhook_host="127.0.0.1") as cluster,
        cluster.namespace(prefix="bench", background=True) as ns,
    ):
        for run in range(args.runs):
            with tempfile.TemporaryDirectory() as directory:
                add(
                    "certificates (CA + serving)",
                    timed(WebhookTLS, Path(directory), ["127.0.0.1"])[0],
                )
            add(
                "baseline: ConfigMap create, no webhooks",
                timed(cluster.create, configmap(f"b{run}", ns))[0],
            )

            wh = Webhooks(cluster, handlers=handlers(), namespaces=[ns])
            start, _ = timed(wh.start)
            first, _ = timed(cluster.create, configmap(f"p{run}", ns))
            wh.close()
            add("python handlers: start()", start)
            add("python handlers: first judged create", first)
            add("python handlers: set-up total", start + first)

            wh = Webhooks(
                cluster, MANAGER / "config" / "webhook", MANAGER / "config" / "crd", namespaces=[ns]
            )
            manager = [
                binary,
                *wh.controller_runtime_args(),
                "--health-probe-bind-address=127.0.0.1:{port}",
            ]
            with run_subprocess(manager, cluster, ready_http="http://127.0.0.1:{port}/readyz"):
                start, _ = timed(wh.start)
                widget = {
                    "apiVersion": "webhooks.ktest.dev/v1",
                    "kind": "Widget",
                    "metadata": {"name": f"w{run}", "namespace": ns},
                    "spec": {"schedule": "* * * * *"},
                }
                first, _ = timed(cluster.create, widget)
                wh.close()
            if run == 0:  # the CRD is created, not updated: established and served first
                add("go manager: set-up total, first run (CRD created)", start + first)
                continue
            add("go manager (admission + conversion): start()", start)
            add("go manager: first judged create", first)
            add("go manager: set-up total, CRD already installed", start + first)
    baseline = statistics.median(samples["baseline: ConfigMap create, no webhooks"])
    for name, values in samples.items():
        median = statistics.median(values)
        print(f"{median * 1000:9.1f} ms  (x{median / baseline:6.1f} baseline)  {name}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
