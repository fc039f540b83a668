# ruff: noqa: E501, B018, F821
"""Planted misuse of ktest's public API. tests/test_typing.py requires each type checker to
report each line marked ``# expect: <mypy error code> | <pyright rule>`` with that code, and
nothing else; a ``reveal_type`` marked ``# reveals: <regex>`` must reveal a type matching it
(with ``Any``, as before ktest's exports had types, nothing here would be reported)."""

from __future__ import annotations

import ktest
import ktest.assertions
import ktest.assertions.aio
import ktest.extension
import ktest.operators
import ktest.proxy
import ktest.webhooks


def check() -> bool:
    return True


def test_misuse(cluster: ktest.Cluster, namespace: str) -> None:
    ktest.eventually(check, timeout="soon")  # expect: arg-type | reportArgumentType
    ktest.operators.run_kopf("my_op.handlers", namespace)  # expect: call-overload | reportArgumentType
    ktest.operators.run_kopf("my_op.handlers", cluster, namespaces=[cluster])  # expect: list-item | reportArgumentType
    ktest.assert_has_finalizer(cluster, ("example.com/v1", "Widget", "w", namespace))  # expect: call-arg | reportCallIssue
    ktest.consistently(check, duration="2s")  # expect: arg-type | reportArgumentType
    ktest.eventualy(check)  # expect: attr-defined | reportAttributeAccessIssue
    ktest.operators.run_kopff("my_op.handlers", cluster)  # expect: attr-defined | reportAttributeAccessIssue
    ktest.assertions.assert_gonne(cluster, ("v1", "ConfigMap", "c", namespace))  # expect: attr-defined | reportAttributeAccessIssue
    ktest.proxy.Rules  # expect: attr-defined | reportAttributeAccessIssue
    ktest.webhooks.Webhook  # expect: attr-defined | reportAttributeAccessIssue


def test_types_are_not_any(cluster: ktest.Cluster) -> None:
    reveal_type(ktest.eventually(lambda: 3))  # reveals: int
    reveal_type(ktest.Cluster("kubeconfig"))  # reveals: (ktest\.cluster\.cluster\.)?Cluster
    reveal_type(ktest.operators.run_kopf("my_op.handlers", cluster))  # reveals: (ktest\.operators\.kopf\.runner\.)?KopfOperator
    reveal_type(ktest.operators.run_kopf("my_op.handlers", cluster).registry)  # reveals: (kopf\.[\w.]+\.)?OperatorRegistry
    reveal_type(ktest.operators.run_kopf("my_op.handlers", cluster).settings)  # reveals: (kopf\.[\w.]+\.)?OperatorSettings
    reveal_type(ktest.proxy.Rule)  # reveals: type\[Rule\]|def .*-> ktest\.proxy\.rules\.Rule
    reveal_type(ktest.webhooks.Webhooks)  # reveals: type\[Webhooks\]|def .*-> ktest\.webhooks\.webhook_set\.Webhooks


async def test_async_misuse(cluster: ktest.Cluster, namespace: str) -> None:
    await ktest.assertions.aio.assert_gone(cluster, ("v1", "ConfigMap", "c", namespace), timeout="1m")  # expect: arg-type | reportArgumentType
    await ktest.assertions.aio.assert_has_finalizer(cluster, ("v1", "ConfigMap", "c", namespace))  # expect: call-arg | reportCallIssue
    await ktest.assertions.aio.assert_gonne(cluster, ("v1", "ConfigMap", "c", namespace))  # expect: attr-defined | reportAttributeAccessIssue


async def test_async_types_are_not_any(cluster: ktest.Cluster, namespace: str) -> None:
    widget = ("example.com/v1", "Widget", "w", namespace)
    reveal_type(ktest.assertions.aio.assert_gone)  # reveals: def \(cluster: ktest\.cluster\.cluster\.Cluster, obj: .*, \*, timeout: .*\) -> typing\.Awaitable\[None\]|\(cluster: Cluster, obj: .*, \*, timeout: .*\) -> Awaitable\[None\]
    reveal_type(await ktest.assertions.aio.assert_status_subresource(cluster, widget))  # reveals: (ktest\.assertions\.status\.)?StatusSubresourceReport
    reveal_type(await ktest.assertions.aio.assert_has_finalizer(cluster, widget, "example.com/cleanup"))  # reveals: (builtins\.)?dict\[(builtins\.)?str, Any\]
    reveal_type(await ktest.assertions.aio.finalizer_scenario(cluster, widget, "example.com/cleanup"))  # reveals: (ktest\.assertions\.finalizers\.)?FinalizerScenario


def test_the_extension_door_is_typed() -> None:
    ktest.extension.BackendSpec("k3d", "k3d clusters", open="ktest_k3d:open_k3d", nodes="sometimes")  # expect: arg-type | reportArgumentType
    ktest.extension.BackendSpc  # expect: attr-defined | reportAttributeAccessIssue
    reveal_type(ktest.extension.setting("k3d_image", ktest.extension.parse_text, "its image", "(none)"))  # reveals: (ktest\.config_values\.)?Spec
