"""``ktest_min_k8s`` on backend bare decides from the version setting, without starting a
control plane: the control plane ktest would start runs the selector's
minor version, or the one ``latest`` resolves to."""

from __future__ import annotations

import pytest
from plugin_planes import ALLOWED_TESTS, NO_CONTROLLERS_SESSION, assert_passed, shared_run

from ktest.assets.selectors import KubeVersion

pytestmark = pytest.mark.own_plane("whether the session starts a plane at all")

TOO_NEW = """
import pytest


@pytest.mark.ktest_min_k8s("{too_new}")
def test_from_the_future(cluster):
    print("RAN future")
"""


@pytest.fixture(scope="module")
def installed() -> KubeVersion:
    """The version ``latest`` resolves to here (the binaries the suite runs on)."""
    from ktest.assets import resolve_assets

    return KubeVersion.parse(resolve_assets(None).version)


@pytest.mark.parametrize("setting", ["default", "minor"])
def test_a_test_for_a_newer_version_is_skipped_without_a_control_plane(
    pytester: pytest.Pytester, inner_env: dict, installed: KubeVersion, setting: str
) -> None:
    too_new = f"{installed.major}.{installed.minor + 1}"
    pytester.makepyfile(TOO_NEW.format(too_new=too_new))
    version_option = [] if setting == "default" else [f"--ktest-k8s-version={installed.minor_text}"]
    result = pytester.runpytest_inprocess("--strict-markers", "-rs", "-s", *version_option)
    result.assert_outcomes(skipped=1)
    runs = installed.text if setting == "default" else installed.minor_text
    result.stdout.fnmatch_lines([
        f"SKIPPED *ktest_min_k8s: this test needs Kubernetes {too_new} or newer, and the cluster runs {runs}*"
    ])
    result.stdout.no_fnmatch_line("*RAN*")
    result.stdout.no_fnmatch_line("*cluster: *")  # the ktest summary names a cluster once one was opened


@NO_CONTROLLERS_SESSION.group
def test_a_test_the_version_allows_still_runs(
    pytester: pytest.Pytester, pytestconfig: pytest.Config, inner_env: dict, installed: KubeVersion
) -> None:
    """Without a test that needs a cluster none is started; with one, the cluster started runs
    the version the settings named (on plugin_planes.py's ``NO_CONTROLLERS_SESSION``, where its
    tests come first: those of test_plugin_apiserver_flags.py and test_plugin_bare.py after them)."""
    pytester.makepyfile(ALLOWED_TESTS)
    result = pytester.runpytest_inprocess("--strict-markers", "-rs", "-s", "--ktest-controllers=none",
                                          "-k", "not on_the_cluster")
    result.assert_outcomes(passed=1, deselected=1)
    result.stdout.fnmatch_lines(["*RAN old_enough*"])
    result.stdout.no_fnmatch_line("*cluster: *")  # nothing needed a cluster, and none was started
    result = shared_run(pytester, pytestconfig, NO_CONTROLLERS_SESSION)
    assert_passed(result, "test_old_enough", "test_old_enough_on_the_cluster")
    result.stdout.fnmatch_lines(["*RAN old_enough*", f"*RAN on {installed.text}*", "cluster: *"])
