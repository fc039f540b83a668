"""ktest loads beside the other Kubernetes pytest plugins: every ktest option is
``--ktest-...``, so pytest-kubernetes (``--k8s-version``, ``k8s`` fixture) and
pytest-kind's maintained fork pytest-kind-ng (``kind_cluster`` fixture) start in the same run.  No cluster is
created: the inner test only reads the options and settings."""

from __future__ import annotations

import pytest

from ktest.config import SETTINGS

BOTH = """
import pytest

def test_all_three_plugins_are_loaded(request, ktest_settings):
    manager = request.config.pluginmanager
    assert manager.hasplugin("ktest")
    assert manager.hasplugin("pytest-kubernetes")
    assert manager.hasplugin("pytest-kind-ng")
    print("K8S_VERSION", request.config.getoption("--k8s-version"), ktest_settings.k8s_version)
"""


def test_every_ktest_option_is_prefixed() -> None:
    assert [spec.option for spec in SETTINGS if not spec.option.startswith("--ktest-")] == []


def test_ktest_runs_with_pytest_kubernetes_and_pytest_kind(pytester: pytest.Pytester, inner_env: dict
                                                           ) -> None:
    """Both plugins are in the dev extra (not skipped when missing: the inner run fails)."""
    pytester.makepyfile(BOTH)
    # in this process too, a new pytest config loads the plugins from their entry points, as in a user's run
    result = pytester.runpytest_inprocess("-s", "--ktest-k8s-version=1.37", "--k8s-version=1.30")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*K8S_VERSION 1.30 1.37"])
    listing = pytester.runpytest_inprocess("--fixtures")
    assert listing.ret == pytest.ExitCode.OK
    listing.stdout.re_match_lines([r"^kind_cluster \[session scope\] -- .*pytest_kind/plugin.py"])
    listing.stdout.re_match_lines([r"^k8s -- .*pytest_kubernetes/plugin.py"])
    listing.stdout.re_match_lines([r"^cluster \[session scope\] -- .*ktest/plugin/fixtures.py"])


def test_the_old_spelling_is_not_ktest_s(pytester: pytest.Pytester, inner_env: dict) -> None:
    """Without pytest-kubernetes, ``--k8s-version`` is unknown (ktest no longer registers it)."""
    pytester.makepyfile("def test_nothing(): pass")
    result = pytester.runpytest_inprocess("-p", "no:pytest-kubernetes", "--k8s-version=1.37")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*unrecognized arguments: --k8s-version*"])
