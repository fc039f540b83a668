"""``pytest --help``: every ktest option shows what it takes; boolean ini keys are declared bool."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.own_plane("the settings line of the session header, reuse off")


def test_help_shows_what_each_option_takes(pytester: pytest.Pytester, inner_env: dict) -> None:
    result = pytester.runpytest_inprocess("--help")
    text = result.stdout.str()
    for option, metavar in [("--ktest-kind-config", "PATH"), ("--ktest-artifacts", "DIR"),
                            ("--ktest-run-dir", "DIR"), ("--ktest-timeout", "SECONDS"),
                            ("--ktest-k8s-version", "VERSION"), ("--ktest-crds", "PATH")]:
        assert f"{option}={metavar}" in text, option
    for option in ("--ktest-kind-config", "--ktest-artifacts", "--ktest-run-dir", "--ktest-backend"):
        assert f"{option}=SECONDS" not in text
    result.stdout.fnmatch_lines_random(["  ktest_reuse (bool):*", "  ktest_keep_cluster (bool):*",
                                        "  ktest_operator_proxy (bool):*", "  ktest_crds (linelist):*",
                                        "  ktest_timeout (string):*"])


PRINT = """
def test_show(ktest_settings):
    print("FLAGS", ktest_settings.keep_cluster, ktest_settings.operator_proxy, ktest_settings.reuse)
"""


def test_boolean_ini_keys_take_toml_booleans(pytester: pytest.Pytester, inner_env: dict) -> None:
    pytester.makepyfile(PRINT)
    pytester.makepyprojecttoml(
        """
        [tool.pytest.ini_options]
        ktest_keep_cluster = true
        ktest_operator_proxy = false
        """
    )
    result = pytester.runpytest_inprocess("-s")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*FLAGS True False False"])


def test_a_bad_boolean_ini_value_names_the_key(pytester: pytest.Pytester, inner_env: dict) -> None:
    pytester.makepyfile(PRINT)
    pytester.makeini("[pytest]\nktest_keep_cluster = sometimes\n")
    result = pytester.runpytest_inprocess()
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(
        ["*ktest: ini key ktest_keep_cluster: *sometimes*allowed values: true or false*"]
    )
