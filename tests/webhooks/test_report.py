"""A failing test's report shows its webhook calls (an inner pytest run through the plugin)."""

from __future__ import annotations

import pytest
from inner_runs import run_inner

FAILING = """
from ktest.webhooks import Denied, Handlers

def test_a_configmap(cluster, namespace, webhooks):
    handlers = Handlers()

    @handlers.validate("", "v1", "configmaps")
    def never(request):
        raise Denied("no configmaps today")

    webhooks(handlers=handlers, timeout_seconds=3)
    cluster.create({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}}, namespace=namespace)
"""


def test_the_failure_report_lists_the_webhook_calls(
    pytester: pytest.Pytester, inner_env: dict[str, str]
) -> None:
    result = run_inner(pytester, FAILING)
    result.assert_outcomes(failed=1)
    result.stdout.re_match_lines(
        [
            r".* ktest: webhooks test-a-configmap-[0-9a-f]{6} .*",
            r"webhooks served at https://127\.0\.0\.1:\d+ "
            r"\(only the API server's client certificate gets through\)$",
            r"  validating never\.configmaps\.core -> python handler never, failurePolicy Fail, timeout 3s",
            r"calls \(1\):",
            r"  validating webhook never\.configmaps\.core \(python handler never, failurePolicy Fail\): "
            r"CREATE ConfigMap test-.*/x -> DENIED: no configmaps today \[\d+ ms\]",
        ]
    )
