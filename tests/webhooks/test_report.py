"""A failing test's report shows its webhook calls (an inner pytest run through the plugin)."""

from __future__ import annotations

import os

import pytest

from ktest.assets.store import Locations

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


@pytest.fixture(scope="session")
def binary_cache() -> str:
    """The binary cache as seen from the real HOME (pytester moves HOME before a test's body runs)."""
    return os.environ.get("KTEST_CACHE_DIR") or str(Locations.from_env().cache_root)


def test_the_failure_report_lists_the_webhook_calls(
    binary_cache: str, pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = binary_cache
    for name in list(os.environ):
        if name.startswith("KTEST_") and name not in ("KTEST_CACHE_DIR", "KTEST_ASSETS"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("KTEST_CACHE_DIR", cache)
    monkeypatch.setenv("XDG_STATE_HOME", str(pytester.path / "state"))
    pytester.makepyfile(FAILING)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-p", "no:randomly", timeout=120)
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
