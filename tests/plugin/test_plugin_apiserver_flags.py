"""Extra kube-apiserver flags and feature gates from the plugin: parsed, checked against the
binary's own ``--help``, and given to the API server of backend bare."""

from __future__ import annotations

from pathlib import Path

import pytest
from inner_runs import printed
from plugin_planes import FLAGS_TEST, NO_CONTROLLERS_SESSION, assert_passed, shared_run

from ktest.config import apiserver_arguments, check_apiserver_flags, resolve_settings
from ktest.errors import ConfigError

pytestmark = pytest.mark.own_plane("API server flags shape the plane the session starts")


def test_flags_and_gates_from_every_source(tmp_path: Path) -> None:
    from_env = resolve_settings(
        env={"KTEST_APISERVER_FLAGS": "--event-ttl=2h --v=2", "KTEST_FEATURE_GATES": "A=true, B=False"},
        cwd=tmp_path,
    )
    assert from_env.apiserver_flags == ("--event-ttl=2h", "--v=2")
    assert from_env.feature_gates == ("A=true", "B=false")
    assert apiserver_arguments(from_env) == ["--event-ttl=2h", "--v=2", "--feature-gates=A=true,B=false"]
    from_ini = resolve_settings(ini={"apiserver_flags": ["--event-ttl=2h"]}, env={}, cwd=tmp_path)
    assert from_ini.apiserver_flags == ("--event-ttl=2h",)
    from_options = resolve_settings(
        options={"apiserver_flags": ["--v=3", "--service-account-issuer=https://x.example:8443"]}, env={}
    )
    assert from_options.apiserver_flags == ("--v=3", "--service-account-issuer=https://x.example:8443")


@pytest.mark.parametrize(
    ("sources", "expected"),
    [
        ({"options": {"apiserver_flags": ["event-ttl=2h"]}},
         "option --ktest-apiserver-flag: 'event-ttl=2h' is not a kube-apiserver flag; write each as "
         "--name=value"),
        ({"env": {"KTEST_APISERVER_FLAGS": "--secure-port=6443"}},
         "environment variable KTEST_APISERVER_FLAGS: --secure-port is chosen by ktest"),
        ({"env": {"KTEST_APISERVER_FLAGS": "--feature-gates=A=true"}}, "give feature gates with "
         "--ktest-feature-gates"),
        ({"ini": {"feature_gates": "AllAlpha=maybe"}},
         "ini key ktest_feature_gates: 'AllAlpha=maybe' is not a feature gate setting; write Name=true or "
         "Name=false"),
        ({"env": {"KTEST_FEATURE_GATES": "AllAlpha=true", "KTEST_BACKEND": "kind"}},
         "environment variable KTEST_FEATURE_GATES: feature gates apply only to the control plane ktest "
         "starts itself (backend bare, without reuse), but this run uses backend kind"),
        ({"env": {"KTEST_APISERVER_FLAGS": "--v=2", "KTEST_REUSE": "1"}}, "this run uses reuse"),
    ],
)
def test_bad_flags_and_gates_say_what_to_write(tmp_path: Path, sources: dict, expected: str) -> None:
    with pytest.raises(ConfigError) as raised:
        resolve_settings(options=sources.get("options"), ini=sources.get("ini"), env=sources.get("env", {}),
                         cwd=tmp_path)
    assert expected in str(raised.value)


@pytest.fixture(scope="module")
def apiserver() -> tuple[Path, str]:
    from ktest.assets import resolve_assets

    assets = resolve_assets(None)
    return assets.binary("kube-apiserver"), assets.version


def test_checked_against_the_binarys_own_flag_list(apiserver: tuple[Path, str], tmp_path: Path) -> None:
    binary, version = apiserver
    good = resolve_settings(
        env={"KTEST_APISERVER_FLAGS": "--event-ttl=2h", "KTEST_FEATURE_GATES": "AllAlpha=false"}
    )
    check_apiserver_flags(good, binary, version)
    typo = resolve_settings(env={"KTEST_APISERVER_FLAGS": "--event-tll=2h"})
    with pytest.raises(ConfigError) as raised:
        check_apiserver_flags(typo, binary, version)
    assert str(raised.value).startswith(
        f"environment variable KTEST_APISERVER_FLAGS: kube-apiserver {version} has no flag --event-tll "
        "(did you mean --event-ttl?)"
    )
    gate = resolve_settings(env={"KTEST_FEATURE_GATES": "AllAlfa=true"})
    with pytest.raises(ConfigError) as raised:
        check_apiserver_flags(gate, binary, version)
    expected = f"kube-apiserver {version} knows no feature gate AllAlfa (did you mean AllAlpha?)"
    assert expected in str(raised.value)


@NO_CONTROLLERS_SESSION.group
def test_plugin_starts_the_api_server_with_them(
    pytester: pytest.Pytester, pytestconfig: pytest.Config, inner_env: dict
) -> None:
    """In plugin_planes.py's ``NO_CONTROLLERS_SESSION`` (``--ktest-apiserver-flag=--event-ttl=2h``,
    ``--ktest-feature-gates=AllAlpha=false``)."""
    result = shared_run(pytester, pytestconfig, NO_CONTROLLERS_SESSION)
    assert_passed(result, "test_flags_reach_the_api_server")
    # the API server's own command line: the flag and the feature gates, as given
    assert printed(result, "ARGS ") == ["['--event-ttl=2h', '--feature-gates=AllAlpha=false']"]


def test_plugin_refuses_an_unknown_flag_before_starting(pytester: pytest.Pytester, inner_env: dict) -> None:
    pytester.makepyfile(FLAGS_TEST)
    result = pytester.runpytest_inprocess("--ktest-apiserver-flag=--no-such-flagz=1")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(
        ["*option --ktest-apiserver-flag: kube-apiserver * has no flag --no-such-flagz*"]
    )
