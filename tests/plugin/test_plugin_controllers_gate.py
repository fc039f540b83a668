"""The bare backend returns while kube-controller-manager still starts (the session's
fixtures run meanwhile); the plugin waits for its controllers before each test body.

Checked as the first test of plugin_planes.py's ``LONG_NAMES_SESSION`` (controllers given by their
long names); the default controllers, by their short names, with the same gate:
tests/nodes/test_plugin_nodes.py."""

from __future__ import annotations

import pytest
from plugin_planes import LONG_NAMES_SESSION, assert_passed, shared_run

pytestmark = pytest.mark.own_plane("the session's own plane gating on its controllers")


@LONG_NAMES_SESSION.group
def test_the_plugin_runs_each_test_body_with_the_controllers_running(
    pytester: pytest.Pytester, pytestconfig: pytest.Config, inner_env: dict[str, str]
) -> None:
    result = shared_run(pytester, pytestconfig, LONG_NAMES_SESSION)
    assert_passed(result, "test_first")
