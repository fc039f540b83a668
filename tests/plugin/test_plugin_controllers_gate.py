"""The bare backend returns while kube-controller-manager still starts (the session's
fixtures run meanwhile); the plugin waits for its controllers before each test body."""

from __future__ import annotations

import pytest

from ktest.assets import Assets

pytestmark = pytest.mark.own_plane("the session's own plane gating on its controllers")


def test_the_plugin_runs_each_test_body_with_the_controllers_running(
    pytester: pytest.Pytester, k8s_assets: Assets, inner_env: dict[str, str]
) -> None:
    pytester.makepyfile(
        """
        from ktest.controlplane.controller_manager import ready_markers

        def test_first(ktest_backend):
            plane = ktest_backend.control_plane
            log = plane.log_path("kube-controller-manager").read_bytes()
            missing = [m for m in ready_markers(plane.controllers) if m not in log]
            assert not missing, f"the test body ran before the controllers: {missing}"
            # no --ktest-controllers: the default ones, by their short names
            assert plane.controllers == {"garbagecollector", "namespace"}
        """
    )
    result = pytester.runpytest_inprocess(
        "--ktest-backend=bare", f"--ktest-k8s-version={k8s_assets.version}"
    )
    result.assert_outcomes(passed=1)
